"""The edge + cloud strategies of Ghosh et al. [1]_ as registered schedulers, declared in one
table (:data:`STRATEGIES`) rather than written out one module each: all six place by the edge
model's own algorithms (:mod:`streamsched.edge.adapter` maps the cluster to the edge model:
capacity = constraint 2, node kinds = constraint 1) and minimise the makespan.

- ``topset`` (section 4.1, Algorithm 1): tasks by topological sets, children by decreasing
  latency, each on the valid node with the shortest critical path to it.
- ``topset-p`` (section 4.1): TopSet plus the interference penalty on the latencies of the
  queries already on a candidate node. A cluster has no interference model, so the penalty is
  zero and the placement would be TopSet's: skipped (they differ in ``edge simulate``).
- ``cloud-only`` / ``edge-only`` (section 5) on a finite cluster: TopSet restricted to cloud
  (sources on edge) or edge nodes (sinks on cloud), spilling to any node only when none of that
  kind is valid. The simulation's versions are the paper's unlimited-resource bounds
  (:func:`streamsched.edge.simulation.baseline_makespan`).
- ``ga-incremental`` (section 4.2): a seeded, vectorised genetic algorithm placing the graph on
  the capacity the cluster has; invalid chromosomes are penalised.
- ``ga-global`` (section 4.2): the GA over every active dataflow ab initio. One graph on an
  empty cluster is the whole active set, so the search would be GA-Incremental's: skipped (the
  two differ in the simulation, where GA-Global re-places all dataflows every interval).

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from streamsched.edge.adapter import ga_placement, topset_placement
from streamsched.edge.ga import GASettings
from streamsched.edge.model import CLOUD, EDGE
from streamsched.schedulers import register
from streamsched.schedulers.base import Param, Scheduler

GA_PARAMS = (
    Param("population", int, 64, "chromosomes per generation", low=4, high=10_000),
    Param("generations", int, 100, "at most; stops early after no improvement in the last half", low=1, high=100_000),
    Param("crossover", float, 0.9, "probability of uniform crossover", low=0.0, high=1.0),
    Param("mutation", float, 0.0, "per-gene mutation probability (0 = 1 / tasks)", low=0.0, high=1.0),
    Param("warm_start", bool, True, "put TopSet's placement in the first population"),
)


def _ga(graph, cluster, params, seed):
    settings = GASettings(population=params["population"], generations=params["generations"],
                          crossover=params["crossover"], mutation=params["mutation"])
    return ga_placement(graph, cluster, settings, seed, params["warm_start"])


@dataclass(frozen=True)
class Strategy:
    """One row of :data:`STRATEGIES`: what the registered scheduler is called, does and skips."""

    name: str
    summary: str
    place: Callable[[Any, Any, dict[str, Any], int], Any]
    params: tuple[Param, ...] = ()
    skip: str | None = None

    def scheduler(self) -> type[Scheduler]:
        """The scheduler class (family ``edge``, objective ``makespan``, needs edge nodes)."""
        strategy = self

        class EdgeStrategy(Scheduler):
            name, summary, params = strategy.name, strategy.summary, strategy.params
            family, objective, needs_edge_nodes, randomised = "edge", "makespan", True, bool(strategy.params)

            def skip_reason(self, graph, cluster):
                return super().skip_reason(graph, cluster) or strategy.skip

            def place(self, graph, cluster, params, seed):
                return strategy.place(graph, cluster, params, seed)

        EdgeStrategy.__name__ = EdgeStrategy.__qualname__ = "".join(p.title() for p in strategy.name.split("-"))
        EdgeStrategy.__doc__ = strategy.summary
        return EdgeStrategy


STRATEGIES = (
    Strategy("topset", "TopSet: topological set order, each task on the valid node with the shortest critical path",
             lambda g, c, p, s: topset_placement(g, c)),
    Strategy("topset-p", "TopSet/P: TopSet with the co-location interference penalty",
             lambda g, c, p, s: topset_placement(g, c, penalty=True),
             skip="a cluster has no interference model, so the penalty is zero and the placement would be "
                  "topset's (the two differ in `streamsched edge simulate`)"),
    Strategy("cloud-only", "Cloud-Only baseline: TopSet on cloud nodes first (sources on edge)",
             lambda g, c, p, s: topset_placement(g, c, prefer_kind=CLOUD)),
    Strategy("edge-only", "Edge-Only baseline: TopSet on edge nodes first (sinks on cloud)",
             lambda g, c, p, s: topset_placement(g, c, prefer_kind=EDGE)),
    Strategy("ga-incremental",
             "GA-Incremental: genetic algorithm minimising the critical path under the edge constraints", _ga,
             GA_PARAMS),
    Strategy("ga-global", "GA-Global: genetic algorithm re-placing every dataflow on full capacities", _ga, GA_PARAMS,
             skip="one graph on an empty cluster is the whole active set, so the placement would be "
                  "ga-incremental's (the two differ in `streamsched edge simulate`)"),
)

for _strategy in STRATEGIES:
    register(_strategy.scheduler())
