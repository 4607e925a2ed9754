"""GA-Incremental (Ghosh et al. [1]_ section 4.2): a seeded, vectorised genetic algorithm
placing the graph on the capacity the cluster has; invalid chromosomes are penalised.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from streamsched.edge.adapter import ga_placement
from streamsched.schedulers import register
from streamsched.schedulers._edge_ga import GA_PARAMS, settings
from streamsched.schedulers.base import Scheduler


@register
class GAIncrementalScheduler(Scheduler):
    name = "ga-incremental"
    summary = "GA-Incremental: genetic algorithm minimising the critical path under the edge constraints"
    family = "edge"
    objective = "makespan"
    needs_edge_nodes = True
    params = GA_PARAMS
    randomised = True

    def place(self, graph, cluster, params, seed):
        return ga_placement(graph, cluster, settings(params), seed, params["warm_start"])
