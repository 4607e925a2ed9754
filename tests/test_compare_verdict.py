"""``compare`` ranks and explains (issue 17, item 3): rows sorted by inter-node traffic
(i-scheduler.txt eq. 3) with the best marked, and a verdict against Storm's ``even``: the
reduction in traffic and the change in predicted throughput (docs/evaluation.md M1-M4), or
"placement hardly matters" when every prediction lies within the model's error."""

from __future__ import annotations

import math

import json
from html import escape as html_escape

import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.evaluation.comparison import Outcome, add_prediction, placement_row, rank, rank_outcomes, run_schedulers
from streamsched.workloads import cluster as build_cluster, workload as build_graph
from streamsched import performance
from streamsched.performance import ModelParams, predict, regime
from streamsched.evaluation.verdict import PRESET, fmt, model_error, time_class, verdict
from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph


def test_rows_are_ranked_by_traffic_then_throughput_with_failures_last():
    rows = [
        {"scheduler": "skipped-one", "status": "skipped", "reason": "no edge nodes"},
        {"scheduler": "even", "status": "ok", "valid": True, "inter_node_traffic": 900.5, "throughput_tps": 10.0},
        {"scheduler": "crashed", "status": "error", "valid": False, "error": "RuntimeError: boom"},
        {"scheduler": "fast-tie", "status": "ok", "valid": True, "inter_node_traffic": 120.25, "throughput_tps": 30.0},
        {"scheduler": "slow-tie", "status": "ok", "valid": True, "inter_node_traffic": 120.25, "throughput_tps": 20.0},
        {"scheduler": "overfull", "status": "invalid", "valid": False, "inter_node_traffic": 0.0},
        {"scheduler": "refused", "status": "infeasible", "valid": False, "error": "too small"},
        {"scheduler": "metis", "status": "ok", "valid": True, "inter_node_traffic": 400.0},
    ]
    ranked = rank(rows)
    assert [r["scheduler"] for r in ranked] == ["fast-tie", "slow-tie", "metis", "even", "overfull", "refused",
                                                "crashed", "skipped-one"]
    assert [r["rank"] for r in ranked] == [1, 2, 3, 4, None, None, None, None]
    assert [r["best"] for r in ranked] == [True] + [False] * 7  # an invalid placement of 0 traffic is not best


def _two_chains() -> tuple[TaskGraph, Cluster, dict[str, Placement]]:
    """a0 -> b0 and a1 -> b1, 100 tuples/s each, load 1 per task, on two 4-core 2.7 GHz nodes.
    ``colocate`` keeps each chain on a node (one worker each); ``even`` puts the a's on node 0
    and the b's on node 1, as Storm's round robin over operators does, so both edges cross."""
    graph = TaskGraph.build("two-chains", ["a", "b"], np.array([0, 0, 1, 1]), np.ones(4),
                            np.array([0, 1]), np.array([2, 3]), np.array([100.0, 100.0]))
    cluster = Cluster("pair", (Node("n0", capacity=2.0, slots=1), Node("n1", capacity=2.0, slots=1)))
    placements = {"colocate": Placement.build([0, 1, 0, 1], [0, 0, 0, 0]),
                  "even": Placement.build([0, 0, 1, 1], [0, 0, 0, 0])}
    return graph, cluster, placements


#: One load unit = one 2.7 GHz core; 2.7e6 cycles to serialise a tuple (and as many to deserialise).
HAND_MODEL = ModelParams(cycles_per_load_unit=2.7e9, serialize_cycles_per_tuple=2.7e6, serialize_cycles_per_byte=0.0)


def test_verdict_numbers_by_hand_on_two_chains():
    """By hand (M1, M2, M4): colocated, each executor needs 2.7e9 cycles/s of its 2.7 GHz core,
    so the rate scale is 1 and throughput 200 tuples/s. Crossing, every task also (de)serialises
    100 tuples/s x 2.7e6 cycles: 2.97e9 cycles/s, scale 2.7/2.97 = 10/11, throughput 2000/11.
    Nodes (4 cores: scale >= 1.8) and NICs (10 kB/s) never bind. Gain: 200 / (2000/11) = +10 %."""
    graph, cluster, placements = _two_chains()
    outcomes = [Outcome(add_prediction(placement_row(name, graph, cluster, p), graph, cluster, p, HAND_MODEL), p)
                for name, p in placements.items()]
    rows = [o.row for o in rank_outcomes(outcomes)]
    assert [r["scheduler"] for r in rows] == ["colocate", "even"] and rows[0]["best"]
    result = verdict(rows, error=0.05, preset="hand", error_source="test")
    assert result["best"] == "colocate"
    assert result["inter_node_traffic"] == {"best": 0.0, "even": 200.0, "reduction_pct": 100.0}
    assert result["throughput_tps"]["best"] == pytest.approx(200.0)
    assert result["throughput_tps"]["even"] == pytest.approx(2000.0 / 11.0)
    assert result["throughput_tps"]["change_pct"] == pytest.approx(10.0)
    assert result["placement_matters"] is True and result["throughput_spread_pct"] == pytest.approx(10.0)
    assert result["text"].startswith("verdict: use colocate: inter-node traffic 0 tuples/s against even's 200 (-100.0 %)")
    assert "predicted throughput 200 against 182 tuples/s (+10.0 %" in result["text"]
    # the same +10 % inside a 20 % model error claims nothing
    cautious = verdict(rows, error=0.20, preset="hand", error_source="test")
    assert cautious["placement_matters"] is False and "placement hardly matters here" in cautious["text"]


def test_a_placement_that_cuts_traffic_but_packs_one_node_is_predicted_slower():
    """The two chains on two 2-core nodes of capacity 4. ``packed`` puts all four tasks on n0:
    no traffic, but 4 x 2.7e9 cycles/s on 5.4e9 of supply, scale 0.5, throughput 100. ``even``
    (crossing, two tasks a node) is limited at scale 2.7/2.97 (thread and node alike): 2000/11.
    The verdict says so: 100 / (2000/11) - 1 = -45 %, packed's bottleneck the CPU of n0."""
    graph, _, placements = _two_chains()
    cluster = Cluster("pair", (Node("n0", capacity=4.0, slots=1, cores=2), Node("n1", capacity=4.0, slots=1, cores=2)))
    placements = {"packed": Placement.build([0, 0, 0, 0], [0, 0, 0, 0]), "even": placements["even"]}
    outcomes = [Outcome(add_prediction(placement_row(name, graph, cluster, p), graph, cluster, p, HAND_MODEL), p)
                for name, p in placements.items()]
    rows = [o.row for o in rank_outcomes(outcomes)]
    result = verdict(rows, error=0.05, preset="hand", error_source="test")
    assert result["best"] == "packed" and result["throughput_tps"]["best"] == pytest.approx(100.0)
    assert result["throughput_tps"]["change_pct"] == pytest.approx(-45.0)
    assert result["text"].startswith("verdict: packed cuts traffic but is predicted slower than even: ")
    assert "(-45.0 %" in result["text"] and "packed's bottleneck is cpu of n0 on 1 node, even's is" in result["text"]


def _hot_key_graph() -> TaskGraph:
    """A skewed fields grouping (wordcount's shape, measured-style figures): 4 spout tasks feed
    4 count tasks; one key takes 70 % of the tuples, so count[0] carries a load of 3.6 (of a
    4-core node's capacity 4) while the others carry 0.1-0.15. Tuples of 100 bytes."""
    n_spouts = 4
    src, dst, rate = [], [], []
    share = np.array([0.7, 0.11, 0.1, 0.09])
    for s in range(n_spouts):
        for c in range(4):
            src.append(s)
            dst.append(n_spouts + c)
            rate.append(1000.0 * share[c] * (1.0 + 0.03 * s))
    rate = np.array(rate)
    load = np.array([0.31, 0.29, 0.3, 0.32, 3.6, 0.15, 0.14, 0.1])
    return TaskGraph.build("hot-key", ["spout", "count"], np.repeat([0, 1], 4), load, np.array(src),
                           np.array(dst), rate, bytes_rate=rate * 100.0)


def test_a_hot_task_makes_placement_not_matter():
    """count[0]'s executor needs 3.6 x 5.4e8 = 1.94e9 of its core's 2.7e9 cycles/s (scale 1.39)
    wherever it runs, while its node (4 cores, at most 4 load units) allows scale >= 5: every
    placement is limited by that one thread, and the verdict says so instead of ranking noise."""
    graph = _hot_key_graph()
    cluster = Cluster("four", tuple(Node(f"n{i}", capacity=4.0, slots=2) for i in range(4)))
    outcomes = run_schedulers(graph, cluster, ["even", "metis", "t3", "ols", "r-storm", "i-scheduler"],
                              model=ModelParams())
    rows = [o.row for o in rank_outcomes(outcomes)]
    assert {r["bottleneck"] for r in rows} == {"executor of task count[0]"}
    result = verdict(rows, error=0.05, preset="default-params", error_source="test")
    assert result["placement_matters"] is False and result["throughput_spread_pct"] < 5
    assert "placement hardly matters here" in result["text"]
    assert "the bottleneck is task count[0]" in result["text"]
    assert result["best"] == rows[0]["scheduler"]


def test_the_demo_workload_gives_a_win_over_even_on_the_recommended_model():
    """``make demo``'s setup at library level: Fischer's Payload (fischer-metis-scheduler.txt
    IV-C: 10 fields-grouped chains of 8 tasks, 3 KB tuples) with measured-style noise (loads
    and rates +-2 %, as the Spark snapshot gives them) on 11 iMacs. Every placement uses every
    node, so the traffic-cutting placement pays no CPU price; the verdict on the ``default``
    preset must recommend a scheduler other than even that cuts most of even's traffic and is
    predicted faster by more than the preset's error."""
    exact = build_graph("fischer-payload-10")
    rng = np.random.default_rng(7)
    graph = TaskGraph.build(exact.name, exact.operator_names, exact.task_operator,
                            exact.load * rng.lognormal(0, 0.02, exact.n_tasks), exact.src, exact.dst,
                            exact.rate * rng.lognormal(0, 0.02, exact.n_edges), bytes_rate=exact.bytes_rate)
    cluster = build_cluster("fischer-11")
    names = ["even", "metis", "ols", "t3", "i-scheduler", "r-storm", "a3-storm", "gr-storm"]
    outcomes = run_schedulers(graph, cluster, names, model=regime(PRESET))
    rows = [o.row for o in rank_outcomes(outcomes)]
    error, source = model_error(PRESET)
    result = verdict(rows, error, PRESET, source)
    assert result["best"] != "even"
    assert result["inter_node_traffic"]["reduction_pct"] > 80
    assert result["throughput_tps"]["change_pct"] > 0
    assert result["throughput_tps"]["change_pct"] > 100 * error, result["text"]
    assert result["text"].startswith(f"verdict: use {result['best']}:")
    # not an artefact of one parameter set: the best placement is predicted faster than even's
    # on every fitted hardware set (Fischer's iMacs, the I-/T3-Scheduler VMs, the thesis lab)
    best = next(o.placement for o in outcomes if o.row["scheduler"] == result["best"])
    even = next(o.placement for o in outcomes if o.row["scheduler"] == "even")
    for name in performance.REGIMES:
        params = regime(name)
        assert predict(graph, cluster, best, params).throughput_tps > predict(graph, cluster, even, params).throughput_tps, name


def test_the_verdict_states_the_calibrated_error_of_the_default_set():
    """The "within the model's error" test uses the median held-out error that
    benchmarks/calibrate_model.py wrote for the set ``default`` names, not the fallback."""
    document = json.loads(performance.CALIBRATION_FILE.read_text())
    held = document["sets"][document["default"]]["held_out_error_pct"]
    error, source = model_error(PRESET)
    assert error == pytest.approx(held["median"] / 100.0) and document["default"] in source
    assert model_error("io-bound")[0] == error  # a section 6.1 setting of the default set has its error


def test_compare_model_names_the_fitted_set_of_predictions_and_verdict(tmp_path, capsys):
    """--model fischer-imac (Fischer's iMacs, as make demo uses on fischer-11): the rows'
    predictions are that set's (performance.predict with regime('fischer-imac')) and the verdict
    states that set's own held-out error, not the default set's."""
    graph, cluster = workloads.workload("payload"), build_cluster("fischer-11")
    (tmp_path / "c.json").write_text(json.dumps(cluster.to_dict()))  # as pipeline-demo writes it
    code = main(["compare", "-w", "payload", "-c", str(tmp_path / "c.json"), "--schedulers", "even,metis",
                 "--model", "fischer-imac", "--json"])
    document = json.loads(capsys.readouterr().out)
    held = performance.read_calibration()["sets"]["fischer-imac"]["held_out_error_pct"]["median"]
    assert code == 0 and document["verdict"]["model"] == "fischer-imac"
    assert document["verdict"]["model_error_pct"] == pytest.approx(held)
    printed = {row["scheduler"]: row["throughput_tps"] for row in document["results"]}
    for outcome in run_schedulers(graph, cluster, ["even", "metis"]):
        expected = predict(graph, cluster, outcome.placement, regime("fischer-imac")).throughput_tps
        assert printed[outcome.row["scheduler"]] == pytest.approx(expected)
        assert expected != pytest.approx(predict(graph, cluster, outcome.placement, regime(PRESET)).throughput_tps)
    assert main(["compare", "-w", "pageload", "-c", "homogeneous-10", "--model", "nosuch"]) == 2
    assert "unknown model parameter set 'nosuch'" in capsys.readouterr().err


def test_compare_json_carries_the_ranking_and_the_verdict(capsys):
    code = main(["compare", "-w", "pageload", "-c", "homogeneous-10", "--schedulers", "isolation,even,metis,t3",
                 "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    document = json.loads(out)
    rows = document["results"]
    traffic = [r["inter_node_traffic"] for r in rows if r.get("rank") is not None]
    assert traffic == sorted(traffic) and rows[-1]["scheduler"] == "isolation" and rows[-1]["rank"] is None
    assert [r["best"] for r in rows].count(True) == 1 and rows[0]["best"]
    assert document["verdict"]["best"] == rows[0]["scheduler"]
    assert document["verdict"]["model"] == PRESET and document["sort_key"].startswith("inter-node traffic")
    assert document["verdict"]["text"].startswith("verdict: ")


def test_the_report_heads_with_the_verdict_and_marks_the_best_row(tmp_path, capsys):
    report = tmp_path / "r.html"
    code = main(["compare", "-w", "pageload", "-c", "homogeneous-10", "--schedulers", "even,t3", "--report",
                 str(report)])
    capsys.readouterr()
    assert code == 0
    saved = json.loads(report.with_suffix(".json").read_text())
    page = report.read_text()
    assert saved["verdict"]["best"] == saved["results"][0]["scheduler"] and saved["results"][0]["best"]
    verdict_at = page.index("id='verdict'")
    said = saved["verdict"]["text"].removeprefix("verdict: ")
    assert html_escape(said) in page[verdict_at:] and verdict_at < page.index("id='results'")
    table = page[page.index("id='results'"):]
    assert table[:table.index("</table>")].count("<tr class='best'>") == 1


def test_compare_table_ends_with_the_verdict(capsys):
    code = main(["compare", "-w", "pageload", "-c", "homogeneous-10", "--schedulers", "even,metis,t3"])
    out, _ = capsys.readouterr()
    assert code == 0
    lines = [line for line in out.splitlines() if line.strip()]
    assert "1 best" in out and "e+0" not in out
    assert " ".join(lines[-3:]).count("verdict: ") == 1


@pytest.mark.parametrize("value, text", [(39160.4, "39,160"), (1234567.0, "1,234,567"), (181.818, "182"),
                                         (12.3456, "12.35"), (0.5, "0.5"), (0.00123, "0.00123"), (0.0, "0")])
def test_figures_print_with_separators_and_no_exponent(value, text):
    assert fmt(value) == text


def demo_rows(optimal_status: str, optimal_tps: float) -> list[dict]:
    """The rows `make demo` showed (issue 24): optimal cuts the least traffic, I-Scheduler is
    within 0.04 % of its predicted throughput in 0.09 s, even is the baseline."""
    rows = [
        dict(scheduler="optimal", inter_node_traffic=4962.18, throughput_tps=optimal_tps, status=optimal_status,
             bound=4962.18 if optimal_status == "optimal" else 0.0, gap=0.0 if optimal_status == "optimal" else 1.0,
             wall_time_s=9.6, bottleneck="cpu of imac1", nodes_used=11, valid=True),
        dict(scheduler="i-scheduler", inter_node_traffic=5978.42, throughput_tps=5978.0, status="ok", wall_time_s=0.09,
             bottleneck="cpu of imac1", nodes_used=11, valid=True),
        dict(scheduler="even", inter_node_traffic=14000.0, throughput_tps=3000.0, status="ok", wall_time_s=0.01,
             bottleneck="cpu of imac2", nodes_used=11, valid=True),
    ]
    return rank(rows)


def test_a_tie_goes_to_the_fastest_when_nothing_is_proven():
    """optimal unproven (bound 0, gap 100 %) and I-Scheduler predicted 0.04 % apart, inside the
    model's ±13 %: a tie, no proof, so the fastest (I-Scheduler, 0.09 s) is recommended, and
    nothing is called optimal."""
    result = verdict(demo_rows("feasible", 5980.4), error=0.13, error_source="hand")
    assert (result["best"], result["recommended"]) == ("optimal", "i-scheduler")
    assert result["tie"] == ["optimal", "i-scheduler"]
    assert result["proof"] == {"optimal": "not proven: bound 0, gap 100.0 %"}
    assert result["text"].startswith("verdict: use i-scheduler: inter-node traffic 5,978 tuples/s against even's")
    assert "Tie within the model's error (±13 %) with optimal: i-scheduler is recommended because none is " \
           "proven optimal, and it was the fastest (0.09 s)" in result["text"]
    assert "No optimality claimed for optimal (not proven: bound 0, gap 100.0 %)" in result["text"]
    assert result["text"].endswith("Baseline: even (Storm's default)") and result["baseline"] == "even"
    assert result["throughput_tps"]["best"] == 5978.0  # the figures are the recommended row's


def test_a_tie_between_schedulers_of_like_speed_does_not_depend_on_the_machines_load():
    """Wall times within one order of magnitude (0.02 s and 0.05 s, either way round, as a busy
    machine may swap them) leave the choice to traffic: the lower-traffic row, every time."""
    for fast, slow in ((0.02, 0.05), (0.05, 0.02)):
        rows = demo_rows("feasible", 5980.4)
        rows[0]["wall_time_s"], rows[1]["wall_time_s"] = fast, slow  # optimal (4,962), i-scheduler (5,978)
        result = verdict(rows, error=0.13, error_source="hand")
        assert result["recommended"] == "optimal"
        assert ("it was the fastest" in result["text"]) == (fast < slow)
    assert [time_class({"wall_time_s": t}) for t in (0.001, 0.01, 0.099, 0.1, 9.6, None)] == \
        [-2.0, -2.0, -2.0, -1.0, 0.0, math.inf]


def test_a_tie_goes_to_the_proven_placement():
    result = verdict(demo_rows("optimal", 5980.4), error=0.13, error_source="hand")
    assert (result["recommended"], result["tie"]) == ("optimal", ["optimal", "i-scheduler"])
    assert result["proof"] == {"optimal": "proven optimal"}
    assert result["text"].startswith("verdict: use optimal: inter-node traffic 4,962 tuples/s")
    assert "optimal is recommended because proven optimal" in result["text"]
    assert "No optimality claimed" not in result["text"]


def test_an_unproven_optimal_outside_the_error_is_used_but_not_called_optimal():
    """optimal predicted 50 % faster than I-Scheduler (beyond ±13 %): no tie, it is the one to
    use, on its predicted figures alone: its row says it is not proven."""
    result = verdict(demo_rows("feasible", 9000.0), error=0.13, error_source="hand")
    assert (result["recommended"], result["tie"]) == ("optimal", [])
    assert result["text"].startswith("verdict: use optimal:")
    assert "No optimality claimed for optimal (not proven: bound 0, gap 100.0 %)" in result["text"]
    assert "proven optimal" not in result["text"].replace("not proven", "")
