"""Edge-Only (Ghosh et al. [1]_ section 5) on a finite cluster: TopSet restricted to edge
nodes (sinks on cloud by constraint 1), spilling to any node only when no edge node is valid.

The simulation's Edge-Only is the paper's unlimited-resource lower bound
(:func:`streamsched.edge.simulation.baseline_makespan`); a finite cluster needs a placement.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from streamsched.edge.adapter import topset_placement
from streamsched.edge.model import EDGE
from streamsched.schedulers import register
from streamsched.schedulers.base import Scheduler


@register
class EdgeOnlyScheduler(Scheduler):
    name = "edge-only"
    summary = "Edge-Only baseline: TopSet on edge nodes first (sinks on cloud)"
    family = "edge"
    objective = "makespan"
    needs_edge_nodes = True

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster, prefer_kind=EDGE)
