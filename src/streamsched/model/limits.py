"""Size bounds checked before work starts (issue 16): a cluster of 10^8 nodes or a topology of
10^9 tasks would otherwise run until the machine runs out of memory.

The limits derive from the memory available when streamsched starts (``MemAvailable``; at
least the floors below, so the 1M-task / 10M-edge graphs of the scale tests always pass) and
can be overridden with the environment variables ``STREAMSCHED_MAX_TASKS`` and
``STREAMSCHED_MAX_NODES`` (a user who means it, on a machine that has the memory). Logical
operators per topology are bounded by a fixed ``MAX_OPERATORS`` (``STREAMSCHED_MAX_OPERATORS``).
"""

from __future__ import annotations

import os

from streamsched.errors import InputError

#: Bytes of memory one task costs through a schedule (graph arrays, partitioner input,
#: placement, metrics), a generous estimate; one node costs far more (per-node tables).
BYTES_PER_TASK = 2_000
BYTES_PER_NODE = 20_000
#: Never refused below these: the scale tests' 1M-task graphs, clusters of 100k nodes.
MIN_MAX_TASKS = 2_000_000
MIN_MAX_NODES = 100_000


def available_memory() -> int:
    """Bytes of memory available now (``/proc/meminfo``), or physical memory, or 4 GiB."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def _limit(variable: str, floor: int, per_item: int) -> int:
    given = os.environ.get(variable)
    if given:
        try:
            return int(float(given))
        except ValueError:
            raise InputError(f"{variable}={given!r}: not a number") from None
    return max(floor, available_memory() // per_item)


def max_tasks() -> int:
    return _limit("STREAMSCHED_MAX_TASKS", MIN_MAX_TASKS, BYTES_PER_TASK)


def max_nodes() -> int:
    return _limit("STREAMSCHED_MAX_NODES", MIN_MAX_NODES, BYTES_PER_NODE)


#: Logical operators of one topology: built one by one in Python (200,000 took over a minute,
#: issue 16); real topologies have tens to hundreds. Task counts are bounded separately.
MAX_OPERATORS = 50_000


def check_operators(count: int, where: str) -> None:
    """Refuse more than ``MAX_OPERATORS`` operators (override: ``STREAMSCHED_MAX_OPERATORS``)."""
    limit = _limit("STREAMSCHED_MAX_OPERATORS", MAX_OPERATORS, 1 << 62)
    if count > limit:
        raise InputError(f"{where}: {count:,} operators exceed the limit of {limit:,} "
                         f"(set STREAMSCHED_MAX_OPERATORS to override)")


def check_tasks(count: int, where: str) -> None:
    """Refuse ``count`` tasks (exit 2) above :func:`max_tasks`, naming ``where``."""
    limit = max_tasks()
    if count > limit:
        raise InputError(f"{where}: {count:,} tasks exceed the limit of {limit:,} for this machine's memory "
                         f"(set STREAMSCHED_MAX_TASKS to override)")


def check_nodes(count: int, where: str) -> None:
    """Refuse ``count`` nodes (exit 2) above :func:`max_nodes`, naming ``where``."""
    limit = max_nodes()
    if count > limit:
        raise InputError(f"{where}: {count:,} nodes exceed the limit of {limit:,} for this machine's memory "
                         f"(set STREAMSCHED_MAX_NODES to override)")
