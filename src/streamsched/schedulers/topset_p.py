"""TopSet/P (edge-cloud-topset.txt section 4.1): TopSet plus the interference penalty on the
latencies of the dataflow's queries already on a candidate node."""

from streamsched.edge.adapter import topset_placement
from streamsched.schedulers import register
from streamsched.schedulers.base import Scheduler


@register
class TopSetPenaltyScheduler(Scheduler):
    name = "topset-p"
    summary = "TopSet/P: TopSet with the co-location interference penalty"

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster, penalty=True)
