"""TOP-Storm: topology-based resource-aware scheduling (Muhammad [1]_ section 3.2;
[2]_).

Algorithm 1 (main), Algorithm 2 (executor grouping over the DAG's connectivity: a connected
pair, then the executor with the most connections to the slot, ``ceil(e / omega)`` per slot,
leftovers round robin) and Algorithm 3 (slots with the most executors onto the most powerful
nodes, eq. 3.2 with ``alpha`` = 0.8, a node's slots used up before the next). Shared steps and
their adaptations: :mod:`streamsched.schedulers._executor_grouping`.

References
----------
.. [1] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
.. [2] Muhammad, A.; Aleem, M.; Islam, M. A. (2021) "TOP-Storm: A topology-based resource-aware
   scheduler for stream processing engine", Cluster Computing 24(1), pp. 417-431.
"""

from __future__ import annotations

import numpy as np

from streamsched.schedulers import register
from streamsched.schedulers._executor_grouping import PowerRankedScheduler


@register
class TopStormScheduler(PowerRankedScheduler):
    name = "top-storm"
    summary = "TOP-Storm: DAG-connected executors grouped per slot, slots onto the most powerful nodes"
    objective = "resources"  # thesis section 1.4, research question 1
    by_traffic = False

    def slot_order(self, graph, slots):
        """Algorithm 3 lines 18-20: slots by decreasing number of executors."""
        sizes = np.array([len(slot) for slot in slots])
        return [int(k) for k in np.lexsort((np.arange(len(slots)), -sizes))]
