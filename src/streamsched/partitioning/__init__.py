"""Graph partitioning for schedulers: partitioner back-ends, hard part capacities, the second level.

- :func:`partition` (``backends``): K-way partitioning by METIS (default) or KaHIP.
- :func:`fit_parts` (``balance``): repair a partition so every part respects a hard capacity.
- :func:`assign_workers` (``workers``): tasks of each node to its worker slots.
"""

from streamsched.partitioning.backends import partition
from streamsched.partitioning.balance import fit_parts
from streamsched.partitioning.workers import assign_workers

__all__ = ["assign_workers", "fit_parts", "partition"]
