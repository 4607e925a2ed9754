"""GA-Global (edge-cloud-topset.txt section 4.2): the GA over every active dataflow ab initio.

One task graph on an empty cluster is the whole active set, so the search is GA-Incremental's
on full capacities; the two differ in the simulation (:mod:`streamsched.edge.simulation`),
where GA-Global re-places all dataflows at every control interval."""

from streamsched.schedulers import register
from streamsched.schedulers.ga_incremental import GAIncrementalScheduler


@register
class GAGlobalScheduler(GAIncrementalScheduler):
    name = "ga-global"
    summary = "GA-Global: genetic algorithm re-placing every dataflow on full capacities"
