"""Learning the cost model from monitoring data (issue 17, item 2): the generator's ground-truth
cost model (src/streamsched/model/costs.py, M1-M2 of docs/evaluation.md), the least-squares fit
(src/streamsched/evaluation/cost_regression.py) and ``fit-costs``.

The 2-operator case is computed by hand below; the end-to-end test runs the generator's CSV
through the Spark ingest (one snapshot per placement phase) and fits the snapshots.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.csv as pcsv
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.errors import InputError
from streamsched.evaluation.cost_regression import Window, design, fit_costs
from streamsched.performance import HOP_SAME_WORKER, edge_hops
from streamsched.model.costs import REMOTE, CostModel, crossing_edges, parse_cost_model
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.pipeline.generate import generate_metrics
from streamsched.pipeline.store import write_snapshot

# Hand case: operator A (task 0) feeds operator B (tasks 1, 2) at 10 and 20 tuples/s. Under P1
# tasks 0 and 1 share a worker (edge 0->2 is remote), under P2 tasks 0 and 2 do (0->1 remote).
# Truth cA = 2, cB = 3, c_remote = 4 (CPU s per tuple). Per task: (processed tuples/s, remote
# tuples/s at its ends / 2) -> load = c_op * processed + c_remote * remote ends / 2:
#   P1: t0 (30, 20/2 = 10) -> 100   t1 (10, 0) -> 30          t2 (20, 20/2 = 10) -> 100
#   P2: t0 (30, 10/2 = 5)  -> 80    t1 (10, 10/2 = 5) -> 50   t2 (20, 0) -> 60
HAND_LOADS = {"P1": [100.0, 30.0, 100.0], "P2": [80.0, 50.0, 60.0]}
HAND_X = np.array([[30, 0, 10], [0, 10, 0], [0, 20, 10], [30, 0, 5], [0, 10, 5], [0, 20, 0]], float)


def _hand_graph(loads=(1.0, 1.0, 1.0)) -> TaskGraph:
    return TaskGraph.build(name="hand", operator_names=["A", "B"], task_operator=[0, 1, 1], load=list(loads),
                           src=np.array([0, 0]), dst=np.array([1, 2]), rate=[10.0, 20.0], load_unit="cores")


HAND_P1 = Placement.build([0, 0, 1], [0, 0, 0])   # t0, t1 on node 0's worker 0; t2 on node 1
HAND_P2 = Placement.build([0, 1, 0], [0, 0, 0])
HAND_TRUTH = CostModel({"A": 2.0, "B": 3.0}, remote_cpu_per_tuple=4.0)


def _hand_windows(e=(0.0,) * 6) -> list[Window]:
    y = np.array(HAND_LOADS["P1"] + HAND_LOADS["P2"]) + np.asarray(e)
    return [Window(_hand_graph(y[:3]), HAND_P1, "P1"), Window(_hand_graph(y[3:]), HAND_P2, "P2")]


def test_the_hand_case_loads_follow_the_model():
    graph = _hand_graph()
    assert HAND_TRUTH.loads(graph, HAND_P1, graph.rate).tolist() == HAND_LOADS["P1"]
    assert HAND_TRUTH.loads(graph, HAND_P2, graph.rate).tolist() == HAND_LOADS["P2"]
    names, x, y = design(_hand_windows())
    assert names == ("A", "B", REMOTE) and np.array_equal(x, HAND_X)
    assert y.tolist() == HAND_LOADS["P1"] + HAND_LOADS["P2"]


@pytest.mark.parametrize("weighting", ["uniform", "relative"])
def test_the_hand_case_without_noise_is_recovered_exactly(weighting):
    fit = fit_costs(_hand_windows(), weighting=weighting)
    assert np.allclose(fit.estimate, [2.0, 3.0, 4.0], rtol=1e-12)
    assert np.allclose(fit.std_error, 0.0, atol=1e-9) and fit.placements == 2 and fit.dof == 3


def test_the_hand_case_standard_errors_and_intervals():
    # Residuals e = (1, 1, 0, -1, -1, 0) are orthogonal to X's columns (A: 30 - 30; B: 10 - 10;
    # remote: 10 - 5 - 5), so least squares returns the truth exactly and s^2 = |e|^2 / (6 - 3)
    # = 4/3. By hand X'X = [[1800, 0, 450], [0, 1000, 250], [450, 250, 250]], det = 1800 *
    # (1000*250 - 250^2) - 450 * 1000 * 450 = 135e6, diagonal of the inverse (adjugate):
    # 187500/det = 1/720, 247500/det = 11/6000, 1800000/det = 1/75. So the standard errors are
    # sqrt(4/3 / 720) = sqrt(1/540), sqrt(4/3 * 11/6000) = sqrt(11/4500), sqrt(4/3 / 75) = 2/15,
    # and the 95 % intervals +- t(0.975, 3) = 3.18245 times them.
    e = np.array([1.0, 1.0, 0.0, -1.0, -1.0, 0.0])
    assert np.array_equal(HAND_X.T @ e, [0.0, 0.0, 0.0])
    fit = fit_costs(_hand_windows(e), weighting="uniform")
    assert np.allclose(fit.estimate, [2.0, 3.0, 4.0], rtol=1e-12)
    assert np.allclose(fit.std_error, [math.sqrt(1 / 540), math.sqrt(11 / 4500), 2 / 15], rtol=1e-9)
    low, high = fit.ci_low[2], fit.ci_high[2]
    assert low == pytest.approx(4 - 3.182446305 * 2 / 15) and high == pytest.approx(4 + 3.182446305 * 2 / 15)
    assert fit.value(REMOTE) == pytest.approx((4.0, low, high))


def test_one_placement_is_not_identifiable():
    same = [Window(w.graph, HAND_P1, w.label) for w in _hand_windows()]
    with pytest.raises(InputError, match=r"^all 2 windows share one placement .* at least two placements"):
        fit_costs(same)
    # the same grouping of tasks on other nodes and worker numbers is the same placement
    moved = Placement.build([3, 3, 5], [1, 1, 0])
    with pytest.raises(InputError, match="share one placement"):
        fit_costs([same[0], Window(same[1].graph, moved, "moved")])
    # a window where task 2 sent nothing (absent from its snapshot): tasks 0 and 1 still share a worker
    pair = TaskGraph.build(name="hand", operator_names=["A", "B"], task_operator=[0, 1], load=[30.0, 30.0],
                           src=np.array([0]), dst=np.array([1]), rate=[10.0], load_unit="cores")
    with pytest.raises(InputError, match="all 2 windows share one placement"):
        fit_costs([same[0], Window(pair, Placement.build([4, 4], [0, 0]), "pair")])
    assert fit_costs([same[0], Window(pair, Placement.build([4, 5], [0, 0]), "apart")]).placements == 2


def test_an_operator_without_tuples_cannot_be_estimated():
    idle = TaskGraph.build(name="hand", operator_names=["A", "B", "C"], task_operator=[0, 1, 1, 2],
                           load=[1.0] * 4, src=np.array([0, 0]), dst=np.array([1, 2]), rate=[10.0, 20.0])
    p1, p2 = Placement.build([0, 0, 1, 2], [0, 0, 0, 0]), Placement.build([0, 1, 0, 2], [0, 0, 0, 0])
    with pytest.raises(InputError, match="no window measures 'C'"):
        fit_costs([Window(idle, p1, "1"), Window(idle, p2, "2")])


def test_remote_edges_are_the_performance_models_serialised_edges():
    # M2 (performance.edge_hops): a tuple is (de)serialised when it leaves its worker; a task
    # without a worker is a process of its own
    graph = workloads.workload("wordcount")
    rng = np.random.default_rng(3)
    for workers in (None, rng.integers(0, 2, graph.n_tasks)):
        placement = Placement.build(rng.integers(0, 4, graph.n_tasks), workers)
        assert np.array_equal(crossing_edges(graph, placement), edge_hops(graph, placement) != HOP_SAME_WORKER)


def test_parse_cost_model():
    model = parse_cost_model(["20us", "spout=5us", "count=0.01ms"], "15us")
    assert model.cpu_per_tuple == {"spout": 5e-6, "count": 1e-5} and model.default == 2e-5
    assert model.remote_cpu_per_tuple == 15e-6
    assert parse_cost_model([], None) is None
    for specs, remote, message in ((["x=fast"], None, "--cpu-per-tuple x=fast"), (["1", "2"], None, "already"),
                                   (["=1"], None, "operator name missing"), ([], "1us", "give --cpu-per-tuple"),
                                   (["-1"], None, "not a CPU time"), (["1"], "inf", "--remote-cpu-per-tuple")):
        with pytest.raises(InputError, match=message):
            parse_cost_model(specs, remote)
    with pytest.raises(InputError, match="no cost for operator 'split'"):
        CostModel({"spout": 1.0, "count": 1.0}).operator_cost(workloads.workload("wordcount"))


# ------------------------------------------------------------------------------ the generator
def _csv(path):
    return pcsv.read_csv(path).to_pydict()


def test_generator_loads_follow_the_hand_case_per_phase(tmp_path):
    # noise 0: every interval's loads are the hand values of the placement of its phase
    summary = generate_metrics(_hand_graph(), tmp_path, rows=8, dirty=0.0, noise=0.0, placement=[HAND_P1, HAND_P2],
                               costs=HAND_TRUTH)
    loads = _csv(tmp_path / "load-00000.csv")
    assert summary["intervals"] == 4 and summary["load_unit"] == "cores"
    assert [p["window_s"] for p in summary["phases"]] == [2.0, 2.0]
    assert summary["phases"][1]["first"] == summary["start"] + 2 and summary["phases"][1]["until"] == summary["end"]
    assert loads["load"] == HAND_LOADS["P1"] * 2 + HAND_LOADS["P2"] * 2
    assert summary["cost_model"]["remote_cpu_per_tuple_s"] == 4.0


def test_generator_keeps_declared_rates_and_rounds_without_bias(tmp_path):
    # rate 0.3 tuples/s with noise: counts are integers whose mean is 0.3 (rounding to nearest
    # would write 0 in every interval and lose the pair)
    graph = TaskGraph.build(name="slow", operator_names=["a", "b"], task_operator=[0, 1], load=[1.0, 1.0],
                            src=np.array([0]), dst=np.array([1]), rate=[0.3])
    summary = generate_metrics(graph, tmp_path, rows=4000, dirty=0.0, noise=0.1, seed=2)
    tuples = np.asarray(_csv(tmp_path / "traffic-00000.csv")["tuples"], float)
    assert summary["rate_scale"] == 1.0 and summary["expected_rate"]["tuples_per_s"] == [0.3]
    assert set(np.unique(tuples)) <= {0.0, 1.0} and abs(tuples.mean() - 0.3) < 4 * math.sqrt(0.3 * 0.7 / 4000)
    scaled = generate_metrics(graph, tmp_path / "x", rows=10, dirty=0.0, noise=0.0, rate_scale=100)
    assert scaled["expected_rate"]["tuples_per_s"] == [30.0]


def test_generator_noise_is_mean_one(tmp_path):
    graph = TaskGraph.build(name="one", operator_names=["a", "b"], task_operator=[0, 1], load=[2.0, 2.0],
                            src=np.array([0]), dst=np.array([1]), rate=[1000.0])
    generate_metrics(graph, tmp_path, rows=20000, dirty=0.0, noise=0.3, seed=1)
    loads = np.asarray(_csv(tmp_path / "load-00000.csv")["load"], float)
    tuples = np.asarray(_csv(tmp_path / "traffic-00000.csv")["tuples"], float)
    # exp(0.3 N) has mean exp(0.045) = 1.046; the generator's factors average 1 (+- 3 standard errors)
    assert abs(loads.mean() / 2.0 - 1) < 3 * 0.31 / math.sqrt(loads.size)
    assert abs(tuples.mean() / 1000.0 - 1) < 3 * 0.31 / math.sqrt(tuples.size)



def test_storm_log_latencies_follow_the_cost_model(tmp_path):
    # --format storm-log: each bolt's busy fraction (executed x latency / interval, as the Storm
    # reader computes it) is the cost model's load under the one placement; the hand case again
    from collections import defaultdict

    from streamsched.engines.storm.metrics_traffic import read_topology, topology_of

    summary = generate_metrics(_hand_graph(), tmp_path, rows=8, fmt="storm-log", dirty=0.0, placement=HAND_P1,
                               costs=HAND_TRUTH, cluster=workloads.cluster("homogeneous-10"))
    path = Path(summary["files"][0])
    _, estimate, _ = read_topology([(str(path), "storm-log")], topology_of(path, "storm-log", None),
                                   (946684800.0, 4102444800.0), summary["storm_interval_s"])
    samples = defaultdict(list)
    for _, task, _, load in estimate.load:
        samples[task].append(load)
    assert {t: float(np.mean(v)) for t, v in samples.items()} == pytest.approx({1: 30.0, 2: 100.0})
    with pytest.raises(InputError, match="--placement #2: 2 tasks, graph 'hand' has 3"):
        generate_metrics(_hand_graph(), tmp_path / "y", rows=8, placement=[HAND_P1, Placement.build([0, 1])])
    with pytest.raises(InputError, match="storm-log takes one placement"):
        generate_metrics(_hand_graph(), tmp_path / "x", rows=8, fmt="storm-log", placement=[HAND_P1, HAND_P2],
                         costs=HAND_TRUTH)


# ------------------------------------------------------------------------ coverage of the CIs
def test_intervals_cover_the_truth_at_their_level():
    # 400 histories of the generator's noise model (each window's load a mean of 60 samples with
    # relative noise 0.2): the 90 % intervals must hold the truth in about 90 % of them
    graph = workloads.workload("diamond-12")
    rng = np.random.default_rng(11)
    truth = CostModel({"source": 5e-6, "mid0": 20e-6, "mid1": 8e-6, "sink": 12e-6}, remote_cpu_per_tuple=15e-6)
    placements = [Placement.build(rng.integers(0, 4, graph.n_tasks), np.zeros(graph.n_tasks)) for _ in range(3)]
    rates = [graph.rate * 100 * np.exp(0.3 * rng.standard_normal(graph.n_edges)) for _ in placements]
    covered = np.zeros(5)
    runs = 400
    for _ in range(runs):
        windows = []
        for k, (p, r) in enumerate(zip(placements, rates)):
            g = TaskGraph.build(name="d", operator_names=graph.operator_names, task_operator=graph.task_operator,
                                load=np.ones(graph.n_tasks), src=graph.src, dst=graph.dst, rate=r)
            noise = np.exp(0.2 * rng.standard_normal((60, graph.n_tasks)) - 0.02).mean(axis=0)
            windows.append(Window(TaskGraph.build(name="d", operator_names=graph.operator_names,
                                                  task_operator=graph.task_operator, src=graph.src, dst=graph.dst,
                                                  rate=r, load=truth.loads(g, p, r) * noise), p, str(k)))
        fit = fit_costs(windows, confidence=0.9)
        true = np.array([truth.cpu_per_tuple[n] for n in fit.parameters[:-1]] + [truth.remote_cpu_per_tuple])
        covered += (fit.ci_low <= true) & (true <= fit.ci_high)
    # binomial(400, 0.9): 3 standard deviations = 0.045
    assert np.all(np.abs(covered / runs - 0.9) < 0.045), covered / runs


# ------------------------------------------------------------------------------------ the CLI
def _store_of_hand_case(tmp_path, placements):
    cluster = workloads.cluster("homogeneous-10")
    files = []
    for k, (p, loads) in enumerate(zip(placements, (HAND_LOADS["P1"], HAND_LOADS["P2"]))):
        write_snapshot(tmp_path / "store", _hand_graph(loads), {"window": {"end": 1_700_000_000 + k}})
        files.append(tmp_path / f"p{k}.json")
        p.write(files[-1], _hand_graph(), cluster)
    return files, cluster.name


def test_cli_fit_costs_table_and_json(tmp_path, capsys):
    (p1, p2), cluster = _store_of_hand_case(tmp_path, [HAND_P1, HAND_P2])
    store = str(tmp_path / "store")
    assert main(["fit-costs", store, "--placement", str(p1), "--placement", str(p2), "-c", cluster]) == 0
    table = capsys.readouterr().out
    assert "2 windows (2 placements, 6 task observations)" in table
    assert "remote tuple" in table and "4,000,000" in table   # 4 s per tuple, printed in µs
    assert main(["fit-costs", store, "--placement", str(p1), "--placement", str(p2), "-c", cluster,
                 "--json", "--weighting", "uniform"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in fit["parameters"]] == ["A", "B", REMOTE]
    assert [p["estimate_s"] for p in fit["parameters"]] == pytest.approx([2.0, 3.0, 4.0])
    assert fit["distinct_placements"] == 2 and fit["load_unit"] == "cores"
    # snapshot directories named one by one, in the order of the placements: the same fit
    first, second = sorted((tmp_path / "store" / "snapshots" / "hand").iterdir())
    assert main(["fit-costs", str(second), str(first), "--placement", str(p2), "--placement", str(p1),
                 "-c", cluster, "--json", "--weighting", "uniform"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [p["estimate_s"] for p in again["parameters"]] == pytest.approx([2.0, 3.0, 4.0])
    assert again["windows"] == [f"{second} <- {p2}", f"{first} <- {p1}"]


def test_cli_one_placement_and_bad_pairing_are_one_line_exit_2(tmp_path, capsys):
    (p1, _), cluster = _store_of_hand_case(tmp_path, [HAND_P1, HAND_P2])
    store = str(tmp_path / "store")
    assert main(["fit-costs", store, "--placement", str(p1), "--placement", str(p1), "-c", cluster]) == 2
    assert main(["fit-costs", store, "--placement", str(p1), "-c", cluster]) == 2
    assert main(["fit-costs", str(tmp_path), "--placement", str(p1), "-c", cluster]) == 2
    assert main(["fit-costs", store, "--placement", str(p1), "--placement", str(p1), "-c", cluster,
                 "--weighting", "huber"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4 and all(line.startswith("error:") for line in errors)
    assert "all 2 windows share one placement" in errors[0]
    assert "2 snapshots but 1 --placement files" in errors[1]
    assert "neither a snapshot" in errors[2] and "--weighting" in errors[3]


def test_cli_gen_metrics_keeps_declared_rates_unless_scaled(tmp_path, capsys):
    for args, factor in (([], 1.0), (["--rate-scale", "100"], 100.0)):
        out = tmp_path / f"m{factor:g}"
        assert main(["gen-metrics", "-w", "wordcount", "--out", str(out), "--rows", "136", *args]) == 0
        expected = json.loads((out / "_generator.json").read_text())["expected_rate"]["tuples_per_s"]
        assert expected == (workloads.workload("wordcount").rate * factor).tolist()
    capsys.readouterr()


# ------------------------------------------------------- generator -> Spark ingest -> the fit
@pytest.mark.spark
def test_the_fit_recovers_the_generators_cost_model_through_the_pipeline(spark, tmp_path):
    # diamond-12 (4 operators), 3 placements with 2 workers per node, 80 one-second intervals per
    # phase, noise 0.1, skew 0.3, 1 % dirty rows; one ingest per phase (--window 80 --until the
    # phase's last second, loads in cores). Tolerance: every estimate within 3 % of the truth,
    # and the truth inside its 95 % interval.
    from streamsched.pipeline.ingest import Window as IngestWindow, ingest
    from streamsched.pipeline.sources import Options
    from streamsched.pipeline.store import load_snapshot

    graph = workloads.workload("diamond-12")
    rng = np.random.default_rng(5)
    placements = [Placement.build(rng.integers(0, 3, graph.n_tasks), rng.integers(0, 2, graph.n_tasks))
                  for _ in range(3)]
    truth = CostModel({"source": 5e-6, "mid0": 20e-6, "mid1": 8e-6, "sink": 12e-6}, remote_cpu_per_tuple=15e-6)
    summary = generate_metrics(graph, tmp_path / "m", rows=3 * 80 * graph.n_edges, noise=0.1, skew=0.3, dirty=0.01,
                               rate_scale=100, seed=9, placement=placements, costs=truth)
    windows = []
    for phase, placement in zip(summary["phases"], placements):
        report = ingest(spark, [tmp_path / "m"], tmp_path / "store",
                        IngestWindow(seconds=phase["window_s"], end=phase["until"]), Options(load_unit="cores"))
        assert report["rows_read"] == report["rows_accepted"] + sum(report["rows_quarantined"].values())
        windows.append(Window(load_snapshot(report["snapshots"][0]), placement, str(phase["placement"])))
    fit = fit_costs(windows)
    true = np.array([truth.cpu_per_tuple[n] for n in fit.parameters[:-1]] + [truth.remote_cpu_per_tuple])
    assert fit.parameters[-1] == REMOTE and fit.load_unit == "cores"
    assert np.all(np.abs(fit.estimate / true - 1) < 0.03), dict(zip(fit.parameters, fit.estimate / true))
    assert np.all((fit.ci_low <= true) & (true <= fit.ci_high)), list(zip(fit.ci_low, true, fit.ci_high))
