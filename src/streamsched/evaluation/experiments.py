"""The papers' experiments, recomputed: grids of (scheduler x workload x cluster x seed) cells.

Each experiment lists its cells, runs them with :func:`run_cell` (locally, in processes, or as
Spark tasks through :mod:`streamsched.pipeline.sweep`), and summarises the rows into figures
and a table with the papers' own numbers beside ours (``comparison.md``/``.csv``).

Experiments (docs/reproduction.md discusses each):

- ``micro-optimum``: cost and resolution time against the optimum on the 72 micro-benchmark
  instances (i-scheduler.txt Figs. 4-9, t3-scheduler.txt Figs. 5-6);
- ``section6``: the section 6 workloads on their homogeneous and heterogeneous clusters with the
  model's throughput (i-scheduler.txt Figs. 10-17, t3-scheduler.txt Figs. 7-10);
- ``fischer``: 10-80 node sweeps of the Parallel and Payload topologies, network load and
  throughput against the even scheduler, tuple-size sweep and acking
  (fischer-metis-scheduler.txt V, Figs. 6, 9, 11, Table I);
- ``thesis``: the six scenarios of thesis Table 4.2 for WordCount and Exclamation.
"""

from __future__ import annotations

import json
import math
import re
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from streamsched import workloads
from streamsched.comparison import params_for
from streamsched.errors import InfeasibleError, InputError
from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.performance import REGIMES, ModelParams, predict
from streamsched.evaluation.pictures import bar_chart, line_chart
from streamsched.metrics import evaluate
from streamsched.model.cluster import Cluster, Node
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import available, scheduler_class

#: Model presets a cell can be evaluated under: the regimes plus Fischer's set-up with acking.
MODELS: dict[str, ModelParams] = {
    **REGIMES,
    "acking": ModelParams(acking=True),
    "acking-bandwidth": REGIMES["bandwidth-bound"].with_(acking=True, tuple_bytes=None),
    "no-acking-bandwidth": REGIMES["bandwidth-bound"].with_(tuple_bytes=None),
}


@dataclass(frozen=True)
class Cell:
    """One run: a scheduler on a workload and cluster (names resolved by :func:`build_graph`
    and :func:`build_cluster`), evaluated under the listed model presets."""

    experiment: str
    scheduler: str
    workload: str
    cluster: str
    seed: int = 0
    params: tuple[tuple[str, Any], ...] = ()
    models: tuple[str, ...] = ("default",)
    label: str = ""


# --------------------------------------------------------------------------- instances
def fischer_chains(name: str, parallelism: int, depth: int, tuple_bytes: float, seed: int) -> TaskGraph:
    """fischer-metis-scheduler.txt IV-C, Fig. 3: a spout and ``depth`` bolts, ``parallelism``
    tasks each, joined by fields grouping on one key per chain. Storm routes a key to
    ``hash(key) mod P``, so stage j's task i feeds stage j+1's task ``perm_j(i)`` for a seeded
    permutation: the chains are disjoint but not aligned by task index. Spouts emit 1000 tuples/s."""
    rng = np.random.default_rng(seed)
    p = parallelism
    task_operator = np.repeat(np.arange(depth + 1), p)
    chain = np.arange(p)
    src, dst = [], []
    for stage in range(depth):
        nxt = rng.permutation(p)
        src.append(stage * p + chain)
        dst.append((stage + 1) * p + nxt[chain])
        chain = nxt[chain]
    src_a, dst_a = np.concatenate(src), np.concatenate(dst)
    rate = np.full(src_a.size, 1000.0)
    names = ["spout"] + [f"bolt{i}" for i in range(1, depth + 1)]
    return TaskGraph.build(name, names, task_operator, np.ones(task_operator.size), src_a, dst_a, rate,
                           bytes_rate=rate * tuple_bytes)


def build_graph(name: str, seed: int = 0) -> TaskGraph:
    """A built-in workload, or ``fischer-parallel-P``, ``fischer-payload-P``,
    ``fischer-bytes-B-P`` (depth 3, tuples of B bytes, fischer-metis-scheduler.txt V-B1)."""
    match = re.fullmatch(r"fischer-(parallel|payload)-(\d+)", name)
    if match:
        size = 16.0 if match.group(1) == "parallel" else 3072.0
        return fischer_chains(name, int(match.group(2)), 7, size, seed)
    match = re.fullmatch(r"fischer-bytes-(\d+)-(\d+)", name)
    if match:
        return fischer_chains(name, int(match.group(2)), 3, float(match.group(1)), seed)
    return workloads.workload(name)


def build_cluster(name: str) -> Cluster:
    """A built-in cluster, or ``fischer-N``: N iMacs (4 cores at 2.7 GHz, 1 Gbps), one worker
    slot each, capacity 8 tasks (fischer-metis-scheduler.txt IV-D: about 8 tasks per machine)."""
    match = re.fullmatch(r"fischer-(\d+)", name)
    if match:
        n = int(match.group(1))
        nodes = tuple(Node(f"imac{i + 1}", capacity=8.0, slots=1, cores=4, ghz=2.7, ram_mb=8192.0,
                           rack=f"row-{i // 8}") for i in range(n))
        return Cluster(name, nodes)
    return workloads.cluster(name)


# ------------------------------------------------------------------------------ running
def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; expected failures become a ``status`` (missing, infeasible, error), never raise."""
    row: dict[str, Any] = {**{k: v for k, v in asdict(cell).items() if k not in ("params", "models")},
                           "params": dict(cell.params)}
    if cell.scheduler not in available():
        return {**row, "status": "missing", "error": f"scheduler {cell.scheduler!r} is not registered"}
    graph, cluster = build_graph(cell.workload, cell.seed), build_cluster(cell.cluster)
    row.update(tasks=graph.n_tasks, nodes=cluster.n_nodes)
    try:
        scheduler = scheduler_class(cell.scheduler)(**params_for(cell.scheduler, dict(cell.params)))
        start = time.perf_counter()
        placement = scheduler.schedule(graph, cluster, seed=cell.seed)
        row["wall_time_s"] = placement.metadata.get("wall_time_s", time.perf_counter() - start)
    except InfeasibleError as exc:
        return {**row, "status": "infeasible", "error": str(exc)}
    except Exception as exc:  # a broken scheduler must not stop a sweep; the row says why
        return {**row, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
    metrics = evaluate(graph, placement, cluster)
    row.update({k: metrics[k] for k in ("inter_node_traffic", "inter_node_bytes", "inter_worker_traffic",
                                        "total_traffic", "nodes_used", "workers_used", "load_imbalance",
                                        "valid")})
    row["status"] = placement.metadata.get("status", "ok" if metrics["valid"] else "invalid")
    for key in ("bound", "gap"):
        if key in placement.metadata:
            row[key] = placement.metadata[key]
    for model in cell.models:
        p = predict(graph, cluster, placement, MODELS[model])
        row[f"throughput_{model}"] = p.throughput_tps
        row[f"per_node_{model}"] = p.throughput_per_node
        row[f"latency_ms_{model}"] = p.latency_s * 1e3
        row[f"bottleneck_{model}"] = p.regime
        row[f"messages_per_source_tuple_{model}"] = p.messages_per_s / p.source_tps if p.source_tps else None
        row[f"wire_bytes_per_source_tuple_{model}"] = p.wire_bytes_per_source_tuple
    return row


def run_cells(cells: list[Cell], engine: str = "local", jobs: int = 1,
              progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Rows of every cell, in order: ``local`` (``jobs`` processes) or ``spark`` (one task per cell)."""
    if engine == "spark":
        from streamsched.pipeline.sweep import run_cells_on_spark

        return run_cells_on_spark(cells)
    if engine != "local":
        raise InputError(f"--engine: {engine!r} is not one of local, spark")
    if jobs < 1:
        raise InputError(f"--jobs: must be >= 1, got {jobs}")
    rows: list[dict[str, Any]] = []
    if jobs == 1:
        for i, cell in enumerate(cells):
            rows.append(run_cell(cell))
            if progress:
                progress(i + 1, len(cells))
        return rows
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, row in enumerate(pool.map(run_cell, cells)):
            rows.append(row)
            if progress:
                progress(i + 1, len(cells))
    return rows


# --------------------------------------------------------------------------- experiments
@dataclass(frozen=True)
class Experiment:
    name: str
    summary: str
    schedulers: tuple[str, ...]
    cells: Callable[[tuple[str, ...], bool, int], list[Cell]]
    summarise: Callable[[list[dict[str, Any]], Path], list[Path]]


#: Time limit given to the optimal scheduler per micro instance (the papers' CPLEX ran for hours
#: on a 64-core server; a run that stops at the limit reports its gap).
MICRO_TIME_LIMIT_S = 30.0


def _micro_cells(schedulers, quick, seed):
    sizes = (10, 16, 22) if quick else workloads.MICRO_SIZES
    return [Cell("micro-optimum", s, f"{shape}-{n}", c, seed, params=(("time_limit", MICRO_TIME_LIMIT_S),))
            for shape in ("linear", "diamond", "star") for n in sizes
            for c in ("homogeneous-10", "heterogeneous-10") for s in schedulers]


def _section6_cells(schedulers, quick, seed):
    cells = []
    micro = ("diamond-tp",) if quick else ("linear-tp", "diamond-tp", "star-tp")
    for w in micro:
        # i-scheduler.txt 6.1: I/O-intensive on 1 high + 2 low nodes, CPU-intensive on 2 high + 4 low
        cells += [Cell("section6", s, w, "high-low-1-2", seed, models=("io-bound",), label="I/O-intensive")
                  for s in schedulers]
        cells += [Cell("section6", s, w, "high-low-2-4", seed, models=("cpu-bound",), label="CPU-intensive")
                  for s in schedulers]
    apps = [("smart-home", "high-low-8-0"), ("smart-home", "high-low-2-4"), ("taxi-routes", "high-low-8-0"),
            ("taxi-routes", "high-low-2-2")]
    if quick:
        apps = apps[:1]
    models = ("default", "io-bound", "cpu-bound")
    for w, c in apps:
        cells += [Cell("section6", s, w, c, seed, models=models, label="application") for s in schedulers]
    if not quick:  # the papers re-ran OLS on as many nodes as the others used
        cells.append(Cell("section6", "ols", "smart-home", "high-low-4-0", seed, models=models, label="OLS on 4 nodes"))
        cells.append(Cell("section6", "ols", "taxi-routes", "high-low-3-0", seed, models=models, label="OLS on 3 nodes"))
    return cells


FISCHER_SIZES = tuple(range(10, 81, 10))
FISCHER_TUPLE_BYTES = (16, 112, 1024, 3072, 10240, 32768)


def _fischer_cells(schedulers, quick, seed):
    sizes = (10, 20) if quick else FISCHER_SIZES
    cells = [Cell("fischer", s, f"fischer-{topo}-{n}", f"fischer-{n}", seed, models=("acking", "default"),
                  label="sweep")
             for topo in ("parallel", "payload") for n in sizes for s in schedulers]
    n_size = 10 if quick else 40
    cells += [Cell("fischer", s, f"fischer-bytes-{b}-{n_size}", f"fischer-{n_size}", seed,
                   models=("acking-bandwidth", "no-acking-bandwidth"), label="tuple size")
              for b in FISCHER_TUPLE_BYTES for s in schedulers]
    return cells


def _thesis_cells(schedulers, quick, seed):
    scenarios = (1, 4) if quick else tuple(paper.THESIS_SCENARIOS)
    cells = []
    for w in ("wordcount", "exclamation"):
        for k in scenarios:
            slots, required = paper.THESIS_SCENARIOS[k]
            cells += [Cell("thesis", s, w, f"thesis-9-s{slots}", seed, params=(("workers", required),),
                           models=("default", "io-bound"), label=f"S{k}") for s in schedulers]
    return cells


# ------------------------------------------------------------------------- summaries
def _ok(rows):
    """Rows whose scheduler produced a placement."""
    return [r for r in rows if "inter_node_traffic" in r]


def _write_table(out_dir: Path, name: str, header: list[str], lines: list[list[Any]], notes: Iterable[str]) -> list[Path]:
    """``name``.csv and ``name``.md with the same table; notes go under the markdown table."""
    import csv

    csv_path, md_path = out_dir / f"{name}.csv", out_dir / f"{name}.md"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[_plain(v) for v in line] for line in lines])
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(_fmt(v) for v in line) + " |" for line in lines]
    md += [""] + [f"- {n}" for n in notes]
    md_path.write_text("\n".join(md) + "\n")
    return [csv_path, md_path]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4g}"
    return str(v)


def _plain(v: Any) -> Any:
    return "" if v is None else v


def _figure(out_dir: Path, name: str, data: bytes) -> Path:
    figures = out_dir / "figures"
    figures.mkdir(exist_ok=True)
    path = figures / f"{name}.png"
    path.write_bytes(data)
    return path


def _missing_note(rows) -> list[str]:
    missing = sorted({r["scheduler"] for r in rows if r.get("status") == "missing"})
    failed = sorted({f"{r['scheduler']} on {r['workload']}/{r['cluster']}: {r['status']}" for r in rows
                     if r.get("status") in ("error", "infeasible")})
    notes = []
    if missing:
        notes.append("Not registered, so not run: " + ", ".join(missing) + ".")
    notes += [f"Failed: {f}" for f in failed[:20]]
    return notes


def _summarise_micro(rows, out_dir):
    written = []
    ok = _ok(rows)
    optimum = {(r["workload"], r["cluster"]): r["inter_node_traffic"] for r in ok if r["scheduler"] == "optimal"
               and (str(r.get("status")).lower() in ("ok", "optimal") or r.get("gap") == 0)}
    schedulers = sorted({r["scheduler"] for r in ok})
    header = ["instance", "cluster", "optimum (ours)", "optimum (paper)"]
    for s in schedulers:
        header += [f"{s} cost", f"{s} paper", f"{s} time s"]
    lines = []
    instances = sorted({(r["workload"], r["cluster"]) for r in rows if r["workload"] != "-"}, key=lambda k: (k[0].split("-")[0], int(k[0].split("-")[1]), k[1]))
    by_key = {(r["scheduler"], r["workload"], r["cluster"]): r for r in ok}
    for w, c in instances:
        shape, n = w.split("-")[0], int(w.split("-")[1])
        printed = paper.MICRO_COST.get((shape, n, c), {})
        line = [w, c, optimum.get((w, c)), printed.get("optimal")]
        for s in schedulers:
            r = by_key.get((s, w, c))
            line += [r["inter_node_traffic"] if r else None, printed.get(s), r.get("wall_time_s") if r else None]
        lines.append(line)
    notes = list(paper.MICRO_CLAIMS) + _missing_note(rows)
    if optimum:
        for s in schedulers:
            if s == "optimal":
                continue
            gaps = [by_key[(s, w, c)]["inter_node_traffic"] - optimum[(w, c)] for (w, c) in optimum if (s, w, c) in by_key]
            if gaps:
                notes.append(f"{s}: matches the optimum on {sum(g <= 1e-9 for g in gaps)} of {len(gaps)} "
                             f"instances; largest excess {max(gaps):g}.")
    written += _write_table(out_dir, "comparison", header, lines, notes)
    for shape in ("linear", "diamond", "star"):
        for c in ("homogeneous-10", "heterogeneous-10"):
            sizes = sorted({int(w.split("-")[1]) for (w, cc) in instances if w.startswith(shape + "-") and cc == c})
            if not sizes:
                continue
            cost = {s: [by_key.get((s, f"{shape}-{n}", c), {}).get("inter_node_traffic") for n in sizes] for s in schedulers}
            wall = {s: [by_key.get((s, f"{shape}-{n}", c), {}).get("wall_time_s") for n in sizes] for s in schedulers}
            written.append(_figure(out_dir, f"cost-{shape}-{c}", line_chart(
                f"{shape}, {c}: cost (i-scheduler.txt Figs. 4-6)", sizes, cost, "tasks", "inter-node traffic",
                dashed=("optimal",))))
            written.append(_figure(out_dir, f"time-{shape}-{c}", line_chart(
                f"{shape}, {c}: resolution time (Figs. 7-9)", sizes, wall, "tasks", "seconds", log_y=True,
                dashed=("optimal",))))
    return written


def _summarise_section6(rows, out_dir):
    ok = _ok(rows)
    written = []
    header = ["workload", "cluster", "setting", "scheduler", "nodes used", "inter-node traffic", "model",
              "throughput (model)", "relative to best (model)", "paper throughput", "relative to best (paper)",
              "paper nodes used"]
    lines = []
    groups = sorted({(r["workload"], r["cluster"], r["label"]) for r in ok})
    for w, c, label in groups:
        members = [r for r in ok if (r["workload"], r["cluster"], r["label"]) == (w, c, label)]
        printed = paper.SECTION6_THROUGHPUT.get((w, c), {})
        printed_nodes = paper.SECTION6_NODES.get((w, c), {})
        models = [k[len("throughput_"):] for k in members[0] if k.startswith("throughput_")]
        for model in models:
            best = max(r[f"throughput_{model}"] for r in members)
            paper_best = max(printed.values()) if printed else None
            for r in members:
                tp = r[f"throughput_{model}"]
                pp = printed.get(r["scheduler"])
                lines.append([w, c, label, r["scheduler"], r["nodes_used"], r["inter_node_traffic"], model, tp,
                              tp / best if best else None, pp, pp / paper_best if pp and paper_best else None,
                              printed_nodes.get(r["scheduler"])])
            names = [r["scheduler"] for r in members]
            relative = [r[f"throughput_{model}"] / best if best else None for r in members]
            paper_rel = [printed[n] / paper_best if n in printed and paper_best else None for n in names]
            written.append(_figure(out_dir, f"{w}-{c}-{label.replace('/', '').replace(' ', '-')}-{model}", bar_chart(
                f"{w} on {c} ({label}), model {model}: throughput / best", names, relative, "relative",
                paper=paper_rel if printed and label == "application" else None)))
    notes = list(paper.SECTION6_CLAIMS) + [
        "Paper throughputs are tuples per 10 s per task on real Storm clusters; ours are the model's "
        "tuples/s. Compare the 'relative to best' columns, not absolute values."] + _missing_note(rows)
    for (model, w), gains in paper.SECTION6_MICRO_GAINS.items():
        for (a, b), pct in gains.items():
            ra = next((r for r in ok if r["scheduler"] == a and r["workload"] == w and f"throughput_{model}" in r), None)
            rb = next((r for r in ok if r["scheduler"] == b and r["workload"] == w and f"throughput_{model}" in r), None)
            ours = f"{100 * (ra[f'throughput_{model}'] / rb[f'throughput_{model}'] - 1):+.0f} %" if ra and rb else "not run"
            notes.append(f"{w}, {model}: {a} over {b}: paper +{pct} %, model {ours}.")
    written += _write_table(out_dir, "comparison", header, lines, notes)
    return written


def _summarise_fischer(rows, out_dir):
    ok = _ok(rows)
    written = []
    by = {(r["scheduler"], r["workload"]): r for r in ok}
    header = ["topology", "nodes", "scheduler", "network bytes per spout tuple (acking)", "reduction vs even %",
              "throughput (model, acking)", "gain vs even %", "messages per spout tuple",
              "messages with / without acking", "paper avg reduction %",
              "paper avg gain %"]
    lines = []
    schedulers = sorted({r["scheduler"] for r in ok})
    for topo in ("parallel", "payload"):
        sizes = sorted({r["nodes"] for r in ok if r["workload"].startswith(f"fischer-{topo}-")})
        reduction: dict[str, list] = {s: [] for s in schedulers if s != "even"}
        gain: dict[str, list] = {s: [] for s in schedulers if s != "even"}
        for n in sizes:
            base = by.get(("even", f"fischer-{topo}-{n}"))
            for s in schedulers:
                r = by.get((s, f"fischer-{topo}-{n}"))
                if r is None:
                    continue
                wire = r["wire_bytes_per_source_tuple_acking"]
                base_wire = base["wire_bytes_per_source_tuple_acking"] if base else 0.0
                red = 100 * (1 - wire / base_wire) if base_wire else None
                g = 100 * (r["throughput_acking"] / base["throughput_acking"] - 1) if base else None
                if s != "even":
                    reduction[s].append(red)
                    gain[s].append(g)
                lines.append([topo, n, s, wire, red, r["throughput_acking"], g,
                              r.get("messages_per_source_tuple_acking"),
                              r["messages_per_source_tuple_acking"] / r["messages_per_source_tuple_default"],
                              paper.FISCHER_NETWORK_REDUCTION.get(topo, {}).get(s),
                              paper.FISCHER_THROUGHPUT_GAIN.get(topo, {}).get(s)])
        if sizes and reduction:
            written.append(_figure(out_dir, f"network-reduction-{topo}", line_chart(
                f"{topo}: network load reduction vs even (Fig. 6)", sizes, reduction, "cluster nodes", "%")))
            written.append(_figure(out_dir, f"throughput-gain-{topo}", line_chart(
                f"{topo}: model throughput gain vs even (Fig. 6, Table I)", sizes, gain, "cluster nodes", "%")))
    size_rows = [r for r in ok if r["label"] == "tuple size"]
    if size_rows:
        sizes = sorted({int(r["workload"].split("-")[2]) for r in size_rows})
        n = size_rows[0]["nodes"]
        series = {}
        for s in schedulers:
            for model, tag in (("acking-bandwidth", "acking"), ("no-acking-bandwidth", "no acking")):
                series[f"{s} ({tag})"] = [by.get((s, f"fischer-bytes-{b}-{n}"), {}).get(f"throughput_{model}") for b in sizes]
        written.append(_figure(out_dir, "tuple-size", line_chart(
            f"throughput vs tuple size, {n} nodes, depth 3 (Fig. 9)", sizes, series, "tuple bytes",
            "tuples/s (model)", log_y=True, dashed=[k for k in series if "no acking" in k])))
        for b in sizes:
            base = by.get(("even", f"fischer-bytes-{b}-{n}"))
            for s in schedulers:
                r = by.get((s, f"fischer-bytes-{b}-{n}"))
                if r is None or base is None:
                    continue
                wire, base_wire = (r["wire_bytes_per_source_tuple_acking-bandwidth"],
                                   base["wire_bytes_per_source_tuple_acking-bandwidth"])
                lines.append([f"bytes-{b}", n, s, wire, 100 * (1 - wire / base_wire) if base_wire else None,
                              r["throughput_acking-bandwidth"],
                              100 * (r["throughput_acking-bandwidth"] / base["throughput_acking-bandwidth"] - 1),
                              r.get("messages_per_source_tuple_acking-bandwidth"),
                              r["messages_per_source_tuple_acking-bandwidth"]
                              / r["messages_per_source_tuple_no-acking-bandwidth"], None, None])
    notes = list(paper.FISCHER_CLAIMS) + [
        "'Greedy' in the paper is Aniello et al.'s online scheduler, here 'ols'.",
        "Messages per spout tuple with acking: data tuples + one ack per executed tuple + init and "
        "completion per spout tuple (model M5).",
        "Network bytes include the ack messages, which cross nodes whatever the placement (M5), as "
        "Fischer's bandwidth measurements did."] + _missing_note(rows)
    written += _write_table(out_dir, "comparison", header, lines, notes)
    return written


def _summarise_thesis(rows, out_dir):
    ok = _ok(rows)
    written = []
    header = ["topology", "scenario", "scheduler", "workers used", "nodes used", "inter-node traffic",
              "throughput (model)", "gain vs even %", "throughput per node (eq. 1.2)", "io-bound throughput",
              "paper: best gain vs default", "paper nodes used"]
    lines = []
    for w in ("wordcount", "exclamation"):
        scenarios = sorted({r["label"] for r in ok if r["workload"] == w}, key=lambda s: int(s[1:]))
        schedulers = sorted({r["scheduler"] for r in ok if r["workload"] == w})
        by = {(r["scheduler"], r["label"]): r for r in ok if r["workload"] == w}
        for label in scenarios:
            k = int(label[1:])
            base = by.get(("even", label))
            stated = paper.THESIS_GAINS[w].get(k)
            for s in schedulers:
                r = by.get((s, label))
                if r is None:
                    continue
                gain = 100 * (r["throughput_default"] / base["throughput_default"] - 1) if base else None
                stated_text = f"{stated[0]} +{stated[1]} %" if stated and stated[0] == s else None
                nodes_paper = paper.THESIS_NODES.get(w, {}).get(k, {})
                lines.append([w, label, s, r["workers_used"], r["nodes_used"], r["inter_node_traffic"],
                              r["throughput_default"], gain, r["per_node_default"], r["throughput_io-bound"],
                              stated_text, nodes_paper.get("even" if s == "even" else "proposed")
                              if s in ("even", stated[0] if stated else "") else None])
        for key, title, unit in (("throughput_default", "throughput (model)", "tuples/s"),
                                 ("nodes_used", "nodes used", "nodes"),
                                 ("per_node_default", "throughput per node (eq. 1.2)", "tuples/s/node")):
            series = {s: [by.get((s, lab), {}).get(key) for lab in scenarios] for s in schedulers}
            xs = [int(lab[1:]) for lab in scenarios]
            written.append(_figure(out_dir, f"{w}-{key}", line_chart(
                f"{w}: {title} per scenario (Table 4.2)", xs, series, "scenario", unit)))
    notes = list(paper.THESIS_CLAIMS) + [
        "Scenarios: slots per node / slots required = " + ", ".join(
            f"S{k}: {a}/{b}" for k, (a, b) in paper.THESIS_SCENARIOS.items()) + "; 'workers' is passed to "
        "every scheduler that declares it.",
        "The thesis also names a 'TRA-Storm' for word count S6 and exclamation S5; it is not described "
        "there, so its gains are not listed."] + _missing_note(rows)
    written += _write_table(out_dir, "comparison", header, lines, notes)
    return written


EXPERIMENTS: dict[str, Experiment] = {
    "micro-optimum": Experiment(
        "micro-optimum", "cost and resolution time against the optimum, 72 micro-benchmark instances",
        ("optimal", "i-scheduler", "t3", "metis", "r-storm", "ols", "even"), _micro_cells, _summarise_micro),
    "section6": Experiment(
        "section6", "I/O- and CPU-intensive micro-benchmarks, smart home and taxi routes (model throughput)",
        ("i-scheduler", "t3", "r-storm", "ols", "even"), _section6_cells, _summarise_section6),
    "fischer": Experiment(
        "fischer", "10-80 node sweeps of Parallel and Payload, tuple size and acking",
        ("even", "metis", "ols"), _fischer_cells, _summarise_fischer),
    "thesis": Experiment(
        "thesis", "six scenarios of thesis Table 4.2, WordCount and Exclamation",
        ("even", "isolation", "r-storm", "top-storm", "a3-storm", "ban-storm", "gr-storm"),
        _thesis_cells, _summarise_thesis),
}


def experiment(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise InputError(f"unknown experiment {name!r} (known: {', '.join(EXPERIMENTS)})") from None


@dataclass
class ReproductionResult:
    experiment: str
    rows: list[dict[str, Any]]
    written: list[Path]
    missing: list[str]
    wall_time_s: float


def reproduce(name: str, out_dir: str | Path, schedulers: Iterable[str] | None = None, quick: bool = False,
              seed: int = 0, engine: str = "local", jobs: int = 1,
              progress: Callable[[int, int], None] | None = None) -> ReproductionResult:
    """Run experiment ``name`` and write ``results.csv/json``, ``comparison.csv/md`` and
    ``figures/*.png`` into ``out_dir``. Schedulers the paper used but the registry lacks are
    listed as missing (their cells are not run)."""
    exp = experiment(name)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    chosen = tuple(schedulers) if schedulers is not None else exp.schedulers
    registered = set(available())
    missing = [s for s in chosen if s not in registered]
    start = time.perf_counter()
    cells = exp.cells(tuple(s for s in chosen if s in registered), quick, seed)
    rows = run_cells(cells, engine=engine, jobs=jobs, progress=progress)
    rows += [{"experiment": name, "scheduler": s, "workload": "-", "cluster": "-", "seed": seed, "label": "",
              "status": "missing", "error": f"scheduler {s!r} is not registered"} for s in missing]
    out.mkdir(parents=True, exist_ok=True)
    written = _write_rows(out, rows)
    written += exp.summarise(rows, out)
    return ReproductionResult(name, rows, written, missing, time.perf_counter() - start)


def _write_rows(out: Path, rows: list[dict[str, Any]]) -> list[Path]:
    import csv

    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    csv_path, json_path = out / "results.csv", out / "results.json"
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()})
    json_path.write_text(json.dumps(rows, indent=1, default=str))
    return [csv_path, json_path]
