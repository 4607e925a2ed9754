"""Storm's TestLargeCluster, reproduced: every topology of a set scheduled onto its layout, then
Storm's second phase (each topology removed and scheduled again on what the others hold).

Inputs are read from ``../shared/peers/storm-clusterconf/largeClusterNN`` (Storm's test
resources) with :mod:`streamsched.engines.storm.nimbus` (``executors="hint"``, no ackers: the
executors Storm's test schedules); clusters are the built-in ``storm-large-NN``. Each (set,
scheduler) runs in a fresh process (peak RSS from ``getrusage``) under a time limit. Schedulers
run strict (no capacity repair): a topology counts as fully scheduled only when the scheduler
itself placed every executor, as Storm's ``assertTopologiesFullyScheduled``. ``even`` is Storm's
EvenScheduler with each topology's ``topology.workers`` slots (ours is capacity-aware, so it
refuses most of these topologies: one slot cannot hold them); ``even-all-slots`` round-robins
over every free slot and is the baseline of the network metric, compared on the topologies
both placed.

    PYTHONPATH=src python benchmarks/storm_large_cluster.py [--sets 01 02 03] [--schedulers r-storm even]
        [--timeout 600] [--json out.json]

Prints one Markdown table row per (set, scheduler): topologies fully scheduled, wall time of the
first phase, the slowest and median remove-and-reschedule step, peak RSS, CPU and memory
utilisation of the cluster, and the network metric (connections intra-worker, inter-worker,
inter-node, inter-rack) with inter-node and inter-rack connections as a ratio to
``even-all-slots`` on the same topologies.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

PEERS = Path(__file__).resolve().parents[3] / "shared" / "peers" / "storm-clusterconf"
if not PEERS.is_dir():
    PEERS = Path("/work/shared/peers/storm-clusterconf")


def run(set_id: str, spec: str) -> dict:
    """One (set, scheduler) in this process; ``spec`` is a scheduler name, ``:file`` after it
    for the topologies in file order instead of Storm's priority order."""
    scheduler_name, _, order_name = spec.partition(":")
    import numpy as np

    from streamsched import workloads
    from streamsched.engines.storm import nimbus
    from streamsched.metrics import traffic_by_distance
    from streamsched.schedulers import get_scheduler
    from streamsched.schedulers.base import reschedule_each, schedule_many

    start = time.perf_counter()
    topologies = [t for t in nimbus.read_dir(PEERS / f"largeCluster{set_id}", executors="hint") if not t.empty]
    read_s = time.perf_counter() - start
    graphs = [t.graph for t in topologies]
    cluster = workloads.cluster(f"storm-large-{set_id}")
    if scheduler_name == "even":
        scheduler = [get_scheduler("even", workers=max(t.workers, 1), strict=True) for t in topologies]
    elif scheduler_name == "even-all-slots":
        scheduler = get_scheduler("even", workers=0, strict=True)
    else:
        scheduler = get_scheduler(scheduler_name, strict=True)
    start = time.perf_counter()
    order = None if order_name == "file" else nimbus.priority_order(topologies)
    placements = schedule_many(scheduler, graphs, cluster, skip_infeasible=True, order=order)
    first_s = time.perf_counter() - start
    placed = sum(p is not None for p in placements)
    second = reschedule_each(scheduler, graphs, cluster, placements)
    steps = [seconds for _, _, seconds in second]
    again = sum(p is not None for p, _, _ in second)
    reasons = sorted({r.split(";")[0][:160] for _, r, _ in second if r})
    broken = limits_broken(graphs, placements, cluster)
    network = dict.fromkeys(("intra_worker", "inter_worker", "inter_node", "inter_rack"), 0.0)
    cpu = memory = 0.0
    per_topology = {}
    for graph, placement in zip(graphs, placements):
        if placement is None:
            continue
        per_topology[graph.name] = traffic_by_distance(graph, placement, cluster)
        for key, value in per_topology[graph.name].items():
            network[key] += value
        cpu += graph.total_load
        memory += float(graph.memory_mb.sum())
    return {
        "set": set_id, "scheduler": spec, "topologies": len(graphs),
        "executors": sum(g.n_tasks for g in graphs), "connections": sum(g.n_edges for g in graphs),
        "supervisors": cluster.n_nodes, "fully_scheduled": placed, "rescheduled": again,
        "read_s": read_s, "first_phase_s": first_s, "step_max_s": max(steps), "step_median_s": float(np.median(steps)),
        "step_max_topology": graphs[int(np.argmax(steps))].name,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu_utilisation": cpu / cluster.total_capacity,
        "memory_utilisation": memory / sum(n.ram_mb for n in cluster.nodes),
        "network": network, "per_topology": per_topology, "failures": reasons[:3], "limits_broken": broken,
        "not_placed": [t.name for t, p in zip(topologies, placements) if p is None],
    }


def limits_broken(graphs, placements, cluster) -> dict:
    """What Storm's RAS would not allow, checked here apart from the schedulers (those outside
    the R-Storm family keep only the load capacity and slots): nodes over their CPU or memory,
    workers over their topology's heap limit, after the first phase."""
    import numpy as np

    cpu, memory, heap = np.zeros(cluster.n_nodes), np.zeros(cluster.n_nodes), 0
    for graph, placement in zip(graphs, placements):
        if placement is None:
            continue
        np.add.at(cpu, placement.node_of, graph.load)
        np.add.at(memory, placement.node_of, graph.memory_mb)
        if graph.worker_heap_mb > 0 and graph.onheap_mb is not None:
            key = placement.node_of.astype(np.int64) * 10_000 + placement.worker_of
            _, inverse = np.unique(key, return_inverse=True)
            heap += int(np.count_nonzero(np.bincount(inverse, weights=graph.onheap_mb) > graph.worker_heap_mb + 1e-6))
    ram = np.array([n.ram_mb for n in cluster.nodes])
    return {"nodes_over_cpu": int(np.count_nonzero(cpu > np.array([n.cores for n in cluster.nodes]) + 1e-6)),
            "nodes_over_memory": int(np.count_nonzero(memory > ram + 1e-6)), "workers_over_heap": heap}


def limit_memory(megabytes: float):
    """A ``preexec_fn`` capping the child's address space (``RLIMIT_AS``) at ``megabytes``."""
    def apply() -> None:
        limit = int(megabytes * 1024 * 1024)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["01", "02", "03"])
    parser.add_argument("--schedulers", nargs="+", default=["storm-ras", "r-storm", "r-storm:file", "even",
                                                            "even-all-slots", "metis", "i-scheduler", "gr-storm"],
                        help="even (topology.workers slots), even-all-slots, or any scheduler name; NAME:file "
                             "schedules the topologies in file order instead of Storm's priority order")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per (set, scheduler)")
    parser.add_argument("--memory-mb", type=float, default=4096.0, help="address space per (set, scheduler), MB")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--one", nargs=2, metavar=("SET", "SCHEDULER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run(*args.one)))
        return
    results = []
    for set_id in args.sets:
        for name in args.schedulers:
            try:
                done = subprocess.run([sys.executable, __file__, "--one", set_id, name], capture_output=True,
                                      text=True, timeout=args.timeout, preexec_fn=limit_memory(args.memory_mb))
            except subprocess.TimeoutExpired:
                results.append({"set": set_id, "scheduler": name, "error": f"time limit {args.timeout:g} s"})
                continue
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                results.append({"set": set_id, "scheduler": name, "error": f"exit {done.returncode}: {last[:200]}"})
                continue
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print("| set | scheduler | fully scheduled (phase 2) | first phase s | reschedule step max / median s "
          "| peak RSS MB | CPU / memory util. | connections intra-worker / inter-worker / inter-node / inter-rack "
          "| inter-node / inter-rack vs even-all-slots, same topologies | nodes over CPU / MB, workers over heap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    even = {r["set"]: r for r in results if r["scheduler"] == "even-all-slots" and "error" not in r}
    for r in results:
        if "error" in r:
            print(f"| {r['set']} | {r['scheduler']} | - | did not finish: {r['error']} | | | | | | |")
            continue
        n, b = r["network"], r["limits_broken"]
        ratio = ""
        base = even.get(r["set"])
        if base is not None:
            common = sorted(set(r["per_topology"]) & set(base["per_topology"]))
            ours = {k: sum(r["per_topology"][t][k] for t in common) for k in ("inter_node", "inter_rack")}
            theirs = {k: sum(base["per_topology"][t][k] for t in common) for k in ("inter_node", "inter_rack")}
            ratio = " / ".join(f"{ours[k] / theirs[k]:.3f}" if theirs[k] else "-" for k in ours)
            ratio += f" ({len(common)} topologies)"
        print(f"| {r['set']} | {r['scheduler']} | {r['fully_scheduled']}/{r['topologies']} "
              f"({r['rescheduled']}) | {r['first_phase_s']:.2f} | {r['step_max_s']:.2f} / "
              f"{r['step_median_s']:.3f} | {r['peak_rss_mb']:.0f} | {r['cpu_utilisation']:.1%} / "
              f"{r['memory_utilisation']:.1%} | {n['intra_worker']:.0f} / {n['inter_worker']:.0f} / "
              f"{n['inter_node']:.0f} / {n['inter_rack']:.0f} | {ratio} | {b['nodes_over_cpu']} / "
              f"{b['nodes_over_memory']}, {b['workers_over_heap']} |")
    for r in results:
        if r.get("failures"):
            names = r["not_placed"]
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            print(f"- {r['set']} {r['scheduler']}: not placed {shown}; e.g. {r['failures'][0]}")
    for r in results:
        if "step_max_topology" in r:
            print(f"- {r['set']} {r['scheduler']}: slowest reschedule step {r['step_max_topology']} "
                  f"({r['step_max_s']:.2f} s)")


if __name__ == "__main__":
    main()
