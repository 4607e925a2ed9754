"""The scheduler registry: one module per scheduler, registered by name.

Modules of :mod:`streamsched.schedulers` register themselves with :func:`register`; :func:`available` imports
them all on first use. The registry refuses duplicates and tags outside their domain
(:data:`~streamsched.schedulers.base.FAMILIES`, :data:`~streamsched.schedulers.base.OBJECTIVES`,
booleans), and answers an unknown name with the list of known ones. :func:`family` lists one
family's names.
"""

from __future__ import annotations

import importlib
import pkgutil

from streamsched.errors import InputError
from streamsched.schedulers.base import FAMILIES, OBJECTIVES, Scheduler

PACKAGE = "streamsched.schedulers"
_REGISTRY: dict[str, type[Scheduler]] = {}
_DISCOVERED = False


def register(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator adding a scheduler under ``cls.name``, its tags checked."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"scheduler {cls.name!r} registered twice")
    for tag, allowed in (("family", FAMILIES), ("objective", OBJECTIVES)):
        if getattr(cls, tag) not in allowed:
            raise ValueError(f"scheduler {cls.name!r}: {tag} {getattr(cls, tag)!r} is not one of {', '.join(allowed)}")
    for tag in ("exact", "randomised", "needs_edge_nodes"):
        if not isinstance(getattr(cls, tag), bool):
            raise ValueError(f"scheduler {cls.name!r}: tag {tag} must be True or False, got {getattr(cls, tag)!r}")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    package = importlib.import_module(PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in ("base", "registry") and not module.name.startswith("_"):
            importlib.import_module(f"{PACKAGE}.{module.name}")
    _DISCOVERED = True


def available() -> list[str]:
    """Names of every registered scheduler, sorted."""
    _discover()
    return sorted(_REGISTRY)


def family(name: str) -> list[str]:
    """Names of the registered schedulers of family ``name`` ("cluster" or "edge"), sorted."""
    if name not in FAMILIES:
        raise InputError(f"unknown scheduler family {name!r} (known: {', '.join(FAMILIES)})")
    return [n for n in available() if _REGISTRY[n].family == name]


def scheduler_class(name: str) -> type[Scheduler]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown scheduler {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


def get_scheduler(name: str, **params) -> Scheduler:
    """An instance of the scheduler ``name`` with ``params`` (validated when it runs)."""
    return scheduler_class(name)(**params)

