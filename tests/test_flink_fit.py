"""The throughput model fitted to Flink measurements (evaluation/flink_fit.py, F1-F2): exact
recovery of hand-chosen costs from windows built with them, the prediction against T1-T5
worked by hand, leave-one-placement-out, and one-line errors for bad measurement files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamsched.cli import main
from streamsched.evaluation import flink_fit
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph

#: source (2) -> calc (2) all-to-all, 100 records/s per pair, 1,000 bytes per record
SRC, DST = [0, 0, 1, 1], [2, 3, 2, 3]
COST = {"source": 2e-4, "calc": 1e-3}
NET, BASE = 5e-4, 0.05


def graph(scale: float = 1.0) -> TaskGraph:
    rate = np.full(4, 100.0 * scale)
    return TaskGraph.build("job", ["source", "calc"], [0, 0, 1, 1], [0.1] * 4, SRC, DST, rate, rate * 1000.0)


def cores(g: TaskGraph, tms: list[str]) -> dict[str, float]:
    """F1 written out per TaskManager, independently of the module."""
    out = {tm: BASE for tm in set(tms)}
    for t in range(g.n_tasks):
        op = g.operator_names[g.task_operator[t]]
        work = sum(g.rate[e] for e in range(4) if DST[e] == t) or sum(g.rate[e] for e in range(4) if SRC[e] == t)
        out[tms[t]] += COST[op] * work
    for e in range(4):
        if tms[SRC[e]] != tms[DST[e]]:
            out[tms[SRC[e]]] += NET * g.rate[e]
            out[tms[DST[e]]] += NET * g.rate[e]
    return out


PLACEMENTS = {"split": ["a", "b", "a", "b"], "sources-together": ["a", "a", "a", "b"], "apart": ["a", "a", "b", "b"],
              "one-calc-away": ["a", "a", "b", "a"]}


def windows() -> list[flink_fit.Window]:
    out = []
    for k, (name, tms) in enumerate(PLACEMENTS.items()):
        for scale in (1.0, 1.5):
            g = graph(scale * (1 + 0.1 * k))
            cut = sum(g.bytes_rate[e] for e in range(4) if tms[SRC[e]] != tms[DST[e]] and tms[DST[e]] == "b")
            links = {"a": {"in": 0.0, "out": 0.0}, "b": {"in": cut / 0.9 if cut else 0.0, "out": 10.0}}
            out.append(flink_fit.Window(name, g, tuple(tms), 200.0 * scale, cores(g, tms), links))
    return out


def test_f1_recovers_hand_chosen_costs_exactly():
    model = flink_fit.fit(windows())
    assert model.operator_cpu == pytest.approx(COST, rel=1e-6)
    assert model.net_cpu_per_record == pytest.approx(NET, rel=1e-6)
    assert model.base_cores == pytest.approx(BASE, rel=1e-6)
    assert model.link_efficiency == pytest.approx(0.9)
    assert model.residual_rel < 1e-9 and model.placements == 4


def test_f2_is_the_largest_payload_over_a_link_capacity():
    """'apart' at scale 1.5 x 1.2 (k = 2): 4 pairs x 180 records/s x 1,000 B = 720,000 B/s out of
    a and into b, the most any window sends over a link; capacities 1e6 B/s: eta = 0.72. Without
    capacities, F2 falls back to payload / wire at the busiest direction (0.9 as built)."""
    cluster = Cluster.from_dict({"name": "lab", "nodes": [{"name": "a", "capacity": 1.0, "net_in": 1e6, "net_out": 1e6},
                                                          {"name": "b", "capacity": 1.0, "net_in": 1e6, "net_out": 1e6}]})
    assert flink_fit.fit(windows(), cluster).link_efficiency == pytest.approx(0.72)
    assert flink_fit.fit(windows()).link_efficiency == pytest.approx(0.9)


def test_prediction_is_t1_t5_by_hand():
    """'apart' (sources on a, calcs on b) from a reading whose sources send 400 records/s: every
    record crosses. CPU a: 400 x 2e-4 + 400 x 5e-4 = 0.28 of (1 - 0.05) = 0.295; b: 400 x 1e-3 +
    400 x 5e-4 = 0.6 of 0.95 = 0.632; link a->b: 400 x 1000 B over 0.9 x 1e6 B/s = 0.444.
    U = 0.632 (b's CPU): 400 / 0.632 = 633 records/s."""
    model = flink_fit.FlinkFit(dict(COST), NET, BASE, 0.9, 1, 1, 0.0)
    cluster = Cluster.from_dict({"name": "lab", "nodes": [{"name": "a", "capacity": 1.0, "net_in": 1e6, "net_out": 1e6},
                                                          {"name": "b", "capacity": 1.0, "net_in": 1e6, "net_out": 1e6}]})
    reading = flink_fit.Window("split", graph(), ("a", "b", "a", "b"), 200.0, {})
    got = flink_fit.predict(model, reading, cluster, ["a", "a", "b", "b"])
    assert got.throughput == pytest.approx(400 / (0.6 / 0.95))
    assert (got.bottleneck_node, got.bottleneck_resource) == ("b", "cpu")
    slow = flink_fit.FlinkFit(dict(COST), NET, BASE, 0.3, 1, 1, 0.0)  # links at 30 %: the link binds
    assert flink_fit.predict(slow, reading, cluster, ["a", "a", "b", "b"]).throughput == pytest.approx(400 / (4e5 / 3e5))
    together = flink_fit.predict(model, reading, cluster, ["a", "a", "a", "a"])  # all on a: no remote record
    assert together.throughput == pytest.approx(400 / ((400 * 2e-4 + 400 * 1e-3) / 0.95))


def test_leave_one_placement_out_predicts_each_from_the_reference():
    cluster = Cluster.from_dict({"name": "lab", "nodes": [{"name": "a", "capacity": 1.0, "net_in": 1e6, "net_out": 1e6},
                                                          {"name": "b", "capacity": 1.0, "net_in": 1e6, "net_out": 1e6}]})
    held = flink_fit.held_out(windows(), cluster, "split")
    assert {h["placement"] for h in held} == set(PLACEMENTS)
    assert all(h["from"] == "split" for h in held if h["placement"] != "split")
    ref = [w for w in windows() if w.placement == "split"][-1]
    for h in held:  # each predicted by a fit on the other placements' windows alone, from 'split'
        if h["placement"] != "split":
            rest = [w for w in windows() if w.placement != h["placement"]]
            model = flink_fit.fit(rest, cluster)
            want = flink_fit.predict(model, ref, cluster, PLACEMENTS[h["placement"]]).throughput
            assert h["predicted"] == pytest.approx(want, rel=1e-6)


def test_prior_fits_the_references_submissions_alone_and_recovers_the_costs_from_them():
    """Three submissions of the reference (split, sources-together, apart: enough to identify
    base, both operators and the remote record) and one plan whose CPU readings are off: the
    prior fit recovers COST from the submissions alone, so it predicts the plan as the true
    costs do, its error against the plan's measured median; the submissions get no prior."""
    cluster = Cluster.from_dict({"name": "lab", "nodes": [{"name": "a", "capacity": 1.0, "net_in": 1e9, "net_out": 1e9},
                                                          {"name": "b", "capacity": 1.0, "net_in": 1e9, "net_out": 1e9}]})
    names = {"split": "flink-default#1", "sources-together": "flink-default#2", "apart": "flink-default#3",
             "one-calc-away": "plan"}
    # the plan's CPU readings off by 30 %: a fit that used them would not recover the costs
    got = [flink_fit.Window(names[w.placement], w.graph, w.taskmanagers, w.throughput,
                            {tm: c * (1.3 if w.placement == "one-calc-away" else 1.0) for tm, c in w.cpu.items()},
                            w.links) for w in windows()]
    defaults = [w for w in got if w.placement != "plan"]
    assert flink_fit.fit(defaults, cluster).operator_cpu == pytest.approx(COST, rel=1e-6)
    held = {h["placement"]: h for h in flink_fit.held_out(got, cluster, "flink-default")}
    assert all(held[p]["prior"] is None and held[p]["prior_error"] is None for p in names.values() if p != "plan")
    ref = [w for w in got if w.placement == "flink-default#3"][-1]
    truth = flink_fit.predict(flink_fit.fit(windows(), cluster), ref, cluster, PLACEMENTS["one-calc-away"]).throughput
    assert held["plan"]["prior"] == pytest.approx(truth, rel=1e-6)
    # CPU binds (links of 1 GB/s): a fit that used the plan's readings predicts it otherwise
    assert flink_fit.predict(flink_fit.fit(got, cluster), ref, cluster, PLACEMENTS["one-calc-away"]).throughput \
        != pytest.approx(truth, rel=1e-3)
    measured = float(np.median([w.throughput for w in got if w.placement == "plan"]))
    assert measured == pytest.approx((200.0 + 300.0) / 2)
    assert held["plan"]["prior_error"] == pytest.approx(abs(truth - measured) / measured, rel=1e-9)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("cells"), "list 'cells'"),
    (lambda d: d["cells"][0]["placements"]["p"][0]["windows"][0].pop("cpu_cores"), "cpu_cores"),
    (lambda d: d["cells"][0]["placements"]["p"][0]["windows"][0].update(taskmanagers=["a"]), "taskmanagers"),
    (lambda d: d["cells"][0].update(cluster={"nodes": []}), "cluster"),
])
def test_bad_measurement_files_are_one_line(tmp_path, capsys, mutate, message):
    g = graph()
    row = {"graph": {"name": "job", "operators": ["source", "calc"], "task_operator": [0, 0, 1, 1],
                     "load": [0.1] * 4, "src": SRC, "dst": DST, "rate": g.rate.tolist(), "bytes_rate": g.bytes_rate.tolist()},
           "taskmanagers": ["a", "b", "a", "b"], "source_records_per_s": 200.0, "cpu_cores": {"a": 0.3, "b": 0.3},
           "remote_bytes_per_s": 1.0}
    data = {"cells": [{"cell": "c", "cluster": {"name": "lab", "nodes": [{"name": "a", "capacity": 1.0},
                                                                         {"name": "b", "capacity": 1.0}]},
                       "placements": {"p": [{"windows": [row]}]}}]}
    mutate(data)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message):
        flink_fit.read_measurements(json.loads(path.read_text()), str(path))
    assert main(["fit-flink", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "m.json" in err


def test_cpu_loads_share_each_taskmanagers_cpu_by_busy_time():
    """Busy loads 0.1 each; a measured 0.5 cores on a (tasks 0, 2) and 0.1 on b (tasks 1, 3):
    0.25 each on a, 0.05 each on b; a TaskManager without a reading keeps its loads."""
    got = flink_fit.cpu_loads(graph(), ["a", "b", "a", "b"], {"a": 0.5, "b": 0.1})
    np.testing.assert_allclose(got.load, [0.25, 0.05, 0.25, 0.05])
    kept = flink_fit.cpu_loads(graph(), ["a", "b", "a", "b"], {"a": 0.5})
    np.testing.assert_allclose(kept.load, [0.25, 0.1, 0.25, 0.1])
    np.testing.assert_array_equal(got.rate, graph().rate)


def test_cpu_loads_keep_the_contention_profile():
    from streamsched.model.contention import profile_from_graph, with_profile

    g = graph()
    profiled = with_profile(g, profile_from_graph(g), "job")
    assert flink_fit.cpu_loads(profiled, ["a", "b", "a", "b"], {"a": 0.5}).contention is profiled.contention


def test_several_submissions_are_placements_of_their_own_and_the_last_is_the_reference():
    def row(tms, rate):
        g = graph()
        return {"graph": {"name": "job", "operators": ["source", "calc"], "task_operator": [0, 0, 1, 1],
                          "load": [0.1] * 4, "src": SRC, "dst": DST, "rate": g.rate.tolist(),
                          "bytes_rate": g.bytes_rate.tolist()},
                "taskmanagers": tms, "source_records_per_s": rate, "cpu_cores": cores(g, tms)}

    cell = {"cell": "c", "cluster": {"name": "lab", "nodes": [{"name": "a", "capacity": 1.0}, {"name": "b", "capacity": 1.0}]},
            "placements": {"flink-default": [{"windows": [row(PLACEMENTS["split"], 300.0)]},
                                             {"windows": [row(PLACEMENTS["apart"], 200.0)]}],
                           "plan": [{"windows": [row(PLACEMENTS["one-calc-away"], 250.0)]}]}}
    (name, cluster, got), = flink_fit.read_measurements({"cells": [cell]}, "m.json")
    assert [w.placement for w in got] == ["flink-default#1", "flink-default#2", "plan"]
    held = {h["placement"]: h for h in flink_fit.held_out(got, cluster, "flink-default")}
    assert held["plan"]["from"] == "flink-default#2" and held["plan"]["unchanged_error"] == pytest.approx(50 / 250)
