"""streamsched's placement plugin and ``apply flink`` on the session's real Flink 2.3 (two
TaskManagers ``tm-1``, ``tm-2`` x 2 slots, adaptive scheduler, plugin on the JobManager's class
path: tests/conftest.py ``flink_cluster``), running the example job (datagen(2) -REBALANCE->
Calc(3) -HASH-> GroupAggregate->blackhole(3), 500-character records).

Checked against Flink itself: every subtask's TaskManager from ``/jobs/:jid/vertices/:vid``, the
TaskManagers' own slot accounting, the job's state and record counters, and Flink's
``numBytesInRemote`` against streamsched's traffic model of the planned placement. About 2 min.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
import urllib.request
import zipfile
from collections import Counter

import numpy as np
import pytest

from streamsched import metrics
from streamsched.cli import main
from streamsched.engines import flink
from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink import local, plugin
from streamsched.model import Placement

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("javac") is None, reason="a JDK (javac) is needed for the Flink plugin"),
]

SOURCE, CALC, AGG = r"Source: events", r"Calc", r"GroupAggregate"
#: The plan of the apply test: differs from Flink's default (which groups subtask i of every
#: vertex in one slot and so runs 3 slots) and needs 2 slots on each TaskManager, one more than
#: the job holds.
PLAN = {SOURCE: ["tm-1", "tm-2"], CALC: ["tm-1", "tm-1", "tm-2"], AGG: ["tm-1", "tm-2", "tm-2"]}


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _where(url: str, job_id: str) -> dict[str, list[str]]:
    """Vertex name -> the TaskManager of each subtask, straight from Flink's REST API."""
    out = {}
    for v in _get(f"{url}/jobs/{job_id}")["vertices"]:
        subs = sorted(_get(f"{url}/jobs/{job_id}/vertices/{v['id']}")["subtasks"], key=lambda s: s["subtask"])
        out[v["name"]] = [s["taskmanager-id"] for s in subs]
    return out


def _by_prefix(where: dict[str, list[str]], prefix: str) -> list[str]:
    (name,) = [n for n in where if n.startswith(prefix)]
    return where[name]


def _assert_flink_default(url: str, job_id: str) -> None:
    """Flink 2.3's default assignment (DefaultSlotSharingResolver): subtask i of every vertex in
    one slot, so one TaskManager per subtask index, and as many of the job's slots in use as the
    largest parallelism, holding 3, 3 and 2 subtasks (the TaskManagers' own accounting)."""
    where = _where(url, job_id)
    for i in range(3):
        assert len({tms[i] for tms in where.values() if i < len(tms)}) == 1, where
    assert sorted(_slot_loads(url, job_id).values()) == [2, 3, 3]


def _slot_loads(url: str, job_id: str, timeout: float = 15.0) -> dict[tuple[str, int], int]:
    """(TaskManager, k-th allocated slot) -> subtasks in it, for the job's slots in use, from the
    TaskManagers' own accounting (polled: the JobManager caches TaskManager details)."""
    deadline = time.time() + timeout
    while True:
        loads = {(tm["id"], k): slot["assignedTasks"]
                 for tm in _get(f"{url}/taskmanagers")["taskmanagers"]
                 for k, slot in enumerate(_get(f"{url}/taskmanagers/{tm['id']}")["allocatedSlots"])
                 if slot.get("jobId") == job_id and slot.get("assignedTasks", 0) > 0}
        if sum(loads.values()) == 8 or time.time() > deadline:
            return loads
        time.sleep(0.5)


@pytest.fixture(scope="module")
def example_job(flink_cluster):
    """The example job, flowing; cancelled (its slots returned) when the module ends."""
    job_id = local.submit_example(flink_cluster.url, flink_cluster.logs, rate=2000, record_bytes=500)
    local.wait_flowing(flink_cluster.url, job_id)
    try:
        yield job_id
    finally:
        request = urllib.request.Request(f"{flink_cluster.url}/jobs/{job_id}?mode=cancel", method="PATCH")
        urllib.request.urlopen(request, timeout=10).close()
        deadline = time.time() + 30
        while time.time() < deadline and _get(f"{flink_cluster.url}/overview")["slots-available"] < 4:
            time.sleep(0.5)


def test_plugin_jar_holds_our_assigner_built_for_the_wheels_flink():
    jar = plugin.build()
    names = zipfile.ZipFile(jar).namelist()
    assert "org/apache/flink/runtime/scheduler/adaptive/allocator/DefaultSlotAssigner.class" in names
    assert "streamsched/flink/PlanPlacer.class" in names
    assert plugin.flink_version(plugin.flink_home()).startswith(plugin.FLINK_SERIES + ".")


def test_without_a_plan_the_plugin_assigns_as_flink_does(flink_cluster, example_job):
    location, first = flink_apply.plugin_location(flink_apply.FlinkRest(flink_cluster.url))
    assert first and location == str(flink_cluster.plans)  # the plugin is what the JobManager loaded
    status = json.loads((flink_cluster.plans / f"{example_job}.status.json").read_text())
    assert status["applied"] is False and status["reason"].startswith("no plan for job")
    _assert_flink_default(flink_cluster.url, example_job)


def test_the_plugin_refuses_a_plan_breaking_the_slot_rule_and_falls_back(flink_cluster, example_job):
    """Plans written straight where the plugin reads them (no ``apply`` checks), then the job
    re-planned by two rescales: the plugin logs why, Flink's default placement runs."""
    rest = flink_apply.FlinkRest(flink_cluster.url)
    view = flink_apply.job_view(rest, example_job)
    ids = {p: next(v["id"] for v in view.vertices if v["name"].startswith(p)) for p in PLAN}
    parallelism = {v["id"]: v["parallelism"] for v in view.vertices}
    cases = [  # three aggregate subtasks on tm-1, which has 2 slots: two would share a slot
        ({**PLAN, AGG: ["tm-1", "tm-1", "tm-1"]}, "TaskManager tm-1 needs 3 slots"),
        ({**PLAN, CALC: ["tm-1", "tm-2"]}, "runs 3 subtasks, the plan places 2"),  # a subtask missing
    ]
    for plan, reason in cases:
        doc = {"format": flink_apply.PLAN_FORMAT, "job_id": example_job, "job_name": view.name,
               "vertices": {ids[p]: {"taskmanagers": tms} for p, tms in plan.items()}}
        (flink_cluster.plans / f"{example_job}.json").write_text(json.dumps(doc))
        source = ids[SOURCE]
        flink_apply.rescale(rest, example_job, {**parallelism, source: 1}, 120)
        flink_apply.rescale(rest, example_job, parallelism, 120)
        status = json.loads((flink_cluster.plans / f"{example_job}.status.json").read_text())
        assert status["applied"] is False and reason in status["reason"], status
        assert _get(f"{flink_cluster.url}/jobs/{example_job}")["state"] == "RUNNING"
        _assert_flink_default(flink_cluster.url, example_job)
    (flink_cluster.plans / f"{example_job}.json").unlink()


def test_apply_reports_a_slot_rule_break_and_a_foreign_plan(flink_cluster, example_job, tmp_path, capsys):
    reading = flink.read(url=flink_cluster.url, job_id=example_job, window_s=0)
    nodes = [n.name for n in reading.cluster.nodes]
    node_of = np.array([nodes.index("tm-1")] * reading.graph.n_tasks)  # all 8 subtasks on tm-1 (2 slots)
    Placement.build(node_of).write(tmp_path / "crowded.json", reading.graph, reading.cluster)
    code = main(["apply", "flink", "--url", flink_cluster.url, "--job-id", example_job,
                 "--placement", str(tmp_path / "crowded.json"), "--window", "2"])
    err = capsys.readouterr().err
    # the two TaskManagers are identical: apply relabels the plan onto the one the job runs on more
    assert code == 2 and re.search(r"TaskManager tm-[12] would need 3 slots", err) and "slot rule" in err
    doc = json.loads((tmp_path / "crowded.json").read_text())
    doc["graph"] = "another-job"
    (tmp_path / "foreign.json").write_text(json.dumps(doc))
    code = main(["apply", "flink", "--url", flink_cluster.url, "--job-id", example_job,
                 "--placement", str(tmp_path / "foreign.json"), "--window", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "a plan for another job" in err
    code = main(["apply", "flink", "--url", flink_cluster.url, "--job-id", "0" * 32,
                 "--placement", str(tmp_path / "crowded.json")])
    err = capsys.readouterr().err
    # one error line after the note on what a Flink user controls
    assert code == 2 and "Traceback" not in err and err.strip().splitlines()[0].startswith("Flink placement through")
    assert len(err.strip().splitlines()) == 2 and "not found" in err.strip().splitlines()[1]


def test_apply_places_every_subtask_and_remote_bytes_match_the_model(flink_cluster, example_job, tmp_path):
    url = flink_cluster.url
    before = _where(url, example_job)
    reading = flink.read(url=url, job_id=example_job, window_s=10)
    nodes = [n.name for n in reading.cluster.nodes]
    node_of = np.empty(reading.graph.n_tasks, int)
    for v in reading.report["vertices"]:
        (prefix,) = [p for p in PLAN if v["name"].startswith(p)]
        for i, tm in enumerate(PLAN[prefix]):
            node_of[v["first_task"] + i] = nodes.index(tm)
    placement = Placement.build(node_of)
    placement.write(tmp_path / "plan.json", reading.graph, reading.cluster)
    assert any(_by_prefix(before, p) != tms for p, tms in PLAN.items())  # differs from Flink's default

    result = flink_apply.apply(url, tmp_path / "plan.json", job_id=example_job, settle_s=2, window_s=4,
                               min_gain=-math.inf)  # applied whatever the prediction
    assert result.applied and result.plugin_status["applied"] is True
    # Flink runs every subtask where the plan says (its own vertex pages), with the same JobID;
    # the two identical TaskManagers may have been relabelled so that fewer subtasks move
    planned = {p: [result.relabelled.get(tm, tm) for tm in tms] for p, tms in PLAN.items()}
    after = _where(url, example_job)
    for prefix, tms in planned.items():
        assert _by_prefix(after, prefix) == tms
    moves = [sum(a != b for p in PLAN for a, b in zip(_by_prefix(before, p), plan[p]))
             for plan in (PLAN, {p: [{"tm-1": "tm-2", "tm-2": "tm-1"}[t] for t in tms] for p, tms in PLAN.items()})]
    assert len(result.moved) == min(moves)  # the fewer moves of the plan and its swap
    # ... on two slots of each TaskManager (the TaskManagers' own accounting)
    assert Counter(tm for tm, _slot in _slot_loads(url, example_job)) == {"tm-1": 2, "tm-2": 2}
    assert _get(f"{url}/jobs/{example_job}")["state"] == "RUNNING"
    # Flink's numBytesInRemote against streamsched's traffic model of the planned placement
    # (pair rates of the reading before the move, inter-TaskManager bytes of the plan). Both over
    # 10 s: a datagen subtask emits its rows of a second in one burst, so a window of W seconds
    # counts W +- 1 bursts, and two readings' rates can differ by up to 2 / (W - 1) = 22 % (one
    # run measured 11 %). The share of the bytes that crosses TaskManagers is free of that (both
    # counters of one window): 2 % (0.2 % measured).
    predicted = metrics.inter_node_traffic(reading.graph, placement, weight="bytes")  # swapping equal TMs keeps it
    measured = flink.read(url=url, job_id=example_job, window_s=10).report["measured_per_s"]
    assert measured["records_in"] > 1000  # records flow (the sources emit 2000/s, both exchanges carry them)
    assert predicted > 100_000 and measured["bytes_in_remote"] == pytest.approx(predicted, rel=0.22)
    share = measured["bytes_in_remote"] / measured["bytes_in"]
    assert share == pytest.approx(predicted / float(reading.graph.bytes_rate.sum()), rel=0.02)


def _plan_file(reading, where: dict[str, list[str]], path) -> None:
    """A placement file from vertex-name prefix -> TaskManager per subtask."""
    nodes = [n.name for n in reading.cluster.nodes]
    node_of = np.empty(reading.graph.n_tasks, int)
    for v in reading.report["vertices"]:
        (prefix,) = [p for p in where if v["name"].startswith(p)]
        for i, tm in enumerate(where[prefix]):
            node_of[v["first_task"] + i] = nodes.index(tm)
    Placement.build(node_of).write(path, reading.graph, reading.cluster)


def _attempts(url: str, job_id: str) -> list[int]:
    return [s["attempt"] for v in _get(f"{url}/jobs/{job_id}")["vertices"]
            for s in _get(f"{url}/jobs/{job_id}/vertices/{v['id']}")["subtasks"]]


def test_the_running_placement_with_the_taskmanagers_swapped_moves_nothing(flink_cluster, example_job, tmp_path,
                                                                           capsys):
    url = flink_cluster.url
    reading = flink.read(url=url, job_id=example_job, window_s=4)
    running = _where(url, example_job)
    swap = {"tm-1": "tm-2", "tm-2": "tm-1"}
    _plan_file(reading, {p: [swap[t] for t in _by_prefix(running, p)] for p in PLAN}, tmp_path / "swapped.json")
    attempts = _attempts(url, example_job)
    code = main(["apply", "flink", "--url", url, "--job-id", example_job, "--placement", str(tmp_path / "swapped.json"),
                 "--window", "4"])
    out = capsys.readouterr().out
    assert code == 0 and "job left alone: the plan is the running placement with identical TaskManagers swapped: " \
        "no subtask would move" in out, out
    assert "identical TaskManagers relabelled to move less: tm-1->tm-2, tm-2->tm-1" in out
    assert _where(url, example_job) == running and _attempts(url, example_job) == attempts  # untouched


def test_a_plan_below_the_threshold_is_not_applied(flink_cluster, example_job, tmp_path):
    """Flink's default runs subtask i of every vertex in one slot; moving one aggregate subtask
    (its input arrives by HASH from all Calc subtasks, so about as much crosses either way)
    changes the remote bytes by a few percent at most: below a 50 % threshold, left alone."""
    url = flink_cluster.url
    reading = flink.read(url=url, job_id=example_job, window_s=4)
    running = _where(url, example_job)
    plan = {p: list(_by_prefix(running, p)) for p in PLAN}
    agg = plan[AGG]
    # move the aggregate subtask whose TaskManager holds two of them to the other one
    (crowded,) = [tm for tm, n in Counter(agg).items() if n == 2]
    k = agg.index(crowded)
    agg[k] = {"tm-1": "tm-2", "tm-2": "tm-1"}[crowded]
    _plan_file(reading, plan, tmp_path / "plan.json")
    attempts = _attempts(url, example_job)
    result = flink_apply.apply(url, tmp_path / "plan.json", job_id=example_job, before=reading, min_gain=0.5)
    assert not result.applied and result.gain < 0.5 and len(result.moved) >= 1
    assert "below the threshold (50 %, --min-gain)" in result.reason
    predicted = metrics.inter_node_traffic(reading.graph, reading.placement, weight="bytes")
    assert result.reading["running_predicted_remote_bytes_per_s"] == pytest.approx(predicted)
    assert _where(url, example_job) == running and _attempts(url, example_job) == attempts


@pytest.fixture(scope="session")
def flink_three(tmp_path_factory):
    """A second local Flink for the slot tests: three TaskManagers x 2 slots (the example job
    needs 3 slots), idle slots returned after 3 s (``slot.idle.timeout``, Flink's default 50 s)."""
    if shutil.which("java") is None:
        pytest.skip("Java (JDK 17) is missing")
    plugin.build()
    base = tmp_path_factory.mktemp("flink3")
    cluster = local.start(base, taskmanagers=3, slots=2, rest_port=0, extra={"slot.idle.timeout": "3 s"})
    try:
        yield cluster
    finally:
        local.stop(base)


def test_apply_gets_slots_on_a_taskmanager_that_held_none(flink_three, tmp_path):
    """3 TaskManagers x 2 slots; Flink gives the example job (3 slots) slots on two of them. A
    plan using all three (one slot on each: subtask i of Calc with subtask i+1 of the aggregate)
    names the one holding none of the job's slots whatever the relabelling: applied, every
    subtask where planned, and the slots the plan leaves unused go back to the cluster."""
    url = flink_three.url
    job_id = local.submit_example(url, flink_three.logs, rate=2000, record_bytes=500)
    local.wait_flowing(url, job_id)
    rest = flink_apply.FlinkRest(url)
    held, _free = flink_apply.held_slots(rest, job_id)
    assert sum(held.values()) == 3 and min(held.values()) == 0, held  # Flink's ResourceManager fills TaskManagers
    a, b, c = sorted(held)
    plan = {SOURCE: [a, b], CALC: [a, b, c], AGG: [c, a, b]}
    reading = flink.read(url=url, job_id=job_id, window_s=4)
    _plan_file(reading, plan, tmp_path / "plan.json")
    result = flink_apply.apply(url, tmp_path / "plan.json", job_id=job_id, before=reading, min_gain=-math.inf,
                               settle_s=0, window_s=2)
    assert result.applied and result.rescales[0]["upper_bounds"] != result.rescales[1]["upper_bounds"]
    assert max(result.rescales[0]["upper_bounds"].values()) == 6  # every slot of the cluster
    planned = {p: [result.relabelled.get(tm, tm) for tm in tms] for p, tms in plan.items()}
    after = _where(url, job_id)
    for prefix, tms in planned.items():
        assert _by_prefix(after, prefix) == tms
    assert _get(f"{url}/jobs/{job_id}")["state"] == "RUNNING"
    deadline = time.time() + 30
    while time.time() < deadline:
        held, _free = flink_apply.held_slots(rest, job_id)
        if sum(held.values()) == 3:
            break
        time.sleep(1)
    assert held == {a: 1, b: 1, c: 1}  # the 3 slots left idle went back after slot.idle.timeout
    assert Counter(tm for tm, _slot in _slot_loads(url, job_id)) == {a: 1, b: 1, c: 1}
