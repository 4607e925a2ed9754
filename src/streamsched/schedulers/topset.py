"""TopSet (Ghosh et al. [1]_ section 4.1, Algorithm 1) as a registered scheduler.

Tasks are visited by topological sets, children by decreasing latency, each on the valid node
with the shortest critical path to it; the cluster is mapped to the edge model by
:mod:`streamsched.edge.adapter` (capacity = constraint 2, node kinds = constraint 1).

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from streamsched.edge.adapter import topset_placement
from streamsched.schedulers import register
from streamsched.schedulers.base import Scheduler


@register
class TopSetScheduler(Scheduler):
    name = "topset"
    summary = "TopSet: topological set order, each task on the valid node with the shortest critical path"
    family = "edge"
    objective = "makespan"
    needs_edge_nodes = True

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster)
