"""BAN-Storm: bandwidth-aware scheduling (Muhammad [1]_ section 3.4; [2]_).

Algorithm 7 (logical grouping by traffic, as A3-Storm), Algorithm 8 (slots by decreasing
traffic onto nodes ranked by eq. 3.3, ``alpha x GFLOPs + beta x RAM(GB) + gamma x Mbps``) and
Algorithm 9 (the weight of the topology's bound resource is 0.5, the two others 0.25; an
I/O-bound topology weighs all three 0.25). Shared steps and their adaptations:
:mod:`streamsched.schedulers._executor_grouping`.

References
----------
.. [1] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
.. [2] Muhammad, A.; Aleem, M. (2021) "BAN-Storm: a bandwidth-aware scheduling mechanism for stream
   jobs", Journal of Grid Computing 19(3).
"""

from __future__ import annotations

from streamsched.schedulers import register
from streamsched.schedulers._executor_grouping import ThesisScheduler, node_power, rank_nodes
from streamsched.schedulers.base import Param

TOPOLOGY_TYPES = ("cpu", "memory", "network", "io")


def power_weights(topology_type: str) -> tuple[float, float, float]:
    """Algorithm 9: (alpha, beta, gamma) for a CPU-, memory-, network- or I/O-bound topology."""
    bound = {"cpu": 0, "memory": 1, "network": 2}.get(topology_type)
    weights = [0.25, 0.25, 0.25]
    if bound is not None:
        weights[bound] = 0.5
    return weights[0], weights[1], weights[2]


@register
class BanStormScheduler(ThesisScheduler):
    name = "ban-storm"
    summary = "BAN-Storm: A3-Storm's grouping, nodes ranked by GFLOPs, RAM and bandwidth (eq. 3.3)"
    objective = "resources"  # thesis section 1.4, research question 1
    by_traffic = True
    params = ThesisScheduler.params + (
        Param("topology_type", str, "cpu", "which resource bounds the topology (Algorithm 9)", choices=TOPOLOGY_TYPES),
    )

    def node_rank(self, cluster, params):
        alpha, beta, gamma = power_weights(params["topology_type"])
        return rank_nodes([node_power(node, alpha, beta, gamma) for node in cluster.nodes])
