"""Storm UI REST reader: the fixtures of tests/fixtures/storm_ui (responses shaped as Storm's
``UIHelpers`` writes them, see its README) read from a directory and from a live HTTP server,
the executor-level graph with hand-computed rates and loads, the current placement, the
observed cluster, bad input, and the ``read-engine storm-ui`` command."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
import pytest
from json_http import JsonServer

from streamsched.cli import main
from streamsched.engines.storm import ui_rest
from streamsched.errors import InputError
from streamsched.model import Placement
from streamsched.model.cluster import Cluster
from streamsched.model.graph_files import read_graph

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "storm_ui" / "wordcount"
TOPOLOGY_ID = "wordcount-3-1714557000"
NODE1 = "node1.example.com"
NODE2 = "node2.example.com"
METRICS = "__metricsorg.apache.storm.metric.LoggingMetricsConsumer"


@pytest.fixture(scope="module")
def reading():
    return ui_rest.estimate(ui_rest.read_dir(FIXTURE))


def rate(graph, src: int, dst: int) -> float:
    ids = graph.task_ids
    hit = np.flatnonzero((ids[graph.src] == src) & (ids[graph.dst] == dst))
    return float(graph.rate[hit].sum()) if hit.size else 0.0


def load(graph, task: int) -> float:
    return float(graph.load[np.flatnonzero(graph.task_ids == task)[0]])


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "ui"
    shutil.copytree(FIXTURE, target)
    return target


def edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


# ------------------------------------------------------------------------------- the data
def test_read_dir_parses_every_page():
    data = ui_rest.read_dir(FIXTURE)
    assert (data.topology_id, data.topology_name, data.window, data.window_s) == (TOPOLOGY_ID, "wordcount", "600", 600.0)
    assert (data.tasks_total, data.executors_total) == (29, 22)
    assert {c.name: (c.kind, c.tasks, c.executors) for c in data.components} == {
        "spout": ("spout", 5, 5), "__acker": ("bolt", 3, 3), METRICS: ("bolt", 1, 1),
        "count": ("bolt", 12, 5), "split": ("bolt", 8, 8)}
    count = [e for e in data.executors if e.component == "count"]
    assert [(e.start, e.end) for e in count] == [(5, 7), (8, 10), (11, 12), (13, 14), (15, 16)]
    first = count[0]  # "[5-7]" on node2:6700, the worker restarted 420 s ago; latency a string
    assert (first.host, first.port, first.uptime_s, first.executed, first.execute_latency_ms, first.capacity) == (
        NODE2, 6700, 420.0, 3179360.0, 0.06, 0.454)
    assert {(i.bolt, i.component, i.stream, i.executed) for i in data.inputs if i.bolt == "count"} == {
        ("count", "split", "default", 10159200.0), ("count", "__system", "__tick", 620.0)}
    assert {s.host: (s.slots, s.cpu_cores) for s in data.supervisors} == {NODE1: (4, 4.0), NODE2: (4, 8.0)}


def test_graph_has_one_task_per_application_executor(reading):
    graph = reading.graph
    assert graph.load_unit == "cores"
    assert graph.task_ids.tolist() == [5, 8, 11, 13, 15] + list(range(17, 30))
    assert sorted(graph.operator_names) == ["count", "split", "spout"]
    assert not any(name.startswith("__") for name in graph.operator_names)
    assert graph.n_edges == 5 * 8 + 8 * 5  # spout -> split and split -> count; no tick, ack or metrics edge


def test_pair_rates_by_hand(reading):
    graph = reading.graph
    # spout -> split (shuffle). Senders' transfer rates transferred / T (T = min(600, uptime)):
    # [25] 300000/600 = 500, [26] 288000/600 = 480, [27] 218400/420 = 520 (restarted worker),
    # [28] 500, [29] 294000/600 = 490; sum 2490. split executed only spout tuples
    # (inputStats 1325960 = the sum of its executors' executed), so receiver [17] takes
    # 186760/600 tuples/s and [18] (420 s) 130720/420.
    assert rate(graph, 25, 17) == pytest.approx(500 / 2490 * 186760 / 600)
    assert rate(graph, 27, 18) == pytest.approx(520 / 2490 * 130720 / 420)
    assert rate(graph, 25, 17) == pytest.approx(500 / 8, rel=1e-3)  # generator's truth: 500 sentences/s over 8
    # split -> count (fields). Every split executor transfers 2490 words/s (1494000/600 and
    # 1045800/420): shares 1/8. count executed 10159200 split tuples of its 10159820 executions
    # (620 ticks): executor [5-7] (420 s) takes 10159200/10159820 x 3179360/420 tuples/s.
    assert rate(graph, 17, 5) == pytest.approx(1 / 8 * 10159200 / 10159820 * 3179360 / 420)
    assert rate(graph, 24, 15) == pytest.approx(1 / 8 * 10159200 / 10159820 * 1314840 / 600)
    assert rate(graph, 5, 17) == 0.0 and rate(graph, 25, 5) == 0.0
    truth = json.loads((FIXTURE / "generator-truth.json").read_text())["truth"]
    assert graph.total_rate == pytest.approx(sum(truth["spout_rate"]) * 9, rel=1e-3)  # 8 words + 1 sentence


def test_loads_in_cores_by_hand(reading):
    graph = reading.graph
    # busy fraction: executed x executeLatency (ms) / 1000 / T
    assert load(graph, 17) == pytest.approx(186760 * 0.350 / 1000 / 600)
    assert load(graph, 18) == pytest.approx(130720 * 0.350 / 1000 / 420)
    assert load(graph, 5) == pytest.approx(3179360 * 0.060 / 1000 / 420)
    assert load(graph, 25) == ui_rest.DEFAULT_SPOUT_LOAD  # the UI reports no busy time for spouts
    by_capacity = ui_rest.estimate(ui_rest.read_dir(FIXTURE), load="capacity", spout_load=0.0)
    assert load(by_capacity.graph, 5) == 0.454 and load(by_capacity.graph, 17) == 0.109
    assert load(by_capacity.graph, 25) == 0.0
    assert np.array_equal(by_capacity.graph.rate, graph.rate)


def test_current_placement_and_observed_cluster(reading):
    cluster, placement, graph = reading.cluster, reading.placement, reading.graph
    assert cluster.capacity_unit == "cores"
    assert [(n.name, n.capacity, n.slots, n.cores) for n in cluster.nodes] == [
        (NODE1, 4.0, 4, 4), (NODE2, 8.0, 4, 8)]
    where = {int(t): (cluster.nodes[n].name, int(w)) for t, n, w in
             zip(graph.task_ids, placement.node_of, placement.worker_of)}
    # "[5-7]" node2:6700, "[8-10]" node1:6701, "[11-12]" node1:6700 (ports 6700.. -> workers 0..)
    assert where[5] == (NODE2, 0) and where[8] == (NODE1, 1) and where[11] == (NODE1, 0)
    assert placement.metadata["topology_id"] == TOPOLOGY_ID
    assert placement.violations(graph, cluster) == []
    layout = reading.layout
    assert [(e.component, e.start, e.end) for e in layout.executors if e.system] == [
        ("__acker", 1, 1), ("__acker", 2, 2), ("__acker", 3, 3), (METRICS, 4, 4)]
    assert layout.supervisor_id(NODE2) == "b7d1f2a9-2c4e-4b6a-9d8f-1a2b3c4d5e02-10.0.0.12"
    assert layout.ports[NODE1] == (6700, 6701, 6702, 6703) and reading.warnings == ()


def test_all_time_window_divides_by_uptime(tmp_path):
    ui = copy_fixture(tmp_path)
    for path in ui.glob("*.json"):
        if path.name != "supervisors.json" and path.name != "generator-truth.json":
            edit(path, lambda doc: doc.__setitem__("window", ":all-time"))
    reading = ui_rest.estimate(ui_rest.read_dir(ui))
    assert load(reading.graph, 17) == pytest.approx(186760 * 0.350 / 1000 / 1805)
    assert rate(reading.graph, 25, 17) == pytest.approx(
        (300000 / 1803) / (300000 / 1803 + 288000 / 1805 + 218400 / 420 + 300000 / 1803 + 294000 / 1805)
        * 186760 / 1805)
    with pytest.raises(InputError, match="not the window '600'"):
        ui_rest.read_dir(ui, window="600")


def test_system_executors_without_their_pages(tmp_path):
    ui = copy_fixture(tmp_path)
    (ui / "component-__acker.json").unlink()
    (ui / f"component-{METRICS}.json").unlink()
    reading = ui_rest.estimate(ui_rest.read_dir(ui))
    # Named by numbering topology.json's components as Nimbus does (their tasks add up to 29).
    assert [(e.component, e.start) for e in reading.layout.executors if e.system] == [
        ("__acker", 1), ("__acker", 2), ("__acker", 3), (METRICS, 4)]
    # A topology page saved without sys=1 lists no system component: the tasks no page covers
    # are system tasks, one executor each, named __unlisted, with a warning.
    def drop_system(doc):
        doc["bolts"] = [b for b in doc["bolts"] if not b["boltId"].startswith("__")]
    edit(ui / "topology.json", drop_system)
    reading = ui_rest.estimate(ui_rest.read_dir(ui))
    assert [(e.component, e.start) for e in reading.layout.executors if e.system] == [
        (ui_rest.UNLISTED, t) for t in (1, 2, 3, 4)]
    assert any("sys=1" in w for w in reading.warnings)
    assert reading.graph.n_edges == 80


# -------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("file, change, message", [
    ("component-count.json", lambda d: d["executorStats"][0].__setitem__("executeLatency", "n/a"),
     r"component-count.json.executorStats\[0\].executeLatency: expected a number, got 'n/a'"),
    ("component-split.json", lambda d: d["executorStats"][2].__setitem__("id", "[19-18]"),
     r"component-split.json.executorStats\[2\].id: '\[19-18\]' is not an executor"),
    ("component-split.json", lambda d: d["executorStats"][1].pop("host"),
     r"component-split.json.executorStats\[1\].host: missing"),
    ("component-spout.json", lambda d: d.__setitem__("window", "10800"),
     r"component-spout.json.window: '10800', but topology.json has '600'"),
    ("component-count.json", lambda d: d["inputStats"][0].__setitem__("executed", -20),
     r"component-count.json.inputStats\[0\].executed: -20 is not a finite number >= 0"),
    ("topology.json", lambda d: d.__setitem__("window", "42"), r"topology.json.window: '42' is not one of"),
    ("component-count.json", lambda d: d.__setitem__("topologyId", "other-1-1"),
     r"component-count.json.topologyId: 'other-1-1', expected"),
])
def test_bad_field_is_one_error_naming_file_and_field(tmp_path, file, change, message):
    ui = copy_fixture(tmp_path)
    edit(ui / file, change)
    with pytest.raises(InputError, match=message):
        ui_rest.read_dir(ui)


def test_missing_page_and_broken_json(tmp_path):
    ui = copy_fixture(tmp_path)
    (ui / "component-split.json").unlink()
    with pytest.raises(InputError, match=r"component-split.json: missing \(page of component 'split'\)"):
        ui_rest.read_dir(ui)
    (ui / "component-split.json").write_text('{"id": "split",\n  oops}')
    with pytest.raises(InputError, match=r"component-split.json:2: invalid JSON"):
        ui_rest.read_dir(ui)
    with pytest.raises(InputError, match="not a directory"):
        ui_rest.read_dir(tmp_path / "nowhere")


# ------------------------------------------------------------------------------------ live
def _ui_answer(requests: list):
    """Serves the fixture files at Storm UI's REST paths; records the queries in ``requests``."""

    def answer(parts, query_string):
        requests.append((tuple(parts), {k: v[0] for k, v in parse_qs(query_string).items()}))
        name = None
        if parts[:3] == ["api", "v1", "supervisor"] and parts[3:] == ["summary"]:
            name = "supervisors.json"
        elif parts[:3] == ["api", "v1", "topology"] and len(parts) == 4 and parts[3] == TOPOLOGY_ID:
            name = "topology.json"
        elif parts[:4] == ["api", "v1", "topology", TOPOLOGY_ID] and len(parts) == 6 and parts[4] == "component":
            name = ui_rest.component_file(parts[5])
        if name is None or not (FIXTURE / name).exists():
            return 500, json.dumps({"error": "500 Server Error", "errorMessage": f"{parts[-1]} not alive"}).encode()
        return 200, (FIXTURE / name).read_bytes()

    return answer


UI_REQUESTS: list = []


@pytest.fixture()
def storm_ui_server():
    UI_REQUESTS.clear()
    server = JsonServer(_ui_answer(UI_REQUESTS))
    yield server.url
    server.close()


def test_live_ui_gives_what_the_saved_pages_give(storm_ui_server, tmp_path):
    saved = tmp_path / "saved"
    data = ui_rest.fetch(storm_ui_server, TOPOLOGY_ID, window="600", save_dir=saved)
    assert data == ui_rest.read_dir(FIXTURE)
    queries = {parts[-1]: q for parts, q in UI_REQUESTS}
    assert queries[TOPOLOGY_ID] == {"window": "600", "sys": "1"}
    assert queries["count"] == {"window": "600", "sys": "0"}
    assert queries["__acker"] == {"window": "600", "sys": "1"}
    assert ui_rest.read_dir(saved) == data
    live = ui_rest.estimate(data)
    assert np.array_equal(live.graph.rate, ui_rest.estimate(ui_rest.read_dir(FIXTURE)).graph.rate)


def test_live_errors_are_one_line(storm_ui_server):
    with pytest.raises(InputError, match=r"HTTP 500 .*not alive"):
        ui_rest.fetch(storm_ui_server, "gone-1-1")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(InputError, match=r"Storm UI unreachable"):
        ui_rest.fetch(f"http://127.0.0.1:{port}", TOPOLOGY_ID, timeout=2)
    with pytest.raises(InputError, match="--window"):
        ui_rest.fetch(storm_ui_server, TOPOLOGY_ID, window="60")
    with pytest.raises(InputError, match="either --url"):
        ui_rest.read()
    with pytest.raises(InputError, match="--url needs --topology-id"):
        ui_rest.read(url=storm_ui_server)


# --------------------------------------------------------------------------------- the CLI
def test_cli_read_engine_storm_ui_dir_then_schedule(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["read-engine", "storm-ui", "--dir", str(FIXTURE), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["topology_id"] == TOPOLOGY_ID and report["graph"]["tasks"] == 18
    graph = read_graph(out / "graph.json")
    cluster = Cluster.load(out / "cluster.yaml")
    assert graph.load_unit == "cores" and cluster.capacity_unit == "cores"
    placement = Placement.read(out / "placement.json", graph, cluster)
    assert placement.violations(graph, cluster) == []
    assert main(["schedule", "--graph", str(out / "graph.json"), "--cluster", str(out / "cluster.yaml"),
                 "-s", "ols", "-o", str(tmp_path / "new.json")]) == 0


def test_cli_read_engine_storm_ui_live_and_errors(storm_ui_server, tmp_path, capsys):
    out = tmp_path / "live"
    assert main(["read-engine", "storm-ui", "--url", storm_ui_server, "--topology-id", TOPOLOGY_ID,
                 "--out", str(out), "--json"]) == 0
    assert (out / "storm-ui" / "topology.json").exists() and (out / "graph.json").exists()
    capsys.readouterr()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["read-engine", "storm-ui", "--url", f"http://127.0.0.1:{port}", "--topology-id", "x-1-1",
                 "--out", str(tmp_path / "x"), "--timeout", "2"]) == 2
    assert main(["read-engine", "storm-ui", "--dir", str(tmp_path / "none"), "--out", str(tmp_path / "y")]) == 2
    assert main(["read-engine", "storm-ui", "--dir", str(FIXTURE), "--url", storm_ui_server,
                 "--out", str(tmp_path / "z")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("error:") for line in errors)
    assert "unreachable" in errors[0]
