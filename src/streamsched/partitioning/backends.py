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

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from streamsched.errors import InfeasibleError, InputError
from streamsched.native_output import captured_native_output
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
    if top <= WEIGHT_LEVELS and total <= WEIGHT_SUM_LIMIT and np.all(values == np.round(values)):
        out = values.astype(np.int64)
    elif top > 0:
        # Values rounded up from 0 to 1 add at most values.size: leave that much room.
        scale = min(WEIGHT_LEVELS / top, (WEIGHT_SUM_LIMIT - values.size) / total)
        out = np.floor(values * scale + 0.5).astype(np.int64)
        out[(out == 0) & (values > 0)] = 1
    else:
        out = np.zeros(values.size, np.int64)
    if not allow_zero:
        out[out == 0] = 1
    return out


def partition(adjacency: sp.csr_matrix, n_parts: int, *, vertex_weights: np.ndarray | None = None,
              target_fractions: Sequence[float] | None = None, imbalance: float = 1.03,
              objective: str = "cut", seed: int = 0, backend: str = "metis", method: str = "auto",
              part_capacity: np.ndarray | None = None) -> np.ndarray:
    """Split the vertices of a symmetric weighted graph into ``n_parts`` parts; returns the part of each.

    ``adjacency``: symmetric CSR, entry (i, j) = weight of edge {i, j} (diagonal ignored).
    ``vertex_weights``: per vertex (default 1). ``target_fractions``: share of the total vertex
    weight wanted in each part (default equal; METIS only). ``imbalance``: allowed max part weight
    / target (1.03 = METIS ``ufactor`` 30). ``objective``: ``cut`` (edge cut) or ``volume``
    (total communication volume, METIS only). ``method``: METIS ``kway``, ``recursive``
    bisection (edge cut only), or ``auto`` (see ``AUTO_BOTH_LIMIT``; k-way alone for ``volume``). ``part_capacity``: hard limit on each
    part's vertex weight, enforced by :func:`~streamsched.partitioning.fit_parts`.
    """
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
    n = adjacency.shape[0]
    if target_fractions is not None and len(target_fractions) != n_parts:
        raise InputError(f"partition: {len(target_fractions)} target fractions for {n_parts} parts")
    weights = np.ones(n) if vertex_weights is None else np.asarray(vertex_weights, dtype=np.float64)
    if n == 0:
        return np.zeros(0, np.int64)
    if n_parts == 1:
        parts = np.zeros(n, np.int64)
        return parts if part_capacity is None else fit_parts(adjacency, parts, weights, part_capacity)
    xadj, adjncy, eweights = _csr_arrays(adjacency)
    vweights = integer_weights(weights, allow_zero=True)
    if backend.startswith("kahip"):
        runs = [backend]
    elif method == "auto":
        runs = ["kway", "recursive"] if n <= AUTO_BOTH_LIMIT and objective == "cut" else ["kway"]
    else:
        runs = [method]
    best, best_cut, failure = None, np.inf, None
    for run in runs:
        if run.startswith("kahip"):
            parts = _kahip(n_parts, xadj, adjncy, eweights, vweights, target_fractions, imbalance, objective, seed,
                           fast=run == "kahip-fast")
        else:
            parts = _metis(n_parts, xadj, adjncy, eweights, vweights, target_fractions, imbalance, objective,
                           seed, recursive=run == "recursive")
        parts = np.asarray(parts, dtype=np.int64)
        if part_capacity is not None:
            try:
                parts = fit_parts(adjacency, parts, weights, part_capacity)
            except InfeasibleError as exc:
                failure = exc
                continue
        cut = cut_weight(adjacency, parts) if len(runs) > 1 else 0.0
        if cut < best_cut:
            best, best_cut = parts, cut
    if best is None:
        raise failure
    return best


def cut_weight(adjacency: sp.csr_matrix, parts: np.ndarray) -> float:
    """Summed weight of the edges {i, j} with i and j in different parts (each edge once)."""
    coo = adjacency.tocoo()
    return float(coo.data[parts[coo.row] != parts[coo.col]].sum()) / 2.0


def _csr_arrays(adjacency: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """xadj, adjncy, integer edge weights; self-loops and zero-weight edges dropped."""
    a = sp.csr_matrix(adjacency)
    if not a.has_sorted_indices:
        a = a.sorted_indices()
    n = a.shape[0]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(a.indptr))
    keep = (a.indices != rows) & (a.data != 0)
    xadj = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=n), out=xadj[1:])
    return xadj, a.indices[keep].astype(np.int64), integer_weights(a.data[keep], allow_zero=False)


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
    with captured_native_output("METIS"):
        result = pymetis.part_graph(
            n_parts,
            pymetis.CSRAdjacency(xadj.astype(idx), adjncy.astype(idx)),
            vweights=vweights.astype(idx),
            eweights=eweights.astype(idx),
            tpwgts=fractions,
            recursive=recursive,
            options=options,
        )
    return result.vertex_part


def _kahip(n_parts, xadj, adjncy, eweights, vweights, target_fractions, imbalance, objective, seed, fast):
    try:
        import kahip
    except ImportError:
        raise InputError("partition backend 'kahip' needs the kahip package (pip install 'streamsched[kahip]')") from None
    if target_fractions is not None and len(set(np.round(target_fractions, 12))) > 1:
        raise InputError("partition backend 'kahip' supports only equal part sizes (no target_fractions)")
    if objective != "cut":
        raise InputError("partition backend 'kahip' minimises the edge cut only (objective 'cut')")
    with captured_native_output("KaHIP"):
        _, parts = kahip.kaffpa(
            vweights.astype(np.int32), xadj.astype(np.int32), eweights.astype(np.int32), adjncy.astype(np.int32),
            int(n_parts), float(imbalance - 1.0), True, int(seed) % (2**31), kahip.FAST if fast else kahip.ECO,
        )
    return parts
