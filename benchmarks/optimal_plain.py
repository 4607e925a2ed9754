"""``optimal`` against a plain CP-SAT model on measured graphs (issue 24 item 2): time to a
proven optimum.

Plain model (written here with OR-Tools directly, independent of ``streamsched.solvers``): one
0/1 variable per task and node, one cut variable per communicating pair (``x[a,u] == x[b,u]``
unless the pair is cut), capacities as knapsack rows, rates scaled by 1,000 and rounded down
(so its bound stays a bound), hinted with I-Scheduler's placement, 1 worker, at most ``--work``
deterministic seconds. ``optimal``: :func:`streamsched.solvers.solve_placement` with its
defaults (no wall clock, ``work_limit`` = ``--work``, 1 worker), warm-started with the same
I-Scheduler placement, the task's operator as group. Both in the same process one after the
other, so both see the same machine load; times are wall clock.

Instances: the demo's graph (tests/fixtures/demo, the pipeline's snapshot of
fischer-payload-10, on fischer-11), the 36 measured micro-benchmarks of
``measured_graphs.py build`` (on heterogeneous-10) and the random DAGs up to ``--max-tasks``::

    nice .venv/bin/python benchmarks/measured_graphs.py build --dir /tmp/measured
    nice .venv/bin/python benchmarks/optimal_plain.py --dir /tmp/measured --work 10 --markdown /tmp/plain.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from ortools.sat.python import cp_model

from streamsched.pipeline.store import load_snapshot
from streamsched.schedulers import get_scheduler
from streamsched.solvers import solve_placement
from streamsched.solvers.problem import build_problem
from streamsched.workloads import cluster

sys.path.insert(0, str(Path(__file__).parent))
from measured_graphs import instances  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "demo" / "fischer-payload-10-snapshot"
RATE_SCALE, LOAD_SCALE = 1e3, 1e6


def plain(graph, nodes, hint: np.ndarray, work: float) -> dict:
    """The plain model (module docstring); its status, cost (true rates) and proven bound."""
    problem = build_problem(graph.load, graph.src, graph.dst, graph.rate, nodes.capacity)
    n, m = problem.n_items, problem.n_nodes
    started = time.perf_counter()
    model = cp_model.CpModel()
    x = [[model.new_bool_var("") for _ in range(m)] for _ in range(n)]
    for row in x:
        model.add_exactly_one(row)
    loads = np.ceil(problem.loads * LOAD_SCALE).astype(int).tolist()
    for k in range(m):
        model.add(sum(load * x[i][k] for i, load in enumerate(loads))
                  <= int(np.floor(problem.capacity[k] * (1 + 1e-9) * LOAD_SCALE)))
    cut = [model.new_bool_var("") for _ in problem.weight]
    for c, a, b in zip(cut, problem.pair_a.tolist(), problem.pair_b.tolist()):
        for k in range(m):
            model.add(x[a][k] == x[b][k]).only_enforce_if(c.Not())
    weights = np.floor(problem.weight * RATE_SCALE).astype(int).tolist()
    model.minimize(sum(w * c for w, c in zip(weights, cut)))
    for i in range(n):
        for k in range(m):
            model.add_hint(x[i][k], int(hint[i] == k))
    for c, a, b in zip(cut, problem.pair_a.tolist(), problem.pair_b.tolist()):
        model.add_hint(c, int(hint[a] != hint[b]))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = work
    status = solver.solve(model)
    wall = time.perf_counter() - started
    found = np.array([[solver.value(v) for v in row] for row in x]).argmax(axis=1)
    cost = problem.cost(found)
    bound = solver.best_objective_bound / RATE_SCALE
    return dict(status="optimal" if cost - bound <= 1e-6 * max(1.0, cost) + problem.weight.size / RATE_SCALE
                and status == cp_model.OPTIMAL else solver.status_name(status).lower(),
                cost=cost, bound=bound, wall_s=round(wall, 2), work=round(solver.response_proto.deterministic_time, 2))


def ours(graph, nodes, hint: np.ndarray, work: float) -> dict:
    started = time.perf_counter()
    result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, nodes.capacity, work_limit=work, workers=1,
                             warm_start=[hint], groups=graph.task_operator)
    return dict(status=result.status, cost=result.objective, bound=result.bound, formulation=result.formulation,
                bound_source=result.bound_source, wall_s=round(time.perf_counter() - started, 2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="measured_graphs.py build directory (omit: the demo graph only)")
    parser.add_argument("--work", type=float, default=10.0)
    parser.add_argument("--max-tasks", type=int, default=100)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    cases = [("demo: fischer-payload-10 measured", lambda: (load_snapshot(DEMO), cluster("fischer-11")))]
    if args.dir:
        cases += [(label, (lambda g=g, c=c: (g, c))) for label, g, c in instances(args.dir)]
    rows = []
    for label, make in cases:
        graph, nodes = make()
        if graph.n_tasks > args.max_tasks:
            continue
        hint = np.asarray(get_scheduler("i-scheduler").schedule(graph, nodes).node_of)
        row = dict(instance=label, tasks=graph.n_tasks, nodes=nodes.n_nodes, optimal=ours(graph, nodes, hint, args.work),
                   plain=plain(graph, nodes, hint, args.work))
        rows.append(row)
        print(json.dumps(row), flush=True)
        write(rows, args)  # after every instance: a long run's table so far
    return 0


def write(rows: list[dict], args) -> None:
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        lines = ["| instance | tasks | `optimal` status | wall s | bound from | plain CP-SAT status | wall s | "
                 "cost `optimal` / plain |", "|---|---:|---|---:|---|---|---:|---:|"]
        for r in rows:
            o, p = r["optimal"], r["plain"]
            lines.append(f"| {r['instance']} | {r['tasks']} | {o['status']} | {o['wall_s']:.1f} | {o['bound_source']} | "
                         f"{p['status']} | {p['wall_s']:.1f} | {o['cost'] / p['cost'] if p['cost'] else 1.0:.4f} |")
        args.markdown.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
