"""GA-Global (Ghosh et al. [1]_ section 4.2): the GA over every active dataflow ab initio.

One task graph on an empty cluster is the whole active set, so the search is GA-Incremental's
on full capacities; the two differ in the simulation (:mod:`streamsched.edge.simulation`),
where GA-Global re-places all dataflows at every control interval.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from streamsched.schedulers import register
from streamsched.schedulers.ga_incremental import GAIncrementalScheduler


@register
class GAGlobalScheduler(GAIncrementalScheduler):
    name = "ga-global"
    summary = "GA-Global: genetic algorithm re-placing every dataflow on full capacities"

    def skip_reason(self, graph, cluster):
        """One graph on an empty cluster is the whole active set: the search is GA-Incremental's."""
        return ("one graph on an empty cluster is the whole active set, so the placement would be "
                "ga-incremental's (the two differ in `streamsched edge simulate`)")
