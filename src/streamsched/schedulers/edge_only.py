"""Edge-Only (edge-cloud-topset.txt section 5) on a finite cluster: TopSet restricted to edge
nodes (sinks on cloud by constraint 1), spilling to any node only when no edge node is valid.

The simulation's Edge-Only is the paper's unlimited-resource lower bound
(:func:`streamsched.edge.simulation.baseline_makespan`); a finite cluster needs a placement."""

from streamsched.edge.adapter import topset_placement
from streamsched.edge.model import EDGE
from streamsched.schedulers import register
from streamsched.schedulers.base import Scheduler


@register
class EdgeOnlyScheduler(Scheduler):
    name = "edge-only"
    summary = "Edge-Only baseline: TopSet on edge nodes first (sinks on cloud)"

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster, prefer_kind=EDGE)
