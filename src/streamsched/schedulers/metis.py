"""Fischer and Bernstein's METIS scheduler [1]_ (sections III and IV-B3).

METIS: the multilevel scheme [2]_ and its k-way form [3]_.

The communication graph G = (V, E) is k-way partitioned into as many parts as nodes (or as
worker slots), minimising cost(G, P) (section III, the sum of ``ew_ij`` over edges between
parts) subject to loadImba(G, P) <= I, with METIS k-way, objective total communication volume
(``-objtype=vol``) and I = 1.03 (section IV-B3). Edge weight = messages per second (the rate);
vertex weight = tuples emitted + received by the task (section III-B, last paragraph).

Fischer's scheduler is homogeneous by design: gpmetis makes parts of equal weight. On a
heterogeneous cluster it does the same here (``part_sizes=equal``): the parts, heaviest load
first, go to the nodes, largest capacity first, and tasks of a part larger than its node's
capacity are moved out, best FM gain first (:func:`~streamsched.partitioning.fit_parts`), so
small nodes end up with the overflow of a balanced split; when that cannot make every part fit,
the packing fails (:class:`~streamsched.schedulers.base.PackingFailed`: repaired, or refused
with ``strict``). ``part_sizes=capacity`` asks METIS
for parts proportional to node capacity instead (METIS ``tpwgts``), an extension. The tasks
of each node are then split over its workers (the second level,
:mod:`streamsched.partitioning.workers`); with ``parts=workers`` each part is one worker slot
instead (Fischer's setup had one slot per node), holding at most capacity / slots of load.

References
----------
.. [1] Fischer, L.; Bernstein, A. (2015) "Workload scheduling in distributed stream processors using
   graph partitioning", 2015 IEEE International Conference on Big Data (IEEE BigData 2015), Santa
   Clara, CA, IEEE Computer Society.
.. [2] Karypis, G.; Kumar, V. (1998) "A fast and high quality multilevel scheme for partitioning
   irregular graphs", SIAM Journal on Scientific Computing 20(1), pp. 359-392.
.. [3] Karypis, G.; Kumar, V. (1998) "Multilevel k-way partitioning scheme for irregular graphs",
   Journal of Parallel and Distributed Computing 48(1), pp. 96-129.
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model.placement import Placement
from streamsched.partitioning import assign_workers, fit_parts, partition
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler


def traffic_weights(graph) -> np.ndarray:
    """Tuples emitted + received per task ([1]_ section III-B): the vertex weight."""
    n = graph.n_tasks
    return (np.bincount(graph.src, weights=graph.rate, minlength=n)
            + np.bincount(graph.dst, weights=graph.rate, minlength=n))


@register
class MetisScheduler(Scheduler):
    name = "metis"
    summary = "Fischer's METIS scheduler: k-way partitioning into one part per node, communication volume"
    objective = "traffic"
    randomised = True
    params = (
        Param("imbalance", float, 1.03, "METIS load imbalance I (max part weight / average)", low=1.0, high=10.0),
        Param("objective", str, "volume", "METIS objective", choices=("volume", "cut")),
        Param("vertex_weight", str, "traffic", "tuples emitted + received (Fischer) or task load",
              choices=("traffic", "load")),
        Param("part_sizes", str, "equal", "equal parts (Fischer) or proportional to node capacity",
              choices=("equal", "capacity")),
        Param("parts", str, "nodes", "one part per node or per worker slot", choices=("nodes", "workers")),
        Param("max_tasks_per_worker", int, 5, "second level: T, tasks per worker", low=1),
        Param("method", str, "kway", "METIS k-way (gpmetis' default), recursive bisection, or the "
              "better of both on small graphs", choices=("kway", "recursive", "auto")),
        Param("backend", str, "metis", "partitioner (kahip: KaHIP eco, kahip-fast: KaHIP fast)",
              choices=("metis", "kahip", "kahip-fast")),
        STRICT,
    )

    def place(self, graph, cluster, params, seed):
        if params["method"] == "recursive" and params["objective"] == "volume":
            raise ParameterError("metis.params.method: 'recursive' minimises the edge cut only; "
                                 "use it with objective=cut")
        if params["parts"] == "workers":
            node_of_part = np.repeat(np.arange(cluster.n_nodes), cluster.slots)
            slot_of_part = np.concatenate([np.arange(s) for s in cluster.slots.tolist()])
            part_capacity = (cluster.capacity / np.maximum(cluster.slots, 1))[node_of_part]
        else:
            node_of_part = np.arange(cluster.n_nodes)
            part_capacity = cluster.capacity
        n_parts = node_of_part.size
        adjacency = graph.undirected
        weights = traffic_weights(graph) if params["vertex_weight"] == "traffic" else np.array(graph.load)
        if weights.sum() <= 0:
            weights = np.ones(graph.n_tasks)
        fractions = part_capacity if params["part_sizes"] == "capacity" else None
        parts = partition(adjacency, n_parts, vertex_weights=weights, target_fractions=fractions,
                          imbalance=params["imbalance"], objective=params["objective"], seed=seed,
                          backend=params["backend"], method=params["method"])
        if fractions is None:
            parts = _heaviest_to_largest(parts, graph.load, part_capacity)
        per_slot = params["parts"] == "workers"

        def second_level(node_of: np.ndarray) -> np.ndarray:
            return assign_workers(graph, cluster, node_of, params["max_tasks_per_worker"], seed, params["backend"])

        try:
            parts = fit_parts(adjacency, parts, graph.load, part_capacity)
        except InfeasibleError as exc:
            raise PackingFailed(f"metis: parts do not fit their capacities: {exc}", node_of_part[parts],
                                slot_of_part[parts] if per_slot else None, metadata={"parts": n_parts},
                                workers_for=None if per_slot else second_level) from None
        node_of = node_of_part[parts]
        worker_of = slot_of_part[parts] if per_slot else second_level(node_of)
        return Placement.build(node_of, worker_of, {"parts": n_parts})


def _heaviest_to_largest(parts: np.ndarray, load: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Relabel equal-sized parts so the k-th heaviest (by load) lands on the k-th largest capacity."""
    n_parts = capacity.size
    held = np.bincount(parts, weights=load, minlength=n_parts)
    by_load = np.lexsort((np.arange(n_parts), -held))
    by_capacity = np.lexsort((np.arange(n_parts), -capacity))
    relabel = np.empty(n_parts, np.int64)
    relabel[by_load] = by_capacity
    return relabel[parts]
