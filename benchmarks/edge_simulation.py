"""Reproduction runs of edge-cloud-topset.txt section 5 (Figs. 3-7) and the planning-time goal.

Runs the simulation for the given setup, workloads, strategies and rebalance strategies,
writes ``intervals.csv`` per workload plus the figures under ``--out``, and prints markdown
tables: planning time per interval, sum of makespans relative to GA-Incremental (same
interval), and the reduction of the sum of makespans by each rebalance strategy.

    nice .venv/bin/python benchmarks/edge_simulation.py --setup small --out /tmp/edge-small
    nice .venv/bin/python benchmarks/edge_simulation.py --setup large --strategies topset,topset-p \
        --rebalances none,vertex,edge,both --out /tmp/edge-large
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from streamsched.edge.figures import write_figures
from streamsched.edge.ga import GASettings
from streamsched.edge.simulation import read_results, simulate_many, write_results
from streamsched.edge.workloads import WORKLOADS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", default="small")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--strategies", default="topset,topset-p,ga-i,ga-g,edge-only,cloud-only")
    parser.add_argument("--rebalances", default="none,vertex,edge,both")
    parser.add_argument("--intervals", type=int, default=None)
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--generations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="directory for the results (one sub-directory per workload)")
    parser.add_argument("--report", nargs="+", metavar="CSV",
                        help="only print the tables from intervals.csv files written earlier")
    args = parser.parse_args()
    if args.report:
        report(args.setup, [(path, r) for path in args.report for r in read_results(path)])
        return
    if not args.out:
        parser.error("--out is required unless --report is given")
    ga = GASettings(population=args.population, generations=args.generations)
    rows = []
    for workload in args.workloads.split(","):
        start = time.perf_counter()
        results = simulate_many(args.setup, workload, args.strategies.split(","), args.rebalances.split(","),
                                args.seed, args.intervals, ga)
        write_results(results, f"{args.out}/{workload}")
        write_figures(results, f"{args.out}/{workload}", f"({args.setup}, {workload})")
        print(f"{workload}: {time.perf_counter() - start:.0f} s", flush=True)
        rows.extend((workload, r) for r in results)
    report(args.setup, rows)


def report(setup: str, rows) -> None:
    runs = defaultdict(list)
    for workload, r in rows:
        runs[(r.strategy, r.rebalance)].append((workload, r))
    print(f"\n### Planning time per interval, {setup} setup (ms)\n")
    print("| strategy | rebalance | wall mean | wall p95 | wall max | CPU mean | CPU p95 | CPU max | failed intervals |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (strategy, rebalance), items in runs.items():
        t = 1e3 * np.array([r.planning_time_s for _, r in items])
        c = 1e3 * np.array([r.planning_cpu_s for _, r in items])
        failed = sum(r.failed for _, r in items)
        print(f"| {strategy} | {rebalance} | {t.mean():.2f} | {np.percentile(t, 95):.2f} | {t.max():.1f} | "
              f"{c.mean():.2f} | {np.percentile(c, 95):.2f} | {c.max():.1f} | {failed}/{len(items)} |")
    # Compare two runs at an interval only when the same dataflows are active (a failed arrival
    # drops a dataflow from one run for the rest of it).
    index = {(w, r.strategy, r.rebalance, r.interval): r.sum_makespan_s for w, r in rows}
    active = {(w, r.strategy, r.rebalance, r.interval): (r.active_dataflows, r.active_queries) for w, r in rows}

    def same(w, r, strategy, rebalance):
        return active.get((w, strategy, rebalance, r.interval)) == (r.active_dataflows, r.active_queries)

    if any(k[1] == "ga-i" and k[2] == "none" for k in index):
        print(f"\n### Sum of makespans relative to GA-I (no rebalance), {setup} setup\n")
        print("| strategy | mean ratio | median | intervals compared |")
        print("|---|---|---|---|")
        for (strategy, rebalance), items in runs.items():
            if rebalance != "none":
                continue
            ratio = np.array([r.sum_makespan_s / index[(w, "ga-i", "none", r.interval)]
                              if same(w, r, "ga-i", "none") else np.nan for w, r in items])
            ratio = ratio[np.isfinite(ratio)]
            if ratio.size:
                print(f"| {strategy} | {ratio.mean():.3f} | {np.median(ratio):.3f} | {ratio.size} |")
    print(f"\n### Reduction of the sum of makespans by rebalancing, {setup} setup (%)\n")
    print("| strategy | rebalance | mean | max | min | of the summed makespans |")
    print("|---|---|---|---|---|---|")
    for (strategy, rebalance), items in runs.items():
        if rebalance == "none":
            continue
        base = np.array([index[(w, strategy, "none", r.interval)] if same(w, r, strategy, "none") else np.nan
                         for w, r in items])
        value = np.array([r.sum_makespan_s for _, r in items])
        keep = np.isfinite(base) & np.isfinite(value) & (base > 0)
        if not keep.any():
            continue
        change = 100.0 * (base[keep] - value[keep]) / base[keep]
        total = 100.0 * (base[keep].sum() - value[keep].sum()) / base[keep].sum()
        print(f"| {strategy} | {rebalance} | {change.mean():.2f} | {change.max():.2f} | {change.min():.2f} | {total:.2f} |")


if __name__ == "__main__":
    main()
