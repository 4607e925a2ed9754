"""A3-Storm: topology, traffic and resource-aware scheduling (thesis-top-a3-ban-gr-storm.txt section 3.3).

Algorithm 4 (main), Algorithm 5 (executor pairs by decreasing traffic, Table 3.6; the executor
with the most traffic to the slot joins it, ``ceil(e / omega)`` per slot; leftovers round robin)
and Algorithm 6 (slots by decreasing traffic onto nodes ranked by eq. 3.2 with ``alpha`` = 0.8,
a node's slots used up before the next). Shared steps and their adaptations:
:mod:`streamsched.schedulers._executor_grouping`.
"""

from __future__ import annotations

from streamsched.schedulers import register
from streamsched.schedulers._executor_grouping import PowerRankedScheduler


@register
class A3StormScheduler(PowerRankedScheduler):
    name = "a3-storm"
    summary = "A3-Storm: executors grouped by traffic per slot, busiest slots onto the most powerful nodes"
    by_traffic = True
