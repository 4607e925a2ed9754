"""``fischer``: 10-80 node sweeps of the Parallel and Payload topologies, network load and
throughput against the even scheduler, tuple-size sweep and acking (fischer-metis-scheduler.txt
V, Figs. 6, 9, 11, Table I). Its instances: ``fischer-parallel-P``, ``fischer-payload-P``,
``fischer-bytes-B-P`` graphs and ``fischer-N`` clusters."""

from __future__ import annotations

import re

import numpy as np

from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.experiments.cells import Cell, Experiment
from streamsched.evaluation.experiments.tables import figure, missing_note, ok_rows, write_table
from streamsched.evaluation.pictures import line_chart
from streamsched.model.cluster import Cluster, Node
from streamsched.model.taskgraph import TaskGraph


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


def fischer_graph(name: str, seed: int = 0) -> TaskGraph | None:
    """``fischer-parallel-P``, ``fischer-payload-P`` (depth 7, tuples of 16 and 3072 bytes) or
    ``fischer-bytes-B-P`` (depth 3, tuples of B bytes, fischer-metis-scheduler.txt V-B1); None
    for any other name."""
    match = re.fullmatch(r"fischer-(parallel|payload)-(\d+)", name)
    if match:
        size = 16.0 if match.group(1) == "parallel" else 3072.0
        return fischer_chains(name, int(match.group(2)), 7, size, seed)
    match = re.fullmatch(r"fischer-bytes-(\d+)-(\d+)", name)
    if match:
        return fischer_chains(name, int(match.group(2)), 3, float(match.group(1)), seed)
    return None


def fischer_cluster(name: str) -> Cluster | None:
    """``fischer-N``: N iMacs (4 cores at 2.7 GHz, 1 Gbps), one worker slot each, capacity 8
    tasks (fischer-metis-scheduler.txt IV-D: about 8 tasks per machine); None for any other name."""
    match = re.fullmatch(r"fischer-(\d+)", name)
    if match:
        n = int(match.group(1))
        nodes = tuple(Node(f"imac{i + 1}", capacity=8.0, slots=1, cores=4, ghz=2.7, ram_mb=8192.0,
                           rack=f"row-{i // 8}") for i in range(n))
        return Cluster(name, nodes)
    return None


FISCHER_SIZES = tuple(range(10, 81, 10))
FISCHER_TUPLE_BYTES = (16, 112, 1024, 3072, 10240, 32768)


def list_cells(schedulers, quick, seed):
    sizes = (10, 20) if quick else FISCHER_SIZES
    cells = [Cell("fischer", s, f"fischer-{topo}-{n}", f"fischer-{n}", seed, models=("acking", "default"),
                  label="sweep")
             for topo in ("parallel", "payload") for n in sizes for s in schedulers]
    n_size = 10 if quick else 40
    cells += [Cell("fischer", s, f"fischer-bytes-{b}-{n_size}", f"fischer-{n_size}", seed,
                   models=("acking-bandwidth", "no-acking-bandwidth"), label="tuple size")
              for b in FISCHER_TUPLE_BYTES for s in schedulers]
    return cells


def summarise(rows, out_dir):
    ok = ok_rows(rows)
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
            written.append(figure(out_dir, f"network-reduction-{topo}", line_chart(
                f"{topo}: network load reduction vs even (Fig. 6)", sizes, reduction, "cluster nodes", "%")))
            written.append(figure(out_dir, f"throughput-gain-{topo}", line_chart(
                f"{topo}: model throughput gain vs even (Fig. 6, Table I)", sizes, gain, "cluster nodes", "%")))
    size_rows = [r for r in ok if r["label"] == "tuple size"]
    if size_rows:
        sizes = sorted({int(r["workload"].split("-")[2]) for r in size_rows})
        n = size_rows[0]["nodes"]
        series = {}
        for s in schedulers:
            for model, tag in (("acking-bandwidth", "acking"), ("no-acking-bandwidth", "no acking")):
                series[f"{s} ({tag})"] = [by.get((s, f"fischer-bytes-{b}-{n}"), {}).get(f"throughput_{model}") for b in sizes]
        written.append(figure(out_dir, "tuple-size", line_chart(
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
        "Fischer's bandwidth measurements did."] + missing_note(rows)
    written += write_table(out_dir, "comparison", header, lines, notes)
    return written


EXPERIMENT = Experiment(
    "fischer", "10-80 node sweeps of Parallel and Payload, tuple size and acking",
    ("even", "metis", "ols"), list_cells, summarise, graph=fischer_graph, cluster=fischer_cluster)
