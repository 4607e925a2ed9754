"""Contention of a placement, as CAPS computes it [1]_ (its cost check and search agree on it).

A node's compute and state costs are the sums over its tasks. Its network cost sums, over the
links ``o -> d`` of its tasks' operators, ``network(o)`` times the tasks of o that send off
the node: for ``FORWARD`` ``max(0, n_o - n_d)`` (each co-located d task keeps one o task local),
otherwise ``n_o x (1 - n_d / p_d)`` (the share of d's tasks elsewhere), where ``n_x`` counts x's
tasks on the node and ``p_d`` is d's parallelism. A plan's cost is the bottleneck node in each
dimension. CAPS rounds plan costs to 2 decimals (:func:`caps_rounded`); nothing here rounds.

References
----------
.. [1] Wang, Y.; Huang, S.; Wang, J.; Kalavri, V.; Matta, I. (2025) "CAPSys: Contention-aware
   task placement for data stream processing", Proceedings of the Twentieth European Conference
   on Computer Systems (EuroSys 2025); code: github.com/CASP-Systems-BU/CAPSys (scripts/caps-go).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.model.contention import DIMENSIONS, ContentionProfile, profile_from_graph
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph


def operator_counts(graph: TaskGraph, placement: Placement, n_nodes: int) -> np.ndarray:
    """``(operators, nodes)``: how many tasks of each operator each node hosts."""
    counts = np.zeros((len(graph.operator_names), n_nodes), dtype=np.int64)
    np.add.at(counts, (graph.task_operator, placement.node_of), 1)
    return counts


def costs_from_counts(profile: ContentionProfile, counts: np.ndarray) -> np.ndarray:
    """``(nodes, 3)``: each node's (compute, state, network) for operator counts per node."""
    counts = np.asarray(counts, dtype=np.float64)
    out = np.zeros((counts.shape[1], 3))
    out[:, 0] = profile.cost[:, 0] @ counts
    out[:, 1] = profile.cost[:, 1] @ counts
    for o, d, kind in profile.links():
        net = profile.cost[o, 2]
        if kind == "FORWARD":
            out[:, 2] += net * np.maximum(counts[o] - counts[d], 0.0)
        else:
            out[:, 2] += net * counts[o] * (1.0 - counts[d] / profile.parallelism[d])
    return out


def node_contention(graph: TaskGraph, placement: Placement, n_nodes: int) -> np.ndarray:
    """``(nodes, 3)``: each node's (compute, state, network) cost under ``placement``."""
    return costs_from_counts(profile_from_graph(graph), operator_counts(graph, placement, n_nodes))


def bottleneck(node_costs: np.ndarray) -> dict[str, float]:
    """The plan's cost: the largest node cost in each dimension."""
    top = np.asarray(node_costs).max(axis=0) if len(node_costs) else np.zeros(3)
    return {dim: float(v) for dim, v in zip(DIMENSIONS, top)}


def caps_rounded(cost: dict[str, float]) -> dict[str, float]:
    """Costs rounded to 2 decimals as CAPS reports them (``math.Round(x * 100) / 100``: half away
    from zero, which numpy's ``round`` is not)."""
    return {k: float(np.sign(v) * np.floor(abs(v) * 100 + 0.5) / 100) for k, v in cost.items()}


def contention(graph: TaskGraph, placement: Placement, n_nodes: int) -> dict[str, Any]:
    """Bottleneck per dimension, every node's vector, the total network cost (sum over nodes) and
    which dimensions were measured (a profile derived from a graph measures no state)."""
    per_node = node_contention(graph, placement, n_nodes)
    profile = profile_from_graph(graph)
    return {"bottleneck": bottleneck(per_node), "nodes": per_node.tolist(),
            "network_total": float(per_node[:, 2].sum()), "measured": list(profile.measured)}


def dominates(a: dict[str, float] | np.ndarray, b: dict[str, float] | np.ndarray) -> bool:
    """True when cost ``a`` is no worse than ``b`` in every dimension and better in one."""
    va, vb = _vector(a), _vector(b)
    return bool(np.all(va <= vb) and np.any(va < vb))


def _vector(cost) -> np.ndarray:
    return np.array([cost[d] for d in DIMENSIONS]) if isinstance(cost, dict) else np.asarray(cost, dtype=np.float64)
