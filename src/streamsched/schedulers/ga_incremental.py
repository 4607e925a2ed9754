"""GA-Incremental (edge-cloud-topset.txt section 4.2): a seeded, vectorised genetic algorithm
placing the graph on the capacity the cluster has; invalid chromosomes are penalised."""

from streamsched.edge.adapter import ga_placement
from streamsched.schedulers import register
from streamsched.schedulers._edge_ga import GA_PARAMS, settings
from streamsched.schedulers.base import Scheduler


@register
class GAIncrementalScheduler(Scheduler):
    name = "ga-incremental"
    summary = "GA-Incremental: genetic algorithm minimising the critical path under the edge constraints"
    params = GA_PARAMS
    randomised = True

    def place(self, graph, cluster, params, seed):
        return ga_placement(graph, cluster, settings(params), seed, params["warm_start"])
