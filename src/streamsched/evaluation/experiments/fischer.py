"""``fischer``: 10-80 node sweeps of the Parallel and Payload topologies, network load and
throughput against the even scheduler, tuple-size sweep and acking (fischer-metis-scheduler.txt
V, Figs. 6, 9, 11, Table I). Its instances, ``fischer-parallel-P``, ``fischer-payload-P``,
``fischer-bytes-B-P`` graphs and ``fischer-N`` clusters, are built-in workloads and clusters
(:mod:`streamsched.workloads`)."""

from __future__ import annotations



from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.experiments.cells import Cell, Experiment
from streamsched.evaluation.experiments.tables import figure, missing_note, ok_rows, write_table


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
    from streamsched.evaluation.pictures import line_chart  # matplotlib on use, not when experiments are listed

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
    ("even", "metis", "ols"), list_cells, summarise)
