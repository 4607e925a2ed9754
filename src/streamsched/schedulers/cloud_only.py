"""Cloud-Only (edge-cloud-topset.txt section 5) on a finite cluster: TopSet restricted to
cloud nodes (sources on edge by constraint 1), spilling to any node only when no cloud node is
valid. The simulation's Cloud-Only is the paper's unlimited-resource lower bound."""

from streamsched.edge.adapter import topset_placement
from streamsched.edge.model import CLOUD
from streamsched.schedulers import register
from streamsched.schedulers.base import Scheduler


@register
class CloudOnlyScheduler(Scheduler):
    name = "cloud-only"
    summary = "Cloud-Only baseline: TopSet on cloud nodes first (sources on edge)"

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster, prefer_kind=CLOUD)
