"""The scheduler registry: one module per scheduler, registered by name.

Modules of this package register themselves with :func:`register`; :func:`available` imports
them all on first use. The registry refuses duplicates and answers an unknown name with the
list of known ones.
"""

from __future__ import annotations

import importlib
import pkgutil

from streamsched.errors import InputError
from streamsched.schedulers.base import Param, Scheduler

_REGISTRY: dict[str, type[Scheduler]] = {}
_DISCOVERED = False


def register(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator adding a scheduler under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"scheduler {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base" and not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    _DISCOVERED = True


def available() -> list[str]:
    """Names of every registered scheduler, sorted."""
    _discover()
    return sorted(_REGISTRY)


def scheduler_class(name: str) -> type[Scheduler]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown scheduler {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


def get_scheduler(name: str, **params) -> Scheduler:
    """An instance of the scheduler ``name`` with ``params`` (validated when it runs)."""
    return scheduler_class(name)(**params)


__all__ = ["Param", "Scheduler", "available", "get_scheduler", "register", "scheduler_class"]
