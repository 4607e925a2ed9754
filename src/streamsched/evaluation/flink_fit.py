"""The throughput model (docs/model.md T1-T5) fitted to a Flink job's measurements.

A measurement is a window of the job under one placement: the reading's graph (records and
bytes per subtask pair), each subtask's TaskManager, the source records/s, each TaskManager's
CPU (its JVM's CPU time differenced: cores; the lab reads it from /proc) and, where the links are counted
(the network lab's veths), each TaskManager's wire bytes in and out. From windows under
several placements:

    F1  cpu_wk = b + sum_o c_o p_wko + c_net x_wk     (non-negative least squares)

with ``p_wko`` the records/s the subtasks of operator o on TaskManager k process (received;
sent for a source), ``x_wk`` the records/s on subtask pairs split between k and another
TaskManager with an end on k (T1's remote records), ``b`` a TaskManager's own CPU (JVM,
metrics, checkpoints). Per record CPU is not Flink's busy time, which counts a throttled or
waiting subtask as busy: F1 fits what the TaskManagers' CPU time says.

    F2  eta = max over windows and link directions of payload_wkd / net_kd   (those >= 1/2)

(payload: bytes/s of the subtask pairs the placement splits across TaskManager k's link in
direction d, Flink's byte counters; net: the link's capacity in the cluster file, the rate it
is shaped to): the share of a link's rate that carries records when it saturates (framing,
TCP/IP headers, acknowledgements and the JobManager's traffic take the rest); only directions
loaded to at least half their rate count, the others say nothing of where a link saturates.
Without such a direction, the median over windows of payload / wire bytes of the busiest
direction (1 without link counters). A placement P is predicted from a reading of the job under another placement: each
task's load ``c_o p_t`` (cores at the reading's rate), each node's CPU ``cap_k - b``, its links
``eta net_k``, ``c = c_net`` per remote record at each end, then T1-T5
(:func:`streamsched.model.throughput.predict_throughput`).

Held out (:func:`held_out`): each placement is predicted by a fit on the others' windows alone,
from the reference placement's reading; the baseline is "placement changes nothing" (the
reference's measured throughput for every placement). Prior: each placement predicted by a fit
on the reference's windows alone (Flink's default, its submissions), the only measurements
there are before a plan runs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
from scipy.optimize import nnls

from streamsched.errors import InputError
from streamsched.evaluation.engine_models import graph_of
from streamsched.model.cluster import Cluster
from streamsched.model.contention import with_profile
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.throughput import ThroughputPrediction, predict_throughput

FORMAT = "streamsched.flink-fit/1"
#: F2 counts a link direction whose payload reached this share of its rate.
SATURATING = 0.5


@dataclass(frozen=True)
class Window:
    """One measured window: graph, TaskManager per subtask, source records/s, CPU cores per
    TaskManager, and (optional) each TaskManager's link bytes/s, ``{"in": .., "out": ..}``."""

    placement: str
    graph: TaskGraph
    taskmanagers: tuple[str, ...]
    throughput: float
    cpu: dict[str, float]
    links: dict[str, dict[str, float]] | None = None


@dataclass(frozen=True)
class FlinkFit:
    """F1-F2's parameters: CPU seconds per record per operator, per remote record, per
    TaskManager (cores), and the links' payload share."""

    operator_cpu: dict[str, float]
    net_cpu_per_record: float
    base_cores: float
    link_efficiency: float
    windows: int
    placements: int
    residual_rel: float

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "operator_cpu_s_per_record": self.operator_cpu,
                "net_cpu_s_per_remote_record": self.net_cpu_per_record, "base_cores": self.base_cores,
                "link_efficiency": self.link_efficiency, "windows": self.windows, "placements": self.placements,
                "cpu_residual_rel": self.residual_rel}


def processed(graph: TaskGraph) -> np.ndarray:
    """Records/s each task processes: received, or sent where it receives nothing (a source)."""
    received = np.bincount(graph.dst, weights=graph.rate, minlength=graph.n_tasks)
    sent = np.bincount(graph.src, weights=graph.rate, minlength=graph.n_tasks)
    return np.where(received > 0, received, sent)


def cpu_loads(graph: TaskGraph, taskmanagers: Sequence[str], cpu: dict[str, float]) -> TaskGraph:
    """``graph`` with each TaskManager's measured CPU (cores) shared among its subtasks in
    proportion to their busy time (the graph's loads): Flink's busy time counts a throttled or
    waiting subtask as busy, the TaskManager's CPU time does not. Subtasks of a TaskManager
    without a CPU reading, or whose busy time is 0, keep their loads."""
    load = np.asarray(graph.load, dtype=np.float64).copy()
    tms = np.asarray(taskmanagers)
    for tm, cores in cpu.items():
        mine = tms == tm
        busy = float(load[mine].sum())
        if math.isfinite(cores) and cores >= 0 and busy > 0:
            load[mine] *= cores / busy
    shared = TaskGraph.build(graph.name, graph.operator_names, graph.task_operator, load, graph.src, graph.dst,
                             graph.rate, graph.bytes_rate, where=graph.name, load_unit=graph.load_unit)
    return shared if graph.contention is None else with_profile(shared, graph.contention, graph.name)


def _node_index(taskmanagers: Sequence[str], names: list[str]) -> np.ndarray:
    return np.array([names.index(tm) for tm in taskmanagers], dtype=np.int64)


def design(windows: Sequence[Window]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """F1's rows, one per (window, TaskManager with a CPU reading): columns b, c_o per
    operator, c_net; and the measured cores."""
    operators = sorted({name for w in windows for name in w.graph.operator_names})
    rows, y = [], []
    for w in windows:
        names = sorted(set(w.taskmanagers) | set(w.cpu))
        node = _node_index(w.taskmanagers, names)
        work = processed(w.graph)
        cut = node[w.graph.src] != node[w.graph.dst]
        remote = np.bincount(node[w.graph.src][cut], weights=w.graph.rate[cut], minlength=len(names)) + \
            np.bincount(node[w.graph.dst][cut], weights=w.graph.rate[cut], minlength=len(names))
        for k, tm in enumerate(names):
            cores = w.cpu.get(tm, math.nan)
            if not math.isfinite(cores):
                continue
            per_op = np.zeros(len(operators))
            for t in np.flatnonzero(node == k):
                per_op[operators.index(w.graph.operator_names[w.graph.task_operator[t]])] += work[t]
            rows.append([1.0, *per_op, remote[k]])
            y.append(cores)
    return ["base", *operators, "remote"], np.array(rows), np.array(y)


def fit(windows: Sequence[Window], cluster: Cluster | None = None) -> FlinkFit:
    """F1 by non-negative least squares (each row scaled by its measured cores: relative
    errors) and F2 (on ``cluster``'s link capacities where it gives them); bad input (no
    window, no CPU reading) is one line."""
    if not windows:
        raise InputError("fit: no measured window")
    names, x, y = design(windows)
    if y.size < len(names):
        raise InputError(f"fit: {y.size} TaskManager windows with a CPU reading for {len(names)} parameters "
                         f"(measure more windows or placements)")
    weight = 1.0 / np.maximum(y, 1e-3)
    coef, _ = nnls(x * weight[:, None], y * weight)
    fitted = x @ coef
    residual = float(np.median(np.abs(fitted - y) / np.maximum(y, 1e-3)))
    capacities = {} if cluster is None else {n.name: {"in": n.net_in, "out": n.net_out} for n in cluster.nodes}
    loads = [load for w in windows for load in link_loads(w, capacities) if load >= SATURATING]
    shares = [share for share in map(payload_share, windows) if share is not None]
    return FlinkFit({n: float(c) for n, c in zip(names[1:-1], coef[1:-1])}, float(coef[-1]), float(coef[0]),
                    max(loads) if loads else float(statistics.median(shares)) if shares else 1.0, len(windows),
                    len({w.placement for w in windows}), residual)


def _payload(window: Window, tm: str, direction: str) -> float:
    g, tms = window.graph, np.asarray(window.taskmanagers)
    cut = tms[g.src] != tms[g.dst]
    end = g.dst if direction == "in" else g.src
    return float(g.bytes_rate[cut & (tms[end] == tm)].sum())


def link_loads(window: Window, capacities: dict[str, dict[str, float | None]]) -> list[float]:
    """F2's ratios payload / capacity of every link direction with a capacity."""
    return [_payload(window, tm, d) / cap for tm, caps in capacities.items() for d, cap in caps.items()
            if cap and tm in window.taskmanagers]


def payload_share(window: Window) -> float | None:
    """F2's ratio in one window: payload / wire bytes of its busiest link direction (None
    without link counters or traffic)."""
    if not window.links:
        return None
    wire, tm, direction = max((float(v[d]), name, d) for name, v in window.links.items() for d in ("in", "out"))
    payload = _payload(window, tm, direction) if wire > 0 else 0.0
    return payload / wire if payload > 0 else None


def predict(model: FlinkFit, reading: Window, cluster: Cluster, taskmanagers: Sequence[str]) -> ThroughputPrediction:
    """T1-T5 of the placement ``taskmanagers`` (one per subtask) from ``reading`` (a window
    under another placement), with F1-F2's parameters; ``cluster`` names every TaskManager with
    its cores and link capacities."""
    graph = reading.graph
    missing = sorted(set(graph.operator_names) - set(model.operator_cpu))
    if missing:
        raise InputError(f"fit: no CPU cost fitted for operator {missing[0]!r}")
    cost = np.array([model.operator_cpu[graph.operator_names[o]] for o in graph.task_operator])
    loaded = TaskGraph.build(graph.name, graph.operator_names, graph.task_operator, cost * processed(graph),
                             graph.src, graph.dst, graph.rate, graph.bytes_rate, where=graph.name,
                             load_unit=graph.load_unit)
    scale = lambda v: None if v is None else v * model.link_efficiency  # noqa: E731
    nodes = [replace(n, capacity=max(n.capacity - model.base_cores, 1e-6), net_in=scale(n.net_in),
                     net_out=scale(n.net_out)) for n in cluster.nodes]
    machines = replace(cluster, nodes=tuple(nodes) if isinstance(cluster.nodes, tuple) else nodes)
    node_of = _node_index(taskmanagers, [n.name for n in cluster.nodes])
    return predict_throughput(loaded, machines, node_of, model.net_cpu_per_record)


def _by_placement(windows: Sequence[Window], reference: str) -> tuple[dict[str, list[Window]], str, list[str]]:
    """Windows per placement, the reference's name (of several submissions ``reference#k``, the
    last's: the plans were made on its reading) and the names of all its submissions."""
    by: dict[str, list[Window]] = {}
    for w in windows:
        by.setdefault(w.placement, []).append(w)
    submissions = [p for p in by if p == reference or p.startswith(f"{reference}#")]
    if reference not in by and submissions:
        reference = submissions[-1]
    if reference not in by or len(by) < 3:
        raise InputError(f"fit: leave-one-out needs the reference {reference!r} and at least 2 other placements")
    return by, reference, submissions


def held_out(windows: Sequence[Window], cluster: Cluster, reference: str) -> list[dict[str, Any]]:
    """Leave one placement out: each placement's median throughput predicted from the
    ``reference`` placement's last window (of several submissions ``reference#k``, the last's)
    by a fit on the other placements' windows (the reference itself from the next placement's
    window), beside "nothing changes"; and ``prior``: predicted by a fit on the reference's
    submissions alone (what the measurements taken before any plan ran predict; ``None`` for
    the reference's own submissions)."""
    by, reference, submissions = _by_placement(windows, reference)
    before = fit([w for p in submissions for w in by[p]], cluster)
    out = []
    for name, own in by.items():
        base = reference if name != reference else next(p for p in by if p != reference)
        model = fit([w for w in windows if w.placement != name], cluster)
        measured = statistics.median(w.throughput for w in own)
        predicted = predict(model, by[base][-1], cluster, own[-1].taskmanagers).throughput
        prior = None if name in submissions else predict(before, by[reference][-1], cluster,
                                                         own[-1].taskmanagers).throughput
        unchanged = statistics.median(w.throughput for w in by[base])
        out.append({"placement": name, "from": base, "measured": measured, "predicted": predicted,
                    "error": abs(predicted - measured) / measured, "unchanged_error": abs(unchanged - measured) / measured,
                    "prior": prior, "prior_error": None if prior is None else abs(prior - measured) / measured})
    return out


def read_measurements(data: Any, where: str) -> list[tuple[str, Cluster, list[Window]]]:
    """The cells of a measurement file (``benchmarks/network_lab.py --json``): per cell, its
    name, cluster (cores and link capacities per TaskManager) and windows, each labelled with
    its placement (``name#k`` for the k-th of several submissions under one name: Flink's own
    placement differs between them); one-line errors."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise InputError(f"{where}: expected a JSON object with a list 'cells' (benchmarks/network_lab.py --json)")
    out = []
    for c, cell in enumerate(data["cells"]):
        w = f"{where}.cells[{c}]"
        if not isinstance(cell, dict):
            raise InputError(f"{w}: expected an object")
        cluster = Cluster.from_dict(cell.get("cluster"), f"{w}.cluster")
        windows = []
        for name, entries in (cell.get("placements") or {}).items():
            entries = entries if isinstance(entries, list) else []
            for e, entry in enumerate(entries):
                label = f"{name}#{e + 1}" if len(entries) > 1 else str(name)  # submissions: placements of their own
                for i, row in enumerate(entry.get("windows", []) if isinstance(entry, dict) else []):
                    at = f"{w}.placements.{name}[{e}].windows[{i}]"
                    try:
                        graph = graph_of(row["graph"], f"{at}.graph")
                        links = {str(k): {d: float(v[d]) for d in ("in", "out")}
                                 for k, v in (row.get("link_bytes_per_s") or {}).items()}
                        windows.append(Window(label, graph, tuple(str(t) for t in row["taskmanagers"]),
                                              float(row["source_records_per_s"]),
                                              {str(k): float(v) for k, v in row["cpu_cores"].items()}, links or None))
                    except (KeyError, TypeError, ValueError, AttributeError) as exc:
                        raise InputError(f"{at}: {exc!r} (expected graph, taskmanagers, source_records_per_s, "
                                         f"cpu_cores; link_bytes_per_s optional)") from None
                    if len(windows[-1].taskmanagers) != graph.n_tasks:
                        raise InputError(f"{at}.taskmanagers: {len(windows[-1].taskmanagers)} for "
                                         f"{graph.n_tasks} subtasks")
        out.append((str(cell.get("cell", f"cell {c}")), cluster, windows))
    return out
