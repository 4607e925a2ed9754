"""TopSet (edge-cloud-topset.txt section 4.1) as a registered scheduler.

Tasks are visited by topological sets, children by decreasing latency, each on the valid node
with the shortest critical path to it; the cluster is mapped to the edge model by
:mod:`streamsched.edge.adapter` (capacity = constraint 2, node kinds = constraint 1).
"""

from streamsched.edge.adapter import topset_placement
from streamsched.schedulers import register
from streamsched.schedulers.base import Scheduler


@register
class TopSetScheduler(Scheduler):
    name = "topset"
    summary = "TopSet: topological set order, each task on the valid node with the shortest critical path"

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster)
