"""Rebalancing of placements (Ghosh et al. [1]_ section 4.3).

Both strategies visit the active dataflows by decreasing makespan and migrate at most one query
per dataflow, only when the move keeps constraints 1-3 and lowers the objective (the sum of
makespans, interference on the dataflows sharing the two resources included):

- vertex rebalance: the query with the highest latency on the critical path moves to the
  resource that most shortens the longest path through it;
- edge rebalance: on the critical path, the stream with the highest network cost
  (``l + delta / beta``); its upstream query moves to the downstream one's resource, or the
  downstream query to the upstream one's, whichever improves more;
- both: vertex, then edge.

The objective change of a trial move counts the moved dataflow and the dataflows slowed down on
the target resource (see :meth:`Deployment.trial_move`).

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import numpy as np

from streamsched.edge.deployment import Deployment
from streamsched.edge.model import Dataflow

STRATEGIES = ("none", "vertex", "edge", "both")
#: A move must lower the sum of makespans by more than this (seconds).
MIN_GAIN = 1e-12


def rebalance(deployment: Deployment, strategy: str) -> int:
    """Apply a strategy of :data:`STRATEGIES`; returns the number of migrations made."""
    if strategy not in STRATEGIES:
        raise ValueError(f"rebalance strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    moves = 0
    if strategy in ("vertex", "both"):
        moves += vertex_rebalance(deployment)
    if strategy in ("edge", "both"):
        moves += edge_rebalance(deployment)
    return moves


def _by_makespan(deployment: Deployment) -> list[int]:
    return sorted(deployment.dataflows, key=lambda d: (-deployment.makespan(d), d))


def _kind_allowed(deployment: Deployment, dataflow: Dataflow, v: int, r: int) -> bool:
    """Constraint 1 for one query and resource."""
    return bool(np.any(deployment.system.allowed_for(dataflow, v) == r))


def _try_move(deployment: Deployment, dag_id: int, v: int, r: int):
    """``Deployment.trial_move`` after the constraint-1 check."""
    if int(deployment.mapping[dag_id][v]) == r or not _kind_allowed(deployment, deployment.dataflows[dag_id], v, r):
        return None
    return deployment.trial_move(dag_id, v, r)


def _through(deployment: Deployment, dataflow: Dataflow, mapping: np.ndarray, head: np.ndarray,
             tail: np.ndarray, v: int, candidates: np.ndarray) -> np.ndarray:
    """Length of the longest path through ``v`` were it moved to each candidate resource
    (parents' ``L``, children's ``T`` and the candidate's interference as they are now)."""
    system = deployment.system
    here = np.asarray(candidates) == mapping[v]
    m = deployment.count[candidates] + np.where(here, 0, 1)
    through = system.exclusive_latency(dataflow, v, candidates) * (1.0 + system.pi(m, candidates))
    arrival = np.zeros(through.size)
    for j in dataflow.parents[v]:
        q = mapping[j]
        np.maximum(arrival, head[j] + system.net_latency[q, candidates]
                   + dataflow.event_bytes[j] / system.net_bandwidth[q, candidates], out=arrival)
    departure = np.zeros(through.size)
    for c in dataflow.children[v]:
        s = mapping[c]
        np.maximum(departure, tail[c] + system.net_latency[candidates, s]
                   + dataflow.event_bytes[v] / system.net_bandwidth[candidates, s], out=departure)
    return through + arrival + departure


def _through_one(deployment: Deployment, dataflow: Dataflow, mapping: np.ndarray, head: np.ndarray,
                 tail: np.ndarray, v: int, r: int) -> float:
    """:func:`_through` for one resource, in scalar arithmetic (no array overhead)."""
    system = deployment.system
    m = int(deployment.count[r]) + (0 if mapping[v] == r else 1)
    through = float(dataflow.latency[v, system.latency_class[r]] * system.speed[r]) * (
        1.0 + float(system.interference[r]) * max(m - 1, 0))
    latency, bandwidth, size = system.net_latency, system.net_bandwidth, dataflow.event_bytes
    arrival = 0.0
    for j in dataflow.parents[v]:
        q = mapping[j]
        arrival = max(arrival, head[j] + latency[q, r] + size[j] / bandwidth[q, r])
    departure = 0.0
    for c in dataflow.children[v]:
        s = mapping[c]
        departure = max(departure, tail[c] + latency[r, s] + size[v] / bandwidth[r, s])
    return through + arrival + departure


def vertex_rebalance(deployment: Deployment) -> int:
    system = deployment.system
    moves = 0
    for dag_id in _by_makespan(deployment):
        dataflow = deployment.dataflows[dag_id]
        mapping = deployment.mapping[dag_id]
        length, path, head, tail, _ = deployment.timing(dag_id)
        eff = deployment.effective_latency(dag_id)
        v = max(path, key=lambda u: (eff[u], -u))
        old = int(mapping[v])
        candidates = system.allowed_for(dataflow, v)
        candidates = candidates[candidates != old]
        if not candidates.size:
            continue
        candidates = candidates[deployment.valid_resources(dag_id, v, candidates)]
        if not candidates.size:
            continue
        through = _through(deployment, dataflow, mapping, head, tail, v, candidates)
        best = int(np.argmin(through))
        if through[best] >= length - MIN_GAIN:
            continue
        trial = _try_move(deployment, dag_id, v, int(candidates[best]))
        if trial is None:
            continue
        if trial[0] < -MIN_GAIN:
            moves += 1
        else:
            deployment.undo_move(dag_id, v, old, trial[1])
    return moves


def edge_rebalance(deployment: Deployment) -> int:
    moves = 0
    for dag_id in _by_makespan(deployment):
        dataflow = deployment.dataflows[dag_id]
        mapping = deployment.mapping[dag_id]
        length, path, head, tail, cost = deployment.timing(dag_id)
        if len(path) < 2:
            continue
        index = dataflow.edge_index
        up, down = max(zip(path, path[1:]), key=lambda pair: cost[index[pair]])
        if cost[index[(up, down)]] <= 0.0 or mapping[up] == mapping[down]:
            continue
        options = []
        for v, target in ((up, int(mapping[down])), (down, int(mapping[up]))):
            if not _kind_allowed(deployment, dataflow, v, target):
                continue
            if _through_one(deployment, dataflow, mapping, head, tail, v, target) >= length - MIN_GAIN:
                continue  # the dataflow's own critical path would not get shorter
            old = int(mapping[v])
            trial = _try_move(deployment, dag_id, v, target)
            if trial is not None:
                deployment.undo_move(dag_id, v, old, trial[1])
                options.append((trial[0], v, target))
        if options:
            delta, v, target = min(options)
            if delta < -MIN_GAIN:
                deployment.move(dag_id, v, target)
                moves += 1
    return moves
