"""K-way graph partitioning behind one function: METIS (pymetis, default) or KaHIP (kahip).

Both take integer weights, so float loads and rates are scaled to integers first (exactly when
they already are integers of moderate size, else to about 2^20 levels of the largest value).
The result is deterministic for a seed: METIS gets ``OPTION_SEED``, KaHIP its ``seed`` argument.
Both libraries print to the process's standard output (METIS: ``***Cannot bisect a graph with
0 vertices!`` when there are more parts than vertices); every call runs inside
:func:`~streamsched.native_output.captured_native_output`, so their messages go to the
``streamsched.native`` logger (``--verbose``), never to stdout.

References
----------
.. [1] Karypis, G.; Kumar, V. (1998) A fast and high quality multilevel scheme for partitioning
   irregular graphs. SIAM J. Sci. Comput. 20(1). (METIS, k-way, ``ufactor``, ``objtype``)
.. [2] Sanders, P.; Schulz, C. (2013) Think locally, act globally: highly balanced graph
   partitioning. SEA 2013. (KaHIP ``kaffpa``)
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from streamsched.errors import InfeasibleError, InputError
from streamsched.metrics import cut_traffic
from streamsched.native_output import captured_native_output
from streamsched.model.placement import CAPACITY_TOLERANCE
from streamsched.partitioning.balance import fit_parts

#: ``kahip`` runs KaHIP's eco preset, ``kahip-fast`` its fast one (about 2 % more cut than METIS
#: for twice its time on large measured graphs; eco: 25x).
BACKENDS = ("metis", "kahip", "kahip-fast")
OBJECTIVES = ("cut", "volume")
METHODS = ("auto", "kway", "recursive")
#: ``method="auto"`` runs both METIS methods on graphs up to this many vertices, keeping the
#: smaller cut: k-way ignores balance on tiny graphs (star-20 into 5 parts: one part of 20),
#: recursive bisection does not; beyond it k-way alone (a second run would double the time of
#: the second level on large graphs, for little gain).
AUTO_BOTH_LIMIT = 500
#: Integer resolution of scaled weights (the largest weight becomes about this).
WEIGHT_LEVELS = 2**20
#: The scaled weights of one array sum to at most this, so that no sum METIS or KaHIP forms
#: overflows their 32-bit integers (KaHIP always; METIS as pymetis is usually built), with
#: room for twice the total.
WEIGHT_SUM_LIMIT = 2**30
#: k-way volume with more than this vertices x parts and more than VOLUME_LEVEL_PARTS parts runs
#: in nested levels of at most VOLUME_LEVEL_PARTS parts (:func:`_metis_volume_levels`); below
#: it one METIS call (100,000 vertices into 100 parts: about 4 s). Levels of 4 parts were the
#: fastest on the 1,000,000-vertex benchmark graph (1,000 parts: 39 s of CPU; levels of 8:
#: 45 s, of about 10: 66 s, 32 x 31: 80 s) at about the same volume (5.76 M; 8: 5.73 M).
VOLUME_DIRECT_WORK = 2 * 10**7
VOLUME_LEVEL_PARTS = 4


def integer_weights(values: np.ndarray, allow_zero: bool) -> np.ndarray:
    """Non-negative floats as int64 for a partitioner: kept when already small integers, else scaled.

    The largest becomes at most :data:`WEIGHT_LEVELS` and the sum at most
    :data:`WEIGHT_SUM_LIMIT` (no 32-bit overflow in the partitioner). Positive values never round
    to 0; zeros stay 0 when ``allow_zero`` (vertex weights), else become 1 (METIS and KaHIP want
    edge weights > 0).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return np.zeros(0, np.int64)
    if values.size > WEIGHT_SUM_LIMIT // 2:
        raise InputError(f"partition: {values.size:,} weights cannot sum within the partitioner's 32-bit integers")
    top, total = float(values.max()), float(values.sum())
    if top <= WEIGHT_LEVELS and total <= WEIGHT_SUM_LIMIT and _all_integers(values):
        out = values.astype(np.int64)
    elif top > 0:
        # Values rounded up from 0 to 1 add at most values.size: leave that much room.
        scale = min(WEIGHT_LEVELS / top, (WEIGHT_SUM_LIMIT - values.size) / total)
        scaled = np.multiply(values, scale)  # floor(values * scale + 0.5), in place on one temporary
        scaled += 0.5
        np.floor(scaled, out=scaled)
        out = scaled.astype(np.int64)
        if allow_zero:  # else the maximum below lifts them
            out[(out == 0) & (values > 0)] = 1
    else:
        out = np.zeros(values.size, np.int64)
    if not allow_zero:
        np.maximum(out, 1, out=out)
    return out


def _all_integers(values: np.ndarray) -> bool:
    head = values[:1024]  # measured rates: a fraction shows up at once, no need to round them all
    return bool(np.all(head == np.round(head))) and bool(np.all(values == np.round(values)))


class CSRGraph:
    """A partitioner's input: CSR arrays without self-loops or zero weights (``xadj``,
    ``adjncy`` as int64, the float weights ``data`` and their integer form ``eweights``); the
    scipy matrix only when a capacity repair needs it."""

    __slots__ = ("n", "xadj", "adjncy", "data", "eweights", "_matrix")

    def __init__(self, xadj: np.ndarray, adjncy: np.ndarray, data: np.ndarray, matrix: sp.csr_matrix | None = None):
        self.n = xadj.size - 1
        self.xadj, self.adjncy, self.data = xadj, adjncy, data
        self.eweights = integer_weights(data, allow_zero=False)
        self._matrix = matrix

    @classmethod
    def from_matrix(cls, adjacency: sp.csr_matrix) -> CSRGraph:
        a = sp.csr_matrix(adjacency)
        if not a.has_sorted_indices:
            a = a.sorted_indices()
        n = a.shape[0]
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(a.indptr))
        keep = (a.indices != rows) & (a.data != 0)
        if keep.all():  # the usual case (TaskGraph.undirected): no copies
            return cls(np.asarray(a.indptr, np.int64), np.asarray(a.indices, np.int64),
                       np.asarray(a.data, np.float64), a)
        xadj = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows[keep], minlength=n), out=xadj[1:])
        return cls(xadj, a.indices[keep].astype(np.int64), np.asarray(a.data[keep], np.float64), a)

    @property
    def matrix(self) -> sp.csr_matrix:
        if self._matrix is None:
            self._matrix = sp.csr_matrix((self.data, self.adjncy, self.xadj), shape=(self.n, self.n))
        return self._matrix

    def cut(self, parts: np.ndarray) -> float:
        """Summed weight of the edges between parts (each edge once)."""
        rows = np.repeat(np.arange(self.n), np.diff(self.xadj))
        return cut_traffic(rows, self.adjncy, self.data, parts) / 2.0


def partition(adjacency: sp.csr_matrix, n_parts: int, *, vertex_weights: np.ndarray | None = None,
              target_fractions: Sequence[float] | None = None, imbalance: float = 1.03,
              objective: str = "cut", seed: int = 0, backend: str = "metis", method: str = "auto",
              part_capacity: np.ndarray | None = None) -> np.ndarray:
    """Split the vertices of a symmetric weighted graph into ``n_parts`` parts; returns the part of each.

    ``adjacency``: symmetric CSR, entry (i, j) = weight of edge {i, j} (diagonal ignored).
    ``vertex_weights``: per vertex (default 1). ``target_fractions``: share of the total vertex
    weight wanted in each part (default equal; METIS only). ``imbalance``: allowed max part weight
    / target (1.03 = METIS ``ufactor`` 30). ``objective``: ``cut`` (edge cut) or ``volume``
    (total communication volume, METIS only; k-way in two levels on large inputs, see
    :data:`VOLUME_DIRECT_WORK`). ``method``: METIS ``kway``, ``recursive`` bisection (edge cut
    only), or ``auto`` (see ``AUTO_BOTH_LIMIT``; k-way alone for ``volume``). ``part_capacity``:
    hard limit on each part's vertex weight, enforced by :func:`~streamsched.partitioning.fit_parts`.
    """
    check_arguments(n_parts, imbalance, objective, backend, method)
    n = adjacency.shape[0]
    if target_fractions is not None and len(target_fractions) != n_parts:
        raise InputError(f"partition: {len(target_fractions)} target fractions for {n_parts} parts")
    weights = np.ones(n) if vertex_weights is None else np.asarray(vertex_weights, dtype=np.float64)
    if n == 0:
        return np.zeros(0, np.int64)
    if n_parts == 1:
        parts = np.zeros(n, np.int64)
        return parts if part_capacity is None else fit_parts(adjacency, parts, weights, part_capacity)
    graph = CSRGraph.from_matrix(adjacency)
    with captured_native_output(_library(backend)):
        return partition_csr(graph, n_parts, weights, integer_weights(weights, allow_zero=True),
                             target_fractions=target_fractions, imbalance=imbalance, objective=objective, seed=seed,
                             backend=backend, method=method, part_capacity=part_capacity)


def check_arguments(n_parts: int, imbalance: float, objective: str, backend: str, method: str) -> None:
    """InputError naming the first bad argument of :func:`partition`."""
    if backend not in BACKENDS:
        raise InputError(f"partition backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if objective not in OBJECTIVES:
        raise InputError(f"partition objective {objective!r} is not one of {', '.join(OBJECTIVES)}")
    if method not in METHODS:
        raise InputError(f"partition method {method!r} is not one of {', '.join(METHODS)}")
    if method == "recursive" and objective == "volume":
        raise InputError("partition: METIS recursive bisection minimises the edge cut only (objective 'cut')")
    if n_parts < 1:
        raise InputError(f"partition: n_parts must be >= 1, got {n_parts}")
    if imbalance < 1:
        raise InputError(f"partition: imbalance must be >= 1, got {imbalance}")


def _library(backend: str) -> str:
    return "KaHIP" if backend.startswith("kahip") else "METIS"


def partition_csr(graph: CSRGraph, n_parts: int, weights: np.ndarray, vweights: np.ndarray, *,
                  target_fractions: Sequence[float] | None = None, imbalance: float = 1.03,
                  objective: str = "cut", seed: int = 0, backend: str = "metis", method: str = "auto",
                  part_capacity: np.ndarray | None = None) -> np.ndarray:
    """:func:`partition` on prepared arrays (``weights`` as floats, ``vweights`` their integer
    form), ``n_parts`` >= 2, arguments already checked; the caller captures native output
    (the second level captures once for all its nodes)."""
    if backend.startswith("kahip"):
        runs = [backend]
    elif method == "auto":
        runs = ["kway", "recursive"] if graph.n <= AUTO_BOTH_LIMIT and objective == "cut" else ["kway"]
    else:
        runs = [method]
    best, best_cut, failure = None, np.inf, None
    for run in runs:
        if run.startswith("kahip"):
            parts = _kahip(n_parts, graph.xadj, graph.adjncy, graph.eweights, vweights, target_fractions, imbalance,
                           objective, seed, fast=run == "kahip-fast")
        elif objective == "volume" and run == "kway" and graph.n * n_parts > VOLUME_DIRECT_WORK \
                and n_parts > VOLUME_LEVEL_PARTS:
            fractions = np.full(n_parts, 1.0 / n_parts) if target_fractions is None else \
                np.asarray(target_fractions, dtype=np.float64) / float(np.sum(target_fractions))
            parts = _metis_volume_levels(graph, n_parts, vweights, fractions, imbalance, seed)
        else:
            parts = _metis(n_parts, graph.xadj, graph.adjncy, graph.eweights, vweights, target_fractions, imbalance,
                           objective, seed, recursive=run == "recursive")
        parts = np.asarray(parts, dtype=np.int64)
        if part_capacity is not None:
            try:
                parts = _fit(graph, parts, weights, part_capacity)
            except InfeasibleError as exc:
                failure = exc
                continue
        cut = graph.cut(parts) if len(runs) > 1 else 0.0
        if cut < best_cut:
            best, best_cut = parts, cut
    if best is None:
        raise failure
    return best


def _fit(graph: CSRGraph, parts: np.ndarray, weights: np.ndarray, part_capacity: np.ndarray) -> np.ndarray:
    """fit_parts, skipped (no scipy matrix built) when every part already fits."""
    capacity = np.asarray(part_capacity, dtype=np.float64)
    held = np.bincount(parts, weights=weights, minlength=capacity.size)
    if held.size == capacity.size and np.all(held <= capacity * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE):
        return parts
    return fit_parts(graph.matrix, parts, weights, capacity)


def cut_weight(adjacency: sp.csr_matrix, parts: np.ndarray) -> float:
    """Summed weight of the edges {i, j} with i and j in different parts (each edge once)."""
    coo = adjacency.tocoo()
    return cut_traffic(coo.row, coo.col, coo.data, parts) / 2.0


def _csr_arrays(adjacency: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """xadj, adjncy, integer edge weights; self-loops and zero-weight edges dropped."""
    graph = CSRGraph.from_matrix(adjacency)
    return graph.xadj, graph.adjncy, graph.eweights


def _metis(n_parts, xadj, adjncy, eweights, vweights, target_fractions, imbalance, objective, seed, recursive):
    import pymetis

    options = pymetis.Options(
        seed=int(seed) % (2**31),
        ufactor=max(1, int(round((imbalance - 1.0) * 1000))),
        objtype=pymetis.ObjType.VOL if objective == "volume" else pymetis.ObjType.CUT,
    )
    idx = pymetis.zero_copy_dtype()
    fractions = None
    if target_fractions is not None:
        total = float(np.sum(target_fractions))
        if total <= 0:
            raise InputError("partition: target fractions sum to 0")
        fractions = [float(f) / total for f in target_fractions]
    result = pymetis.part_graph(
        n_parts,
        pymetis.CSRAdjacency(np.asarray(xadj, idx), np.asarray(adjncy, idx)),
        vweights=np.asarray(vweights, idx),
        eweights=np.asarray(eweights, idx),
        tpwgts=fractions,
        recursive=recursive,
        options=options,
    )
    return result.vertex_part


def _metis_volume_levels(graph: CSRGraph, n_parts: int, vweights: np.ndarray, fractions: np.ndarray,
                         imbalance: float, seed: int) -> np.ndarray:
    """Communication volume, k-way, nested: ``L = ceil(log k / log VOLUME_LEVEL_PARTS)`` levels of
    ``k1 = ceil(k^(1/L))`` groups each (group g holding ``k_g`` of the final parts, its target
    weight in proportion), each group's induced sub-graph split again the same way, each level
    with imbalance ``imbalance^(1/L)``.

    METIS' volume refinement costs far more than the edge cut's as parts grow (100,000 vertices:
    3.8 s of CPU for 100 parts, 15.6 s for 400; cut: 1.3 and 2.3 s), so one call for 1,000
    parts of 1,000,000 vertices runs for many minutes; levels of at most 16 parts take seconds.
    Edges between groups are left to the level that separated them (their volume is paid
    whatever the levels below do).
    """
    if n_parts <= VOLUME_LEVEL_PARTS or graph.n <= 1:
        return np.asarray(_metis(n_parts, graph.xadj, graph.adjncy, graph.eweights, vweights, fractions.tolist(),
                                 imbalance, "volume", seed, recursive=False), dtype=np.int64)
    levels = math.ceil(math.log(n_parts) / math.log(VOLUME_LEVEL_PARTS) - 1e-9)
    k1 = min(n_parts, math.ceil(n_parts ** (1.0 / levels) - 1e-9))
    per_group = np.full(k1, n_parts // k1)
    per_group[: n_parts % k1] += 1
    first = np.r_[0, np.cumsum(per_group)]
    level_imbalance = imbalance ** (1.0 / levels)
    share = np.add.reduceat(fractions, first[:-1])
    groups = np.asarray(_metis(k1, graph.xadj, graph.adjncy, graph.eweights, vweights, (share / share.sum()).tolist(),
                               level_imbalance, "volume", seed, recursive=False), dtype=np.int64)
    parts = np.empty(graph.n, np.int64)
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(k1 + 1))
    permuted = graph.matrix[order][:, order].tocsr()  # the groups as diagonal blocks
    for g in range(k1):
        lo, hi = int(bounds[g]), int(bounds[g + 1])
        if hi == lo:
            continue
        members = order[lo:hi]
        block = permuted[lo:hi, lo:hi].tocsr()
        block.sort_indices()
        inner = CSRGraph(np.asarray(block.indptr, np.int64), np.asarray(block.indices, np.int64),
                         np.asarray(block.data, np.float64), block)
        mine = fractions[first[g]:first[g + 1]]
        sub = _metis_volume_levels(inner, int(per_group[g]), vweights[members], mine / mine.sum(),
                                   imbalance / level_imbalance, seed) if per_group[g] > 1 else 0
        parts[members] = first[g] + sub
    return parts


def _kahip(n_parts, xadj, adjncy, eweights, vweights, target_fractions, imbalance, objective, seed, fast):
    try:
        import kahip
    except ImportError:
        raise InputError("partition backend 'kahip' needs the kahip package (pip install 'streamsched[kahip]')") from None
    if target_fractions is not None and len(set(np.round(target_fractions, 12))) > 1:
        raise InputError("partition backend 'kahip' supports only equal part sizes (no target_fractions)")
    if objective != "cut":
        raise InputError("partition backend 'kahip' minimises the edge cut only (objective 'cut')")
    _, parts = kahip.kaffpa(
        vweights.astype(np.int32), xadj.astype(np.int32), eweights.astype(np.int32), adjncy.astype(np.int32),
        int(n_parts), float(imbalance - 1.0), True, int(seed) % (2**31), kahip.FAST if fast else kahip.ECO,
    )
    return parts
