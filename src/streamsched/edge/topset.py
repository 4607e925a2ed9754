"""TopSet and TopSet/P: topological set ordering (Ghosh et al. [1]_ section 4.1).

The arriving dataflow is traversed set by set (``S_0`` = the sources, ``S_{i+1}`` = queries all
of whose parents are in ``S_0 .. S_i``); within a set, queries go by decreasing latency. Each
visited query goes on the valid resource (constraints 1-3, for it and for the queries already
there) with the shortest critical path to it,

    L_i(p) = max over parents j on r_q of (L_j + l_{q,p} + delta_j / beta_{q,p}) + lambda_i^p (1 + pi(m_p + 1)).

TopSet/P adds the interference penalty: the increase of the latencies of the dataflow's own
queries already on ``p`` when one more query joins them,
``sum_j lambda_j^p (pi(m_p + 1) - pi(m_p))``. TopSet migrates nothing; a departing dataflow
is simply undeployed.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.edge.deployment import Deployment
from streamsched.edge.model import EDGE, Dataflow


def topological_sets(dataflow: Dataflow) -> list[list[int]]:
    """``[S_0, S_1, ...]``: the queries by topological depth, each set in index order."""
    sets: list[list[int]] = [[] for _ in range(int(dataflow.depth.max(initial=-1)) + 1)]
    for v in range(dataflow.n):
        sets[int(dataflow.depth[v])].append(v)
    return sets


def visiting_order(dataflow: Dataflow, latency_class: int = EDGE) -> list[int]:
    """Sets in order; inside a set, decreasing latency (on ``latency_class``), ties by index."""
    order: list[int] = []
    for group in topological_sets(dataflow):
        order.extend(sorted(group, key=lambda v: (-dataflow.latency[v, latency_class], v)))
    return order


def place_topset(deployment: Deployment, dag_id: int, dataflow: Dataflow, penalty: bool = False,
                 prefer_kind: int | None = None) -> np.ndarray:
    """Deploy ``dataflow`` query by query; returns its mapping.

    ``prefer_kind`` (used by the Edge-Only / Cloud-Only schedulers) restricts the candidates to
    one kind of resource, falling back to every allowed resource when none of them is valid.
    On failure the partial placement is rolled back and ``InfeasibleError`` raised.
    """
    system = deployment.system
    deployment.add_dataflow(dag_id, dataflow)
    allowed = system.allowed(dataflow)
    head = np.zeros(dataflow.n)
    own_latency = np.zeros(system.n)  # sum of lambda of this dataflow's queries per resource
    mapping = deployment.mapping[dag_id]
    try:
        for v in visiting_order(dataflow):
            candidates = allowed[v]
            if prefer_kind is not None:
                preferred = candidates[system.kind[candidates] == prefer_kind]
                ok = deployment.valid_resources(dag_id, v, preferred) if preferred.size else np.zeros(0, bool)
                if ok.any():
                    candidates = preferred
            ok = deployment.valid_resources(dag_id, v, candidates)
            if not ok.any():
                raise InfeasibleError(
                    f"TopSet: query {v} ({dataflow.query_type[v] if dataflow.query_type else 'task'}) "
                    f"of dataflow {dataflow.name!r} fits on none of its {candidates.size} allowed resources")
            candidates = candidates[ok]
            m = deployment.count[candidates]
            lam = system.exclusive_latency(dataflow, v, candidates)
            latency_here = (_arrival_latency(deployment, dataflow, head, mapping, v, candidates)
                            + lam * (1.0 + system.pi(m + 1, candidates)))
            score = latency_here
            if penalty:
                score = score + own_latency[candidates] * (system.pi(m + 1, candidates) - system.pi(m, candidates))
            best = int(np.argmin(score))
            r = int(candidates[best])
            head[v] = latency_here[best]
            deployment.add_query(dag_id, v, r)
            own_latency[r] += system.exclusive_latency(dataflow, v, r)
    except InfeasibleError:
        deployment.undeploy(dag_id)
        raise
    return mapping.copy()


def _arrival_latency(deployment: Deployment, dataflow: Dataflow, head: np.ndarray, mapping: np.ndarray,
                     v: int, candidates: np.ndarray) -> np.ndarray:
    """``max_j (L_j + l_{q,p} + delta_j / beta_{q,p})`` over the parents ``j`` of ``v``, per candidate."""
    system = deployment.system
    arrival = np.zeros(candidates.size)
    for j in dataflow.parents[v]:
        q = mapping[j]
        via = head[j] + system.net_latency[q, candidates] + dataflow.event_bytes[j] / system.net_bandwidth[q, candidates]
        np.maximum(arrival, via, out=arrival)
    return arrival
