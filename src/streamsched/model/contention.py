"""The contention model of CAPSys [1]_: a cost vector per task and a link type per operator.

Every task of an operator has the same vector ``(compute, state, network)`` (CAPSys profiles an
operator once; a measured job averages its subtasks). ``outbound[o]`` is how operator o sends
to each operator of ``downstream[o]``: ``FORWARD`` (task to task), ``REBALANCE`` or ``HASH``
(to every downstream task); ``""`` for a sink. The per-worker cost of a placement and its
bottleneck are in :mod:`streamsched.contention_metrics`.

:func:`read_caps_profile` reads CAPSys's profile JSON (a list of operators with ``id``,
``name``, ``parallelism``, ``compute``, ``state``, ``network``, ``outboundtype``, ``upNode``,
``downNode``); :func:`graph_from_profile` turns a profile into a :class:`TaskGraph` carrying it
(load 1 per task, so a cluster of W nodes of capacity S is CAPSys's W workers x S slots).

References
----------
.. [1] Wang, Y.; Huang, S.; Wang, J.; Kalavri, V.; Matta, I. (2025) "CAPSys: Contention-aware
   task placement for data stream processing", Proceedings of the Twentieth European Conference
   on Computer Systems (EuroSys 2025); code: github.com/CASP-Systems-BU/CAPSys (scripts/caps-go).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from streamsched.errors import InputError
from streamsched.model.limits import check_operators, check_tasks
from streamsched.model.taskgraph import MAX_VALUE, TaskGraph

DIMENSIONS = ("compute", "state", "network")
LINK_TYPES = ("FORWARD", "REBALANCE", "HASH")
_FIELDS = ("id", "name", "parallelism", "compute", "state", "network", "outboundtype", "downNode", "upNode")


@dataclass(frozen=True, eq=False)
class ContentionProfile:
    """Operator-level costs: ``cost[o]`` is one task's ``(compute, state, network)``.

    ``measured`` names the dimensions that were measured (the others are 0 and say nothing).
    """

    operator_names: tuple[str, ...]
    parallelism: tuple[int, ...]
    cost: np.ndarray
    outbound: tuple[str, ...]
    downstream: tuple[tuple[int, ...], ...]
    measured: tuple[str, ...] = DIMENSIONS

    @property
    def n_operators(self) -> int:
        return len(self.operator_names)

    @property
    def n_tasks(self) -> int:
        return int(sum(self.parallelism))

    @property
    def upstream(self) -> tuple[tuple[int, ...], ...]:
        ups: list[list[int]] = [[] for _ in self.operator_names]
        for o, downs in enumerate(self.downstream):
            for d in downs:
                ups[d].append(o)
        return tuple(tuple(u) for u in ups)

    def links(self) -> list[tuple[int, int, str]]:
        """``(upstream, downstream, link type)`` of every operator link."""
        return [(o, d, self.outbound[o]) for o, downs in enumerate(self.downstream) for d in downs]

    def task_costs(self, task_operator: np.ndarray) -> np.ndarray:
        """``(n_tasks, 3)``: each task's vector (its operator's)."""
        return self.cost[np.asarray(task_operator)]

    def scaled(self, total_tasks: int) -> ContentionProfile:
        """The profile with parallelism scaled to ``total_tasks``, as CAPSys's Figure 10 runs
        (``cmd/eval_only_caps``): every operator but the last gets ``floor(share x total)`` (at
        least 1), the last what is left; costs per task unchanged."""
        total = self.n_tasks
        out, left = [], int(total_tasks)
        for k, p in enumerate(self.parallelism):
            if k == self.n_operators - 1:
                out.append(left)
            else:
                take = max(1, math.floor(p / total * total_tasks))
                out.append(take)
                left -= take
        if out[-1] < 1:
            raise InputError(f"profile: cannot scale {total} tasks to {total_tasks} (the last operator gets none)")
        return replace(self, parallelism=tuple(out))


def check_profile(profile: ContentionProfile, where: str) -> None:
    """One-line errors for what no placement can use: negative or non-finite costs, a link
    type outside :data:`LINK_TYPES`, a link to an unknown operator, a cycle."""
    n = profile.n_operators
    check_operators(n, where)
    check_tasks(profile.n_tasks, where)
    cost = np.asarray(profile.cost, dtype=np.float64)
    if cost.shape != (n, 3) or len(profile.parallelism) != n or len(profile.outbound) != n or len(profile.downstream) != n:
        raise InputError(f"{where}: operator arrays differ in length")
    for o in range(n):
        name = profile.operator_names[o]
        if profile.parallelism[o] < 1:
            raise InputError(f"{where}: operator {name!r}: parallelism {profile.parallelism[o]} must be >= 1")
        for k, dim in enumerate(DIMENSIONS):
            if not 0 <= cost[o, k] <= MAX_VALUE:
                raise InputError(f"{where}: operator {name!r}: {dim} is {cost[o, k]:g}; must be a number in "
                                 f"[0, {MAX_VALUE:g}]")
        for d in profile.downstream[o]:
            if not 0 <= d < n:
                raise InputError(f"{where}: operator {name!r}: downstream operator index {d} out of range")
        if profile.downstream[o] and profile.outbound[o] not in LINK_TYPES:
            raise InputError(f"{where}: operator {name!r}: outbound type {profile.outbound[o]!r} is not one of "
                             f"{', '.join(LINK_TYPES)}")
    cycle = _find_cycle(profile.downstream)
    if cycle:
        names = " -> ".join(profile.operator_names[o] for o in cycle)
        raise InputError(f"{where}: the operators form a cycle ({names})")


def _find_cycle(downstream: tuple[tuple[int, ...], ...]) -> list[int]:
    """One cycle ``[a, b, ..., a]`` of the operator graph, or ``[]`` (iterative depth first)."""
    state = [0] * len(downstream)  # 0 new, 1 on the path, 2 done
    for start in range(len(downstream)):
        if state[start]:
            continue
        path, stack = [start], [iter(downstream[start])]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                return path[path.index(nxt):] + [nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(downstream[nxt]))
    return []


def read_caps_profile(data: Any, where: str) -> ContentionProfile:
    """CAPSys's profile JSON (already parsed) as a :class:`ContentionProfile`.

    ``upNode`` must mirror ``downNode`` (CAPS reads both); an operator with downstream
    operators needs an ``outboundtype``. Errors name the entry and field.
    """
    if not isinstance(data, list) or not data:
        raise InputError(f"{where}: expected a non-empty list of operators")
    ids: dict[str, int] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise InputError(f"{where}: [{i}]: expected an object")
        missing = [f for f in _FIELDS if f not in entry]
        if missing:
            raise InputError(f"{where}: [{i}]: missing field {missing[0]!r}")
        key = entry["id"]
        if not isinstance(key, str) or not key:
            raise InputError(f"{where}: [{i}].id: expected a non-empty string, got {key!r}")
        if key in ids:
            raise InputError(f"{where}: [{i}].id: operator id {key!r} listed twice")
        ids[key] = i
    names, parallelism, costs, outbound, downstream, upstream = [], [], [], [], [], []
    for i, entry in enumerate(data):
        at = f"{where}: [{i}] (id {entry['id']!r})"
        name = entry["name"]
        if not isinstance(name, str) or not name:
            raise InputError(f"{at}.name: expected a non-empty string")
        p = entry["parallelism"]
        if isinstance(p, bool) or not isinstance(p, (int, float)) or p != int(p) or p < 1:
            raise InputError(f"{at}.parallelism: expected an integer >= 1, got {p!r}")
        vector = []
        for dim in DIMENSIONS:
            value = entry[dim]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"{at}.{dim}: expected a number, got {value!r}")
            if value < 0:
                raise InputError(f"{at}.{dim}: cost {value:g} is negative")
            vector.append(float(value))
        links = []
        for field, out in (("downNode", downstream), ("upNode", upstream)):
            listed = entry[field]
            if not isinstance(listed, list):
                raise InputError(f"{at}.{field}: expected a list of operator ids")
            for other in listed:
                if other not in ids:
                    raise InputError(f"{at}.{field}: unknown operator id {other!r}")
            out.append(tuple(ids[o] for o in listed))
            links.append(listed)
        kind = entry["outboundtype"]
        if links[0] and kind not in LINK_TYPES:
            raise InputError(f"{at}.outboundtype: {kind!r} is not one of {', '.join(LINK_TYPES)}")
        names.append(name)
        parallelism.append(int(p))
        costs.append(vector)
        outbound.append(kind if links[0] else "")
    for i, downs in enumerate(downstream):
        for d in downs:
            if i not in upstream[d]:
                raise InputError(f"{where}: [{d}] (id {data[d]['id']!r}).upNode: lacks {data[i]['id']!r}, whose "
                                 f"downNode lists it")
    for i, ups in enumerate(upstream):
        for u in ups:
            if i not in downstream[u]:
                raise InputError(f"{where}: [{u}] (id {data[u]['id']!r}).downNode: lacks {data[i]['id']!r}, whose "
                                 f"upNode lists it")
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"{where}: operator name {dup!r} listed twice")
    profile = ContentionProfile(tuple(names), tuple(parallelism), _frozen(np.array(costs, dtype=np.float64)),
                                tuple(outbound), tuple(downstream))
    check_profile(profile, where)
    return profile


def caps_records(profile: ContentionProfile) -> list[dict[str, Any]]:
    """``profile`` in CAPSys's profile JSON (what :func:`read_caps_profile` reads back); an
    operator's id is its index."""
    return [{"id": str(o), "name": name, "parallelism": int(profile.parallelism[o]),
             **{dim: float(profile.cost[o, k]) for k, dim in enumerate(DIMENSIONS)},
             "outboundtype": profile.outbound[o], "downNode": [str(d) for d in profile.downstream[o]],
             "upNode": [str(u) for u in profile.upstream[o]]}
            for o, name in enumerate(profile.operator_names)]


def in_operator_order(profile: ContentionProfile, names: tuple[str, ...], where: str) -> ContentionProfile:
    """``profile`` with its operators in the order of ``names`` (a graph read from a file lists
    its operators in its own order)."""
    if sorted(names) != sorted(profile.operator_names):
        raise InputError(f"{where}: the contention profile's operators differ from the graph's")
    index = {name: k for k, name in enumerate(profile.operator_names)}
    order = [index[name] for name in names]
    new_index = {old: new for new, old in enumerate(order)}
    return replace(profile, operator_names=tuple(names),
                   parallelism=tuple(profile.parallelism[o] for o in order),
                   cost=_frozen(profile.cost[order].copy()), outbound=tuple(profile.outbound[o] for o in order),
                   downstream=tuple(tuple(new_index[d] for d in profile.downstream[o]) for o in order))


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def graph_from_profile(profile: ContentionProfile, name: str, where: str | None = None) -> TaskGraph:
    """A task graph of the profile's tasks (load 1 each) carrying the profile.

    Edges carry the upstream task's ``network`` cost as rate and bytes: ``FORWARD`` sends all of
    task i's to downstream task ``i mod p_d``; ``REBALANCE`` and ``HASH`` send ``network / p_d``
    to each downstream task (CAPS's remote share ``1 - co-located / p_d``). For ``HASH`` and
    ``REBALANCE`` links the graph's inter-node traffic is then the sum of the workers' network
    costs; for ``FORWARD`` CAPS counts co-located tasks, not fixed pairs.
    """
    where = where or f"profile {name!r}"
    check_profile(profile, where)
    offsets = np.concatenate([[0], np.cumsum(profile.parallelism)]).astype(np.int64)
    task_operator = np.repeat(np.arange(profile.n_operators), profile.parallelism)
    srcs, dsts, rates = [], [], []
    for o, d, kind in profile.links():
        p_o, p_d, net = profile.parallelism[o], profile.parallelism[d], profile.cost[o, 2]
        if kind == "FORWARD":
            s = np.arange(p_o)
            t, r = s % p_d, np.full(p_o, net)
        else:
            s, t = np.repeat(np.arange(p_o), p_d), np.tile(np.arange(p_d), p_o)
            r = np.full(s.size, net / p_d)
        srcs.append(s + offsets[o])
        dsts.append(t + offsets[d])
        rates.append(r)
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
    rate = cat(rates, np.float64)
    graph = TaskGraph.build(name, profile.operator_names, task_operator, np.ones(task_operator.size),
                            cat(srcs, np.int64), cat(dsts, np.int64), rate, bytes_rate=rate, where=where)
    return with_profile(graph, profile, where)


def with_profile(graph: TaskGraph, profile: ContentionProfile, where: str | None = None) -> TaskGraph:
    """``graph`` carrying ``profile``; the operators and their task counts must match."""
    where = where or f"graph {graph.name!r}"
    if tuple(profile.operator_names) != tuple(graph.operator_names):
        raise InputError(f"{where}: the contention profile's operators differ from the graph's")
    counts = np.bincount(graph.task_operator, minlength=len(graph.operator_names))
    if tuple(int(c) for c in counts) != tuple(profile.parallelism):
        raise InputError(f"{where}: the contention profile's parallelism differs from the graph's task counts")
    check_profile(profile, where)
    return replace(graph, contention=profile)


def profile_from_graph(graph: TaskGraph) -> ContentionProfile:
    """The graph's own profile, or one derived from its weights when it has none.

    Derived: compute = the operator's mean task load, network = its mean outgoing rate (bytes
    per second where the graph has them, else tuples) over its downstream operators (CAPS
    charges ``network`` once per link), state not measured (0); a link is
    ``FORWARD`` when every upstream task sends to exactly one downstream task and the
    parallelisms are equal, else ``HASH``.
    """
    if graph.contention is not None:
        return graph.contention
    n_ops = len(graph.operator_names)
    counts = np.bincount(graph.task_operator, minlength=n_ops)
    weight = graph.bytes_rate if graph.bytes_rate.sum() > 0 else graph.rate
    ops_s, ops_d = graph.task_operator[graph.src], graph.task_operator[graph.dst]
    between = ops_s != ops_d
    out = np.bincount(graph.src[between], weights=weight[between], minlength=graph.n_tasks)
    safe = np.maximum(counts, 1)
    compute = np.bincount(graph.task_operator, weights=graph.load, minlength=n_ops) / safe
    pairs = sorted(set(zip(ops_s[between].tolist(), ops_d[between].tolist())))
    fan_out = np.maximum(np.bincount([o for o, _ in pairs], minlength=n_ops), 1)
    network = np.bincount(graph.task_operator, weights=out, minlength=n_ops) / safe / fan_out
    downstream: list[list[int]] = [[] for _ in range(n_ops)]
    outbound = [""] * n_ops
    for o, d in pairs:
        downstream[o].append(d)
        mask = between & (ops_s == o) & (ops_d == d)
        fan = np.bincount(graph.src[mask], minlength=graph.n_tasks)[graph.task_operator == o]
        forward = counts[o] == counts[d] and np.all(fan == 1)
        outbound[o] = "HASH" if outbound[o] == "HASH" or not forward else "FORWARD"
    cost = np.stack([compute, np.zeros(n_ops), network], axis=1)
    profile = ContentionProfile(tuple(graph.operator_names), tuple(int(c) for c in counts), _frozen(cost),
                                tuple(outbound), tuple(tuple(d) for d in downstream), measured=("compute", "network"))
    if _find_cycle(profile.downstream):
        # an operator cycle (Storm allows them): CAPS's model needs a DAG, keep compute only
        profile = replace(profile, downstream=tuple(() for _ in range(n_ops)), outbound=("",) * n_ops,
                          measured=("compute",))
    return profile


# ------------------------------------------------------------------ CAPSys's profiles
#: Built-in profiles (name -> file under ``data/caps``), from CAPSys's repository (Apache-2.0,
#: see ``data/caps/README.md``): Nexmark Q1-Q6 profiled for 4 workers x 8 slots and their
#: ``_updated`` re-profiles, the multi-query mix, Q8 and the DEEM inference pipeline.
PROFILES = {
    **{f"Q{k}{suffix}": f"Q{k}{suffix}.json" for k in range(1, 7) for suffix in ("", "_updated")},
    "multi": "multi.json", "q8": "q8_16_512.json", "deem": "deem_16_512.json", "Q2-join": "Q2_join_figure10.json",
}
#: The CAPSys cluster shape (workers, slots) each built-in profile was made for.
PROFILE_SHAPES = {**{name: (4, 8) for name in PROFILES if name.startswith("Q")},
                  "multi": (17, 16), "q8": (4, 16), "deem": (4, 16), "Q2-join": (4, 8)}


def builtin_profile(name: str) -> ContentionProfile:
    """The built-in CAPSys profile ``name`` (a key of :data:`PROFILES`)."""
    if name not in PROFILES:
        raise InputError(f"unknown CAPSys profile {name!r} (known: {', '.join(PROFILES)})")
    return load_profile(resources.files("streamsched") / "data" / "caps" / PROFILES[name])


def load_profile(path: str | Path) -> ContentionProfile:
    """A CAPSys profile JSON file."""
    from streamsched.model.io import read_document

    return read_caps_profile(read_document(Path(str(path))), str(path))
