"""Report pictures (issue 17, item 4): every label inside its box and clear of every other label
and box, measured on matplotlib's renderer independently of the layout arithmetic; the
before/after view of a re-plan outlines exactly the moved tasks. The same checks in the
browser, and the report's size, are in test_report.py."""

import re

import matplotlib.image
import matplotlib.patches
import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.evaluation import pictures
from streamsched.evaluation.comparison import Outcome
from streamsched.evaluation.report import write_replan_report, write_report
from streamsched.metrics import evaluate, inter_node_traffic
from streamsched.model import Placement
from streamsched.model.cluster import Cluster, Node
from streamsched.model.taskgraph import TaskGraph

def geometry(fig):
    """Window extents (x0, y0, x1, y1) of every artist whose gid names a label or a box, as
    matplotlib's renderer measures the drawn text (not as the layout code computed it), at
    300 dpi so that pixel rounding of glyph advances stays below a point."""
    fig.set_dpi(300)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels, boxes, texts = {}, {}, {}
    for artist in fig.findobj():
        gid = artist.get_gid()
        if not gid or not artist.get_visible():
            continue
        extent = artist.get_window_extent(renderer)
        if "-label-" in gid:
            labels[gid] = extent.extents
            texts[gid] = artist.get_text()
        elif "-box-" in gid:
            boxes[gid] = extent.extents
    return labels, boxes, texts, fig.bbox.extents


def contains(outer, inner, slack=0.01):
    return (outer[0] - slack <= inner[0] and outer[1] - slack <= inner[1]
            and inner[2] <= outer[2] + slack and inner[3] <= outer[3] + slack)


def intersects(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def label_problems(fig):
    """Labels spilling out of their box or the picture, labels overlapping each other, and
    labels crossing a box that does not hold them."""
    labels, boxes, _, frame = geometry(fig)
    problems = []
    names = sorted(labels)
    for i, gid in enumerate(names):
        extent = labels[gid]
        own = boxes.get(gid.replace("-label-", "-box-"))
        if own is not None and not contains(own, extent):
            problems.append(f"{gid} spills out of its box")
        if not contains(frame, extent):
            problems.append(f"{gid} spills out of the picture")
        problems += [f"{gid} overlaps {other}" for other in names[:i] if intersects(extent, labels[other])]
        problems += [f"{gid} crosses {box}" for box, b in boxes.items()
                     if intersects(extent, b) and not contains(b, extent)]
    return problems


def long_names_graph():
    """Measured-style: fractional loads, a fields-grouped stream with one hot key, and operator
    names as long as real topologies use."""
    operators = ["kafka_clickstream_reader", "extract_user_session_features", "sessionize", "x"]
    parallelism = [3, 6, 4, 1]
    task_operator = np.repeat(np.arange(4), parallelism)
    rng = np.random.default_rng(3)
    load = rng.uniform(0.05, 0.9, task_operator.size)
    src, dst, rate = [], [], []
    offsets = np.r_[0, np.cumsum(parallelism)]
    for op in range(3):
        for a in range(offsets[op], offsets[op + 1]):
            for j, b in enumerate(range(offsets[op + 1], offsets[op + 2])):
                src.append(a)
                dst.append(b)
                rate.append(900.0 if (op == 1 and j == 0) else rng.uniform(3, 40))
    return TaskGraph.build("long-names", operators, task_operator, load, src, dst, rate)


def long_names_cluster():
    return Cluster("long-node-names", tuple(Node(name=f"worker-machine-rack{i % 3}-{i:02d}.example.internal",
                                                 capacity=4.0) for i in range(12)))


def random_placement(graph, cluster, seed, workers=3):
    rng = np.random.default_rng(seed)
    return Placement.build(rng.integers(0, cluster.n_nodes, graph.n_tasks), rng.integers(0, workers, graph.n_tasks))


def cases():
    wordcount, het = workloads.workload("wordcount"), workloads.cluster("heterogeneous-10")
    big = workloads.workload("payload")  # 80 tasks
    yield "wordcount (hot fields key)", wordcount, het, random_placement(wordcount, het, 0)
    yield "long operator and node names", long_names_graph(), long_names_cluster(), \
        random_placement(long_names_graph(), long_names_cluster(), 1)
    yield "everything on one node", long_names_graph(), long_names_cluster(), \
        Placement.build(np.zeros(long_names_graph().n_tasks, int), np.zeros(long_names_graph().n_tasks, int))
    yield "80 tasks on 40 nodes", big, workloads.cluster("high-low-20-20"), \
        random_placement(big, workloads.cluster("high-low-20-20"), 2, workers=1)


CASES = list(cases())


@pytest.mark.parametrize("name, graph, cluster, placement", CASES, ids=[c[0] for c in CASES])
def test_node_view_labels_stay_inside_their_boxes_and_clear_of_each_other(name, graph, cluster, placement):
    fig = pictures.node_view(graph, cluster, placement)
    labels, boxes, texts, _ = geometry(fig)
    assert label_problems(fig) == []
    # every task drawn once, inside its worker's box, inside its node's box; nodes disjoint
    node, worker = placement.node_of, placement.worker_of
    for t in range(graph.n_tasks):
        task_box = boxes[f"task-box-{t}"]
        assert contains(boxes[f"worker-box-{node[t]}-{worker[t]}"], task_box)
        assert contains(boxes[f"node-box-{node[t]}"], task_box)
        full = graph.task_label(t)  # shown whole or as its shortened head + ellipsis
        shown = texts[f"task-label-{t}"]
        assert shown == full or (pictures._ELLIPSIS in shown and full.startswith(shown.split(pictures._ELLIPSIS)[0]))
    assert sum(g.startswith("task-box-") for g in boxes) == graph.n_tasks
    node_boxes = [b for g, b in boxes.items() if g.startswith("node-box-")]
    assert len(node_boxes) == np.unique(node).size
    assert not any(intersects(a, b) for i, a in enumerate(node_boxes) for b in node_boxes[:i])
    task_boxes = [b for g, b in boxes.items() if g.startswith("task-box-")]
    assert not any(intersects(a, b) for i, a in enumerate(task_boxes) for b in task_boxes[:i])
    # a node's "sent to other nodes" figure, where shown, is its share of the inter-node traffic
    cut = node[graph.src] != node[graph.dst]
    shown = {int(g.rsplit("-", 1)[1]): text for g, text in texts.items() if g.startswith("node-out-label-")}
    for k, text in shown.items():
        number, unit = re.fullmatch(r"([\d.]+)([kMG]?)/s out", text).groups()
        sent = graph.rate[cut & (node[graph.src] == k)].sum()
        assert float(number) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[unit] == pytest.approx(sent, rel=5e-3)
    if name == "wordcount (hot fields key)":
        assert len(shown) == np.unique(node[graph.src[cut]]).size  # room for every one


@pytest.mark.parametrize("name, graph, cluster, placement", CASES, ids=[c[0] for c in CASES])
def test_traffic_map_and_utilisation_labels_do_not_overlap(name, graph, cluster, placement):
    cpu = np.linspace(0.1, 1.2, cluster.n_nodes)
    nic = np.linspace(0.0, 4.0, cluster.n_nodes)
    nic[-1] = np.inf  # a node with traffic and no bandwidth
    fig = pictures.traffic_and_load(graph, cluster, placement, cpu, nic)
    assert label_problems(fig) == []
    # bars stay in the picture: the longest runs to the edge, none beyond
    _, _, _, frame = geometry(fig)
    bars = [a.get_window_extent().extents for a in fig.findobj(matplotlib.patches.Rectangle) if a.get_width() > 0]
    assert all(contains(frame, b) for b in bars)


def test_shortened_labels_when_names_are_too_long_for_the_smallest_font():
    # one operator name wider than a whole node view at the smallest font
    graph = TaskGraph.build("huge", ["a" * 200, "b"], [0, 0, 1], [1, 1, 1], [0, 1], [2, 2], [5.0, 7.0])
    cluster = workloads.cluster("homogeneous-10")
    placement = Placement.build([0, 1, 1], [0, 0, 1])
    fig = pictures.node_view(graph, cluster, placement)
    _, _, texts, _ = geometry(fig)
    assert texts["task-label-0"].endswith(pictures._ELLIPSIS + "[0]")
    assert texts["task-label-2"] == "b[0]"
    assert label_problems(pictures.node_view(graph, cluster, placement)) == []


def test_the_label_check_detects_a_spilling_and_an_overlapping_label():
    # the check is not vacuous: enlarge one task label, move another onto a third
    graph, cluster = long_names_graph(), long_names_cluster()
    fig = pictures.node_view(graph, cluster, random_placement(graph, cluster, 1))
    by_gid = {a.get_gid(): a for a in fig.findobj() if a.get_gid()}
    by_gid["task-label-0"].set_fontsize(30)
    by_gid["task-label-5"].set_position(by_gid["task-label-6"].get_position())
    problems = label_problems(fig)
    assert "task-label-0 spills out of its box" in problems
    assert any("task-label-6 overlaps task-label-5" in p or "task-label-5 overlaps task-label-6" in p for p in problems)


def test_tradeoff_overview_names_every_scheduler_without_overlap():
    # schedulers at one point share a label; 18 rows as in the demo, several coinciding
    rows = [{"scheduler": f"scheduler-{i}", "inter_node_traffic": float(100 + 7 * (i % 6)),
             "throughput_tps": float(5000 - 30 * (i % 6)), "nodes_used": 3 + i % 4} for i in range(18)]
    rows.append({"scheduler": "failed", "inter_node_traffic": None, "throughput_tps": None})
    fig = pictures.tradeoff(rows)
    labels, _, texts, _ = geometry(fig)
    assert label_problems(fig) == []
    named = " ".join(texts.values()).replace("\n", " ")
    assert all(f"scheduler-{i}" in named for i in range(18)) and "failed" not in named
    assert len(labels) == 6  # one label per distinct point


def test_metric_bars_labels_do_not_overlap():
    names = [f"scheduler-{i}" for i in range(18)]
    columns = [("inter-node traffic (i-scheduler.txt eq. 3) (tuples/s)", [1234.5 * i for i in range(18)]),
               ("predicted throughput, io-bound regime (tuples/s)", [None] + [3.3e6 * i for i in range(17)]),
               ("nodes used (nodes)", list(range(18)))]
    assert label_problems(pictures.metric_bars(names, columns)) == []


def outlined_in_red(svg_text: str, prefix: str) -> set[int]:
    """Tasks whose box in the SVG has the moved colour as its stroke (read from the SVG text)."""
    found = set()
    for task, body in re.findall(rf'<g id="{prefix}task-box-(\d+)">(.*?)</g>', svg_text, re.S):
        if re.search(rf"stroke: {pictures.MOVED_COLOUR}", body):
            found.add(int(task))
    return found


def test_before_after_outlines_exactly_the_moved_tasks():
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("heterogeneous-10")
    before = random_placement(graph, cluster, 4)
    node, worker = before.node_of.copy(), before.worker_of.copy()
    node[[2, 7, 11]] = (node[[2, 7, 11]] + 1) % cluster.n_nodes  # moved
    worker[[3, 4]] += 1  # another worker on the same node: not moved
    after = Placement.build(node, worker)
    running = before.node_of.copy()
    running[5] = -1  # task 5 is new in the running topology: the re-plan places it, it does not move
    before = Placement.build(running, before.worker_of)
    text = pictures.svg(pictures.before_after(graph, cluster, before, after, prefix="r-"))
    assert outlined_in_red(text, "r-before-") == {2, 7, 11}
    assert outlined_in_red(text, "r-after-") == {2, 7, 11}
    assert re.search(r'<g id="r-before-node-label--1">\s*<text[^>]*>new<', text)  # a box of the new tasks
    assert len(re.findall(r'id="r-after-task-box-\d+"', text)) == graph.n_tasks
    assert label_problems(pictures.before_after(graph, cluster, before, after)) == []


@pytest.mark.slow  # optimal's search, about 5 s
def test_cli_replan_report_marks_the_tasks_the_solver_moved(tmp_path):
    running, page = tmp_path / "even.json", tmp_path / "replan.html"
    assert main(["schedule", "-w", "diamond-16", "-c", "heterogeneous-10", "-s", "even", "-o", str(running)]) == 0
    new = tmp_path / "new.json"
    assert main(["replan", str(running), "-w", "diamond-16", "-c", "heterogeneous-10", "-m", "0.1",
                 "-p", "time_limit=5", "-o", str(new), "--report", str(page)]) == 0
    graph, cluster = workloads.workload("diamond-16"), workloads.cluster("heterogeneous-10")
    before, after = Placement.read(running, graph, cluster), Placement.read(new, graph, cluster)
    moved = set(np.flatnonzero(before.node_of != after.node_of).tolist())
    assert moved and after.metadata["moved"] == len(moved)
    html = page.read_text()
    assert outlined_in_red(html, "r-after-") == moved == outlined_in_red(html, "r-before-")
    assert f"{len(moved)} of {graph.n_tasks} tasks change node" in html


def test_replan_report_path_checked_before_solving(tmp_path):
    running = tmp_path / "even.json"
    assert main(["schedule", "-w", "linear-10", "-c", "homogeneous-10", "-s", "even", "-o", str(running)]) == 0
    assert main(["replan", str(running), "-w", "linear-10", "-c", "homogeneous-10",
                 "--report", str(tmp_path / "r.pdf")]) == 2


def test_replan_report_page(tmp_path):
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("heterogeneous-10")
    before = random_placement(graph, cluster, 5)
    page = write_replan_report(tmp_path / "r.html", graph, cluster, before, before)
    html = page.read_text()
    assert f"0 of {graph.n_tasks} tasks change node: none" in html
    assert outlined_in_red(html, "r-after-") == set()


def shown_matrix(fig):
    (image,) = [a for a in fig.findobj() if isinstance(a, matplotlib.image.AxesImage)]
    return np.asarray(image.get_array(), dtype=float)


def test_task_traffic_map_holds_every_edge_and_off_block_cells_are_the_inter_node_traffic():
    graph, cluster = long_names_graph(), long_names_cluster()
    placement = random_placement(graph, cluster, 6)
    matrix = shown_matrix(pictures.traffic_and_load(graph, cluster, placement))
    assert matrix.sum() == pytest.approx(graph.rate.sum())
    order = np.lexsort((graph.task_rank, graph.task_operator, placement.worker_of, placement.node_of))
    node = placement.node_of[order]  # rows and columns in the drawn order
    off_block = node[:, None] != node[None, :]
    assert matrix[off_block].sum() == pytest.approx(inter_node_traffic(graph, placement))


def test_above_the_task_limit_the_map_is_node_by_node(tmp_path):
    rng = np.random.default_rng(7)
    n = pictures.MAX_PICTURE_TASKS + 50
    a, b = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
    src, dst = np.minimum(a, b)[a != b], np.maximum(a, b)[a != b]  # acyclic, as the model needs
    graph = TaskGraph.build("wide", ["op"], np.zeros(n, int), rng.uniform(0.1, 1, n), src, dst,
                            rng.lognormal(2, 1, src.size))
    cluster = workloads.cluster("high-low-20-20")
    placement = random_placement(graph, cluster, 8, workers=1)
    fig = pictures.traffic_and_load(graph, cluster, placement)
    matrix = shown_matrix(pictures.traffic_and_load(graph, cluster, placement))
    assert matrix.shape == (np.unique(placement.node_of).size,) * 2
    assert np.trace(matrix) == 0 and matrix.sum() == pytest.approx(inter_node_traffic(graph, placement))
    assert label_problems(fig) == []
    # the report draws that map, and no node view, for every placement of such a graph
    row = {"scheduler": "random", "status": "ok", **evaluate(graph, placement, cluster)}
    page = write_report(tmp_path / "wide.html", graph, cluster, [Outcome(row, placement)])[0].read_text()
    assert "too many to draw one by one" in page
    assert page.count("<figure class='picture traffic'") == 1 and "<figure class='picture nodes'" not in page


def test_replan_page_names_the_first_50_moves_and_counts_the_rest(tmp_path):
    graph, cluster = workloads.workload("payload"), workloads.cluster("heterogeneous-10")  # 80 tasks
    before = random_placement(graph, cluster, 9)
    after = Placement.build((before.node_of + 1) % cluster.n_nodes, before.worker_of)  # every task moves
    html = write_replan_report(tmp_path / "r.html", graph, cluster, before, after).read_text()
    assert f"80 of 80 tasks change node: {graph.task_label(0)}, " in html and "and 30 more." in html
    assert outlined_in_red(html, "r-after-") == set(range(80))
