"""The control-interval simulation of Ghosh et al. [1]_ section 5.

At each interval one dataflow arrives or departs (:func:`arrival_sequence`); the strategy
places an arriving dataflow (TopSet, TopSet/P, GA-Incremental) or re-places everything
(GA-Global), a departing one is undeployed, then the rebalance strategy runs. Recorded per
interval: the sum of makespans ``L^_{G_{t+1}}`` (NaN when the strategy failed to place the
arriving dataflow, the paper's '?'), the planning time ``phi_t`` (placement + rebalance; wall
clock and this process's CPU time, which differ on a busy machine), the
migrations ``rho_t`` and the stabilization time ``psi_t`` (3.2) with migration time ``eta``.

Edge-Only and Cloud-Only are the paper's infeasible lower-bound baselines: unlimited exclusive
resources of one kind, no network except one edge-to-cloud crossing per path (at the
smallest edge-cloud latency and largest bandwidth of the setup), no constraints.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from streamsched.errors import InfeasibleError, InputError
from streamsched.edge.deployment import Deployment
from streamsched.edge.ga import GASettings, place_ga_global, place_ga_incremental
from streamsched.edge.model import CLOUD, EDGE, Dataflow, EdgeSystem, coefficients, critical_path
from streamsched.edge.rebalance import STRATEGIES as REBALANCES
from streamsched.edge.rebalance import rebalance as run_rebalance
from streamsched.edge.topset import place_topset
from streamsched.edge.workloads import arrival_sequence, build_system, dataflow_pool, setup

STRATEGIES = ("topset", "topset-p", "ga-i", "ga-g", "edge-only", "cloud-only")
#: Strategies that keep a deployment which rebalancing can improve (section 5, Fig. 4).
REBALANCEABLE = ("topset", "topset-p", "ga-i")


@dataclass(frozen=True)
class IntervalResult:
    strategy: str
    rebalance: str
    interval: int
    action: str
    dataflow: str
    queries: int
    active_dataflows: int
    active_queries: int
    utilisation: float
    sum_makespan_s: float
    planning_time_s: float
    planning_cpu_s: float
    migrations: int
    stabilization_s: float
    failed: bool


def baseline_makespan(system: EdgeSystem, dataflow: Dataflow, kind: int) -> float:
    """Edge-Only (``kind`` = EDGE) or Cloud-Only makespan of one dataflow (see module doc);
    the one crossing costs the setup's smallest edge-cloud latency at its largest bandwidth,
    so the baselines stay lower bounds."""
    edge, cloud = system.edge_resources, system.cloud_resources
    cross = np.ix_(edge, cloud)
    latency = float(system.net_latency[cross].min()) if edge.size and cloud.size else 0.0
    bandwidth = float(system.net_bandwidth[cross].max()) if edge.size and cloud.size else np.inf
    src, dst = dataflow.edges
    if kind == EDGE:
        on_cloud = dataflow.is_sink & ~dataflow.is_source
    else:
        on_cloud = ~dataflow.is_source
    eff = np.where(on_cloud, dataflow.latency[:, CLOUD], dataflow.latency[:, EDGE])
    crossing = on_cloud[dst] & ~on_cloud[src]
    cost = np.where(crossing, latency + dataflow.event_bytes[src] / bandwidth, 0.0)
    return critical_path(dataflow, eff, cost, with_tail=False)[0]


def stabilization_time(deployment: Deployment, before: dict[int, np.ndarray], eta: float) -> tuple[int, float]:
    """``(rho_t, psi_t)``: queries of dataflows active before and after that changed resource,
    and the largest ``psi = omega_in eta / (1 / lambda_eff - omega_in)`` among them (3.2)."""
    migrations, worst = 0, 0.0
    for dag_id, old in before.items():
        new = deployment.mapping.get(dag_id)
        if new is None:
            continue
        moved = np.flatnonzero(new != old)
        if not moved.size:
            continue
        migrations += int(moved.size)
        dataflow = deployment.dataflows[dag_id]
        eff = deployment.effective_latency(dag_id)[moved]
        omega = dataflow.omega_in[moved]
        spare = 1.0 / eff - omega
        psi = np.where(spare > 0, omega * eta / np.where(spare > 0, spare, 1.0), np.inf)
        worst = max(worst, float(psi.max()))
    return migrations, worst


def simulate(setup_name: str, workload: str, strategy: str, rebalance: str = "none", seed: int = 0,
             intervals: int | None = None, ga: GASettings = GASettings()) -> list[IntervalResult]:
    """Run one strategy with one rebalance strategy over a workload; one result per interval."""
    if strategy not in STRATEGIES:
        raise InputError(f"--strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if rebalance not in REBALANCES:
        raise InputError(f"--rebalance {rebalance!r} is not one of {', '.join(REBALANCES)}")
    if rebalance != "none" and strategy not in REBALANCEABLE:
        raise InputError(f"--rebalance {rebalance}: only {', '.join(REBALANCEABLE)} keep a placement to rebalance")
    spec = setup(setup_name)
    system = build_system(spec, seed)
    pool = dataflow_pool(seed)
    eta = float(coefficients().workload["migration_time_s"])
    n_intervals = spec.intervals if intervals is None else int(intervals)
    events = arrival_sequence(workload, system.n, n_intervals, [d.n for d in pool], spec.poisson_initial, seed)
    deployment = Deployment(system)
    baseline: dict[int, tuple[float, int]] = {}  # instance -> (makespan, queries)
    results = []
    for event in events:
        dataflow = pool[event.pool_index]
        before = deployment.snapshot()
        failed = False
        start, start_cpu = time.perf_counter(), time.process_time()
        if strategy in ("edge-only", "cloud-only"):
            if event.action == "add":
                kind = EDGE if strategy == "edge-only" else CLOUD
                baseline[event.instance] = (baseline_makespan(system, dataflow, kind), dataflow.n)
            else:
                baseline.pop(event.instance, None)
        elif strategy == "ga-g":
            active = dict(deployment.dataflows)
            if event.action == "add":
                active[event.instance] = dataflow
            else:
                active.pop(event.instance, None)
            try:
                deployment = place_ga_global(system, active, ga, seed=seed * 1_000_003 + event.interval)
            except InfeasibleError:
                failed = True
                if event.action == "remove" and event.instance in deployment.dataflows:
                    deployment.undeploy(event.instance)
        elif event.action == "add":
            try:
                if strategy == "ga-i":
                    place_ga_incremental(deployment, event.instance, dataflow, ga, seed=seed * 1_000_003 + event.interval)
                else:
                    place_topset(deployment, event.instance, dataflow, penalty=strategy == "topset-p")
            except InfeasibleError:
                failed = True
        elif event.instance in deployment.dataflows:
            deployment.undeploy(event.instance)
        if rebalance != "none":
            run_rebalance(deployment, rebalance)
        planning, planning_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        if strategy in ("edge-only", "cloud-only"):
            total, migrations, psi = float(sum(m for m, _ in baseline.values())), 0, 0.0
            active_dags = len(baseline)
            active_queries = sum(n for _, n in baseline.values())
        else:
            total = float("nan") if failed else deployment.total_makespan()
            migrations, psi = stabilization_time(deployment, before, eta)
            active_dags = len(deployment.dataflows)
            active_queries = sum(d.n for d in deployment.dataflows.values())
        results.append(IntervalResult(
            strategy, rebalance, event.interval, event.action, dataflow.name, dataflow.n, active_dags,
            active_queries, active_queries / system.n, total, planning, planning_cpu, migrations, psi, failed))
    return results


def simulate_many(setup_name: str, workload: str, strategies, rebalances, seed: int = 0,
                  intervals: int | None = None, ga: GASettings = GASettings()) -> list[IntervalResult]:
    """The cross product of strategies and rebalance strategies (skipping the combinations the
    paper does not run: rebalancing GA-Global or the baselines)."""
    out: list[IntervalResult] = []
    runs = [(s, r) for s in strategies for r in rebalances if r == "none" or s in REBALANCEABLE]
    if not runs:
        raise InputError("nothing to run: rebalancing applies only to " + ", ".join(REBALANCEABLE))
    for strategy, rebalance in runs:
        out.extend(simulate(setup_name, workload, strategy, rebalance, seed, intervals, ga))
    return out


COLUMNS = tuple(f.name for f in fields(IntervalResult))


def write_results(results: list[IntervalResult], out: str | Path) -> Path:
    """``intervals.csv`` (one row per strategy, rebalance and interval) and ``summary.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "intervals.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in results:
            writer.writerow(asdict(row))
    (out / "summary.json").write_text(json.dumps(summarise(results), indent=1))
    return path


def read_results(path: str | Path) -> list[IntervalResult]:
    """Rows written by :func:`write_results` (``intervals.csv``)."""
    types = {f.name: f.type for f in fields(IntervalResult)}
    parse = {"int": int, "float": float, "str": str, "bool": lambda text: text == "True"}
    with Path(path).open(newline="") as handle:
        try:
            return [IntervalResult(**{k: parse[types[k]](v) for k, v in row.items()}) for row in csv.DictReader(handle)]
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}: not an intervals.csv of edge simulate ({exc})") from None


def summarise(results: list[IntervalResult]) -> list[dict]:
    """Per strategy and rebalance: mean sum of makespans, planning time, migrations, psi."""
    groups: dict[tuple[str, str], list[IntervalResult]] = {}
    for row in results:
        groups.setdefault((row.strategy, row.rebalance), []).append(row)
    summary = []
    for (strategy, rebalance), rows in groups.items():
        makespans = np.array([r.sum_makespan_s for r in rows])
        planning = np.array([r.planning_time_s for r in rows])
        cpu = np.array([r.planning_cpu_s for r in rows])
        summary.append({
            "strategy": strategy,
            "rebalance": rebalance,
            "intervals": len(rows),
            "failed": int(sum(r.failed for r in rows)),
            "mean_sum_makespan_s": float(np.nanmean(makespans)) if np.isfinite(makespans).any() else None,
            "mean_planning_time_s": float(planning.mean()),
            "max_planning_time_s": float(planning.max()),
            "mean_planning_cpu_s": float(cpu.mean()),
            "max_planning_cpu_s": float(cpu.max()),
            "total_migrations": int(sum(r.migrations for r in rows)),
            "mean_stabilization_s": float(np.mean([r.stabilization_s for r in rows])),
        })
    return summary
