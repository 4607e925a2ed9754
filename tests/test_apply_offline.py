"""``apply flink`` without a cluster: the recorded REST answers of a live job
(tests/fixtures/flink/live-job, Flink 2.3, 2 TaskManagers x 2 slots, 9 vertices) served by a
local HTTP server (tests/json_http.py), and the pure steps of ``apply`` on hand-made cases.

Checked: identical TaskManagers relabelled to move the fewest subtasks (brute force over every
permutation on small cases), a plan equal to the running placement with the TaskManagers swapped
moves nothing and is not applied, a plan below the threshold is left alone with a message, the
slots a plan needs per TaskManager, the bounds of the first rescale, the list of moved subtasks,
and a failed rescale putting the job back (its parallelism, a plan of its placement)."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from json_http import JsonServer
from streamsched.cli import main
from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink import load_capture, read_capture
from streamsched.errors import InputError
from streamsched.model import Cluster, Node, Placement

FIXTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"
JOB = "76ca98e4065d945519b5c72b3e49e1a2"
TM1, TM2 = "127.0.0.1:34055-b89534", "127.0.0.1:39221-9d27d0"


@pytest.fixture(scope="module")
def reading():
    return read_capture(load_capture(FIXTURE))


class RecordedFlink:
    """The job's last recorded snapshot as a JobManager answers it; the plugin's environment;
    each TaskManager's slots (the job holds 2 on TM1 and 1 on TM2, as ``freeSlots`` says); the
    job's resource requirements (upper bounds as last set)."""

    def __init__(self):
        self.docs = FIXTURE / "1"
        self.server = JsonServer(self.answer)
        self.url = self.server.url

    def reset(self, plans: Path) -> None:
        self.plans = plans
        job = json.loads((self.docs / "jobs" / f"{JOB}.json").read_text())
        self.bounds = {v["id"]: v["parallelism"] for v in job["vertices"]}
        self.requests: list[str] = []

    def answer(self, parts, query):
        self.requests.append("/".join(parts))
        if parts == ["jobmanager", "environment"]:
            body = {"jvm": {"options": [f"-Dstreamsched.flink.placement={self.plans}"]},
                    "classpath": ["/flink/lib/streamsched-flink-placement-2.3.jar", "/flink/lib/flink-dist-2.3.0.jar"]}
        elif parts == ["jobmanager", "config"]:
            body = [{"key": "metrics.fetcher.update-interval", "value": "100"}]
        elif parts[:1] == ["taskmanagers"] and len(parts) == 2:
            held = {TM1: 2, TM2: 1}[parts[1]]
            body = {"id": parts[1], "allocatedSlots": [{"jobId": JOB} for _ in range(held)]}
        elif parts == ["jobs", JOB, "resource-requirements"]:
            body = {vid: {"parallelism": {"lowerBound": 1, "upperBound": b}} for vid, b in self.bounds.items()}
        else:
            path = self.docs.joinpath(*parts).with_suffix(".json")
            if not path.is_file():
                return 404, b'{"errors": ["Not found"]}'
            body = json.loads(path.read_text())
        return 200, json.dumps(body).encode()


@pytest.fixture(scope="module")
def recorded():
    server = RecordedFlink()
    yield server
    server.server.close()


@pytest.fixture()
def flink(recorded, tmp_path):
    with recorded.server.lock:
        recorded.reset(tmp_path)
    return recorded


def _write(reading, node_of, path: Path) -> Path:
    Placement.build(node_of).write(path, reading.graph, reading.cluster)
    return path


def _remote_bytes(reading, node_of) -> float:
    """Bytes/s between nodes, edge by edge (independent of streamsched.metrics)."""
    g = reading.graph
    return sum(float(b) for s, d, b in zip(g.src, g.dst, g.bytes_rate) if node_of[s] != node_of[d])


# ------------------------------------------------------------------ relabelling
def _moves(current, plan) -> int:
    return int(np.count_nonzero(np.asarray(current) != np.asarray(plan)))


def test_relabel_equals_brute_force_over_permutations_within_classes():
    rng = np.random.default_rng(7)
    for _case in range(300):
        n_nodes = int(rng.integers(2, 6))
        kinds = rng.integers(0, 2, n_nodes)  # two kinds of node: classes of identical ones
        classes = [[k for k in range(n_nodes) if kinds[k] == c] for c in (0, 1)]
        classes = [c for c in classes if c]
        tasks = int(rng.integers(1, 12))
        current, plan = rng.integers(0, n_nodes, tasks), rng.integers(0, n_nodes, tasks)
        got, renamed = flink_apply.relabel(current, plan, classes)
        best = None
        for perms in itertools.product(*(itertools.permutations(c) for c in classes)):
            rename = {a: b for c, p in zip(classes, perms) for a, b in zip(c, p)}
            moves = _moves(current, [rename[k] for k in plan])
            best = moves if best is None else min(best, moves)
        assert _moves(current, got) == best
        # a renaming within classes: the same nodes hold the same groups of tasks
        assert all(kinds[a] == kinds[b] for a, b in renamed.items())
        assert sorted(np.bincount(got, minlength=n_nodes)) == sorted(np.bincount(plan, minlength=n_nodes))
        for k in range(n_nodes):
            same = got[plan == k]
            assert same.size == 0 or (same == same[0]).all()


def test_relabel_never_trades_unequal_nodes():
    current, plan = np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0])
    got, renamed = flink_apply.relabel(current, plan, [[0], [1]])
    assert list(got) == [1, 1, 0, 0] and renamed == {}
    got, renamed = flink_apply.relabel(current, plan, [[0, 1]])
    assert list(got) == [0, 0, 1, 1] and renamed == {0: 1, 1: 0}


def test_identical_nodes_need_the_same_slots_cpu_and_memory():
    nodes = [Node("a", 2.0, slots=1, cores=2, task_slots=2), Node("b", 2.0, slots=1, cores=2, task_slots=2),
             Node("c", 2.0, slots=1, cores=2, task_slots=3), Node("d", 1.0, slots=1, cores=2, task_slots=2),
             Node("e", 2.0, slots=1, cores=2, task_slots=2, ram_mb=1.0)]
    assert flink_apply.identical_nodes(Cluster("c", tuple(nodes), capacity_unit="cores")) == [[0, 1], [2], [3], [4]]


# ------------------------------------------------------------------ no moves for nothing
def test_the_running_placement_with_the_taskmanagers_swapped_moves_nothing(reading, flink, tmp_path, capsys):
    swapped = 1 - reading.placement.node_of  # the job's two identical TaskManagers traded
    assert _moves(reading.placement.node_of, swapped) == reading.graph.n_tasks  # every subtask, taken literally
    plan = _write(reading, swapped, tmp_path / "swapped.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert not result.applied and result.moved == []
    assert result.relabelled == {TM1: TM2, TM2: TM1}
    assert result.reason == "the plan is the running placement with identical TaskManagers swapped: no subtask would move"
    assert result.gain == 0.0
    assert not any(p.endswith("resource-requirements") for p in flink.requests)  # nothing asked of Flink
    assert not list(tmp_path.glob(f"{JOB}*.json"))  # no plan written


def test_a_plan_made_for_another_cluster_swaps_no_taskmanagers_without_its_machines(reading, flink, tmp_path):
    """The swapped plan, made for a cluster with the same TaskManager names but 4 cores on the
    first and 1 on the second: over REST the two look alike, in the plan's cluster they are not,
    so without ``--machines`` apply takes the plan's names as written (every subtask would move)
    and says why; given machines on which the two are alike, it swaps them again."""
    swapped = 1 - reading.placement.node_of
    unequal = Cluster("unequal", tuple(replace(n, capacity=c, cores=c) for n, c in zip(reading.cluster.nodes, (4, 1))),
                      capacity_unit="cores")
    plan = tmp_path / "unequal.json"
    Placement.build(swapped).write(plan, reading.graph, unequal)
    lines = []
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=lines.append)
    assert result.relabelled == {} and len(result.moved) == reading.graph.n_tasks and not result.applied
    assert f"{plan}: made for cluster 'unequal', not for the TaskManagers as the JobManager describes them" in lines[0]
    alike = Cluster("alike", tuple(replace(n, capacity=2.0, cores=2) for n in reading.cluster.nodes),
                    capacity_unit="cores")
    again = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, machines=alike)
    assert again.relabelled == {TM1: TM2, TM2: TM1} and again.moved == []
    assert not any(p.endswith("resource-requirements") for p in flink.requests)


def test_a_plan_below_the_threshold_is_left_alone_with_its_figures(reading, flink, tmp_path):
    current = reading.placement.node_of
    running = _remote_bytes(reading, current)
    # one subtask of a sink that receives nothing moved: the same bytes, one move
    sink = next(v for v in reading.report["vertices"] if v["name"].startswith("GroupAggregate"))
    node_of = current.copy()
    node_of[sink["first_task"]] = 1 - node_of[sink["first_task"]]
    planned = _remote_bytes(reading, node_of)
    plan = _write(reading, node_of, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert not result.applied and len(result.moved) == 1
    assert result.moved[0]["vertex"] == sink["name"] and result.moved[0]["subtask"] == 0
    assert result.basis == "remote bytes"
    assert result.gain == pytest.approx((running - planned) / running)
    assert result.gain < flink_apply.MIN_GAIN and "below the threshold (5 %, --min-gain)" in result.reason
    # every figure from the one reading: measured and predicted side by side
    assert result.reading["running_predicted_remote_bytes_per_s"] == pytest.approx(running)
    assert result.reading["plan_predicted_remote_bytes_per_s"] == pytest.approx(planned)
    assert result.reading["measured_remote_bytes_per_s"] == reading.report["measured_per_s"]["bytes_in_remote"]
    sources = sum(v["records_out_per_s"] for v in reading.report["vertices"] if not v["inputs"])
    assert result.reading["measured_throughput"] == pytest.approx(sources) and sources > 4000
    assert not any(p.endswith("resource-requirements") for p in flink.requests)


def test_the_cli_says_it_leaves_the_job_alone(reading, flink, tmp_path, capsys, monkeypatch):
    """The CLI's own reading is the recorded capture (its two snapshots, counters 9.8 s apart)."""
    monkeypatch.setattr(flink_apply, "capture_live", lambda url, job_id, window_s: load_capture(FIXTURE))
    node_of = reading.placement.node_of.copy()
    sink = next(v for v in reading.report["vertices"] if v["name"].startswith("GroupAggregate"))
    node_of[sink["first_task"]] = 1 - node_of[sink["first_task"]]
    plan = _write(reading, node_of, tmp_path / "plan.json")
    code = main(["apply", "flink", "--url", flink.url, "--job-id", JOB, "--placement", str(plan),
                 "--min-gain", "1"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    left = re.search(r"job left alone: predicted gain in remote bytes ([-+][0-9.]+) % is below the threshold "
                     r"\(1 %, --min-gain\); 1 subtasks would move", out)
    assert left and float(left.group(1)) == pytest.approx(100 * result_gain(reading, node_of), abs=0.05), out
    assert re.search(r"reading of 9\.8 s \(counters\): running placement measured [0-9,]+ source records/s", out), out


def result_gain(reading, node_of) -> float:
    running = _remote_bytes(reading, reading.placement.node_of)
    return (running - _remote_bytes(reading, node_of)) / running


def test_min_gain_must_be_a_number_below_infinity(reading, flink, tmp_path):
    plan = _write(reading, reading.placement.node_of, tmp_path / "plan.json")
    for bad in (float("nan"), float("inf")):
        with pytest.raises(InputError, match="--min-gain"):
            flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=bad)


# ------------------------------------------------------------------ slots and rescales
def test_slots_needed_per_taskmanager_and_slot_sharing_group():
    plan = {"src": ["a", "b"], "calc": ["a", "a", "b"], "agg": ["a", "b", "b"], "other": ["c", "c", "a"]}
    assert flink_apply.slots_needed(plan) == {"a": 2, "b": 2, "c": 2}
    # "other" in a group of its own: its slots add to the default group's
    groups = {"src": "g", "calc": "g", "agg": "g", "other": "h"}
    assert flink_apply.slots_needed(plan, groups) == {"a": 3, "b": 2, "c": 2}


def test_the_first_rescale_asks_for_every_slot_where_the_job_lacks_some():
    order = ["src", "calc", "agg"]
    parallelism = {"src": 2, "calc": 3, "agg": 3}
    held, free = {"tm-1": 2, "tm-2": 1, "tm-3": 0}, {"tm-1": 0, "tm-2": 1, "tm-3": 2}
    # the plan names tm-3, where the job holds nothing: every slot of the cluster (3 + 3)
    assert flink_apply.slots_to_hold(parallelism, held, free, {"tm-1": 2, "tm-3": 2}, order) == {"calc": 6}
    # the plan fits the held slots: the first vertex narrower than the widest, one less
    assert flink_apply.slots_to_hold(parallelism, held, free, {"tm-1": 2, "tm-2": 1}, order) == {"src": 1}
    # all equally wide: one more where slots are free, else one less
    even = {"src": 3, "calc": 3, "agg": 3}
    assert flink_apply.slots_to_hold(even, held, free, {"tm-1": 2}, order) == {"src": 4}
    assert flink_apply.slots_to_hold(even, held, {k: 0 for k in free}, {"tm-1": 2}, order) == {"src": 2}
    with pytest.raises(flink_apply.ApplyError, match="needs 3 slots on TaskManager tm-3; the job holds 0 there and 2"):
        flink_apply.slots_to_hold(parallelism, held, free, {"tm-3": 3}, order)
    with pytest.raises(flink_apply.ApplyError, match="parallelism 1"):
        flink_apply.slots_to_hold({"a": 1}, {"t": 1}, {"t": 0}, {"t": 1}, ["a"])


def test_moved_subtasks_lists_each_subtask_that_changes_taskmanager():
    vertices = [{"id": "v", "name": "Calc", "parallelism": 3}, {"id": "w", "name": "Sink", "parallelism": 2}]
    where = {"v": ["a", "a", "b"], "w": ["a", "b"]}
    targets = {"v": ["a", "b", "b"], "w": ["b", "a"]}
    assert flink_apply.moved_subtasks(vertices, where, targets) == [
        {"vertex": "Calc", "subtask": 1, "from": "a", "to": "b"},
        {"vertex": "Sink", "subtask": 0, "from": "a", "to": "b"},
        {"vertex": "Sink", "subtask": 1, "from": "b", "to": "a"}]


def test_a_failed_rescale_puts_the_job_back_with_a_plan_of_its_placement(reading, flink, tmp_path, monkeypatch):
    """A plan worth applying (two subtasks moved to TM2, 8 % fewer remote bytes); the first
    rescale fails (Flink never reaches its parallelism): ``apply`` sets the job's parallelism
    back, with a plan of the placement it found, and says so."""
    calls = []

    def rescale(rest, job_id, upper, timeout_s, redeploy=True, taskmanagers=None):
        calls.append((dict(upper), redeploy))
        flink.bounds = dict(upper)
        if len(calls) == 1:
            raise flink_apply.ApplyError(f"job {job_id} did not run at the requested parallelism within 1 s")
        return {"view": flink_apply.job_view(rest, job_id), "put": 0.0, "downtime_s": 0.0}

    monkeypatch.setattr(flink_apply, "rescale", rescale)
    node_of = reading.placement.node_of.copy()
    first = {v["name"].split("[")[0]: v["first_task"] for v in reading.report["vertices"]}
    node_of[first["Source: gen3"] + 1] = node_of[first["fanin: Writer"] + 1] = 1  # next to their partners
    running = _remote_bytes(reading, reading.placement.node_of)
    assert (running - _remote_bytes(reading, node_of)) / running > 0.08  # 8.2 %: worth applying
    plan = _write(reading, node_of, tmp_path / "plan.json")
    original = dict(flink.bounds)
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert "did not run at the requested parallelism" in str(failed.value)
    assert "the job was put back as it was (parallelism and placement, checked per subtask)" in str(failed.value)
    # rescale 1: some vertex away from its parallelism; then back to it without waiting for a
    # redeploy (the job still ran at it)
    assert len(calls) == 2 and calls[0][0] != original
    assert calls[1] == (original, False)
    doc = json.loads((tmp_path / f"{JOB}.json").read_text())
    where = {v["id"]: [TM1 if reading.placement.node_of[v["first_task"] + i] == 0 else TM2
                       for i in range(v["parallelism"])] for v in reading.report["vertices"]}
    assert {vid: d["taskmanagers"] for vid, d in doc["vertices"].items()} == where


def _busiest_link(reading, node_of, capacity: float) -> float:
    """The busiest link direction's utilisation, edge by edge."""
    g, load = reading.graph, {}
    for s, d, b in zip(g.src, g.dst, g.bytes_rate):
        if node_of[s] != node_of[d]:
            load[node_of[s], "out"] = load.get((node_of[s], "out"), 0.0) + float(b)
            load[node_of[d], "in"] = load.get((node_of[d], "in"), 0.0) + float(b)
    return max(load.values()) / capacity


def test_with_link_capacities_the_gain_is_in_predicted_throughput(reading, flink, tmp_path):
    """Both TaskManagers behind 100 kB/s links each way and 64 cores (the links bind): the
    throughput of a placement is the measured source rate over its busiest link direction's
    utilisation (T2-T5), so the gain is the ratio of the busiest directions."""
    capacity = 100_000.0
    machines = Cluster("lab", tuple(replace(n, capacity=64.0, cores=64, net_in=capacity, net_out=capacity)
                                    for n in reading.cluster.nodes), capacity_unit="cores")
    node_of = reading.placement.node_of.copy()
    first = {v["name"].split("[")[0]: v["first_task"] for v in reading.report["vertices"]}
    node_of[first["Source: gen3"] + 1] = node_of[first["fanin: Writer"] + 1] = 1
    plan = _write(reading, node_of, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, machines=machines, min_gain=1.0)
    now, then = _busiest_link(reading, reading.placement.node_of, capacity), _busiest_link(reading, node_of, capacity)
    assert result.basis == "throughput" and not result.applied
    assert result.gain == pytest.approx(now / then - 1)
    r = result.reading
    rate = r["running_predicted_throughput"] * now  # T5: throughput x busiest utilisation = the measured rate
    assert rate == pytest.approx(r["plan_predicted_throughput"] * then) and rate > 4000
    assert r["running_bottleneck"].startswith("link ")
    with pytest.raises(InputError, match="no node '127.0.0.1:34055-b89534'"):
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading,
                          machines=Cluster("other", (Node("x", 1.0),)))


def test_the_demo_loop_says_what_apply_judged_and_measured(reading, flink, tmp_path):
    """The demo's lines from ``apply``'s result: left alone (the reason, the reading's
    measurements), and applied (source records/s and remote bytes before and after, the
    prediction beside them)."""
    from streamsched.cli.summaries import live_loop_lines
    from streamsched.job import LiveLoop

    plan = _write(reading, 1 - reading.placement.node_of, tmp_path / "swapped.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading).to_dict()
    loop = LiveLoop(JOB, tmp_path, tmp_path, 1.0, result["reading"]["exchanged_records_per_s"], None, "optimal",
                    plan, result)
    lines = live_loop_lines(loop)
    assert lines[0] == "flink: on loopback, not in the network lab: placement moves bytes here, not throughput"
    assert lines[-2] == ("flink: job left alone: the plan is the running placement with identical TaskManagers "
                         "swapped: no subtask would move")
    assert lines[-1].startswith("flink: measured 4,591 source records/s; latency at the sink n/a")
    done = {**result, "applied": True, "moved": [{}], "downtime_s": 1.5, "rescales": [{}, {}],
            "after": {**{k: result["reading"][k] for k in ("window_s", "rates_from", "exchanged_records_per_s")},
                      "measured_throughput": 2 * result["reading"]["measured_throughput"],
                      "measured_remote_bytes_per_s": 0.5 * result["reading"]["measured_remote_bytes_per_s"]}}
    lines = live_loop_lines(LiveLoop(JOB, tmp_path, tmp_path, 1.0, 1.0, 1.0, "optimal", plan, done))
    assert "source records/s: 4,591 before, 9,183 after (+100.0 %); predicted n/a (no link capacities" in lines[-3]
    assert "155,635 before, 77,818 after (-50.0 %); predicted 155,445 -> 155,445" in lines[-1]
