"""A3-Storm: topology, traffic and resource-aware scheduling (Muhammad [1]_ section
3.3; [2]_).

Algorithm 4 (main), Algorithm 5 (executor pairs by decreasing traffic, Table 3.6; the executor
with the most traffic to the slot joins it, ``ceil(e / omega)`` per slot; leftovers round robin)
and Algorithm 6 (slots by decreasing traffic onto nodes ranked by eq. 3.2 with ``alpha`` = 0.8,
a node's slots used up before the next). Shared steps and their adaptations:
:mod:`streamsched.schedulers._executor_grouping`.

References
----------
.. [1] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
.. [2] Muhammad, A.; Aleem, M. (2021) "A3-Storm: topology-, traffic-, and resource-aware Storm
   scheduler for heterogeneous clusters", The Journal of Supercomputing 77(2), pp. 1059-1093.
"""

from __future__ import annotations

from streamsched.schedulers import register
from streamsched.schedulers._executor_grouping import PowerRankedScheduler


@register
class A3StormScheduler(PowerRankedScheduler):
    name = "a3-storm"
    summary = "A3-Storm: executors grouped by traffic per slot, busiest slots onto the most powerful nodes"
    objective = "traffic"  # thesis section 1.4, research question 2
    by_traffic = True
