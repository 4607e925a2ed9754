"""The schedulers: one module each, registered by name (:mod:`.registry`), behind the interface
of :mod:`.base` (tags say each one's family and objective)."""

from streamsched.schedulers.base import Param, Scheduler
from streamsched.schedulers.registry import available, family, get_scheduler, register, scheduler_class

__all__ = ["Param", "Scheduler", "available", "family", "get_scheduler", "register", "scheduler_class"]
