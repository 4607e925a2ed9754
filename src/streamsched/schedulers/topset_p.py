"""TopSet/P (Ghosh et al. [1]_ section 4.1): TopSet plus the interference penalty on the
latencies of the dataflow's queries already on a candidate node.

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
class TopSetPenaltyScheduler(Scheduler):
    name = "topset-p"
    summary = "TopSet/P: TopSet with the co-location interference penalty"
    family = "edge"
    objective = "makespan"
    needs_edge_nodes = True

    def skip_reason(self, graph, cluster):
        """The edge adapter gives a cluster no interference (no such field on a node), so the
        penalty is zero and TopSet/P places as TopSet; they differ in ``edge simulate``."""
        return ("a cluster has no interference model, so the penalty is zero and the placement would be "
                "topset's (the two differ in `streamsched edge simulate`)")

    def place(self, graph, cluster, params, seed):
        return topset_placement(graph, cluster, penalty=True)
