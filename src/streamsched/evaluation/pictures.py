"""Matplotlib pictures for reports and experiments: bar and line charts, placement views.

Experiment charts return PNG bytes (the Agg back-end, no display). The report's pictures
(:func:`node_view`, :func:`traffic_and_load`, :func:`before_after`, the overview
:func:`tradeoff` and the bar table :func:`metric_bars`) return Figures that :func:`svg` turns
into vector images, which a report inlines so that it stays one small self-contained file.
"""

from __future__ import annotations

import functools
import io
import math
from dataclasses import dataclass
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.textpath import text_to_path  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from streamsched.model.cluster import Cluster  # noqa: E402
from streamsched.model.placement import NO_WORKER, Placement  # noqa: E402
from streamsched.model.taskgraph import TaskGraph  # noqa: E402

#: Above this many tasks a placement picture is unreadable; reports say so instead.
MAX_PICTURE_TASKS = 400


def png(fig, dpi: int = 80, tight: bool = True) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return buffer.getvalue()


def node_colours(n: int) -> list:
    cmap = plt.get_cmap("tab20" if n > 10 else "tab10")
    return [cmap(i % cmap.N) for i in range(n)]


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float | None], unit: str = "",
              paper: Sequence[float | None] | None = None) -> bytes:
    """One bar per label (missing values drawn as an empty slot marked 'n/a'); optional paper
    values as black diamonds beside ours."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(labels) + 1.5), 3.0))
    x = np.arange(len(labels))
    heights = [v if v is not None and math.isfinite(v) else 0.0 for v in values]
    bars = ax.bar(x, heights, color="#4c72b0")
    for xi, v, bar in zip(x, values, bars):
        if v is None or not math.isfinite(v):
            ax.annotate("n/a", (xi, 0), ha="center", va="bottom", fontsize=8, color="#a00")
        else:
            ax.annotate(f"{v:.3g}", (xi, bar.get_height()), ha="center", va="bottom", fontsize=7)
    if paper is not None and any(p is not None for p in paper):
        px = [xi for xi, p in zip(x, paper) if p is not None]
        ax.scatter(px, [p for p in paper if p is not None], marker="D", color="black", zorder=3, label="paper")
        ax.legend(fontsize=7)
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    if unit:
        ax.set_ylabel(unit, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return png(fig)


def line_chart(title: str, x: Sequence[float], series: dict[str, Sequence[float | None]], xlabel: str,
               ylabel: str, log_y: bool = False, dashed: Sequence[str] = ()) -> bytes:
    """One line per series (``None`` points skipped); series named in ``dashed`` are dashed."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for name, ys in series.items():
        pts = [(xi, y) for xi, y in zip(x, ys) if y is not None and math.isfinite(y)]
        if pts:
            ax.plot(*zip(*pts), marker="o", markersize=3, label=name, linestyle="--" if name in dashed else "-")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return png(fig)


# --------------------------------------------------------------- placement pictures (SVG)
#
# Drawn in points (one axes unit = one point, y growing downwards) so that every box is sized
# from the measured width of the text it holds, in DejaVu Sans (matplotlib's font; the SVG names
# it first, then Vera, of the same widths, then the browser's sans-serif). Text stays text in
# the SVG, which keeps a report of every scheduler small (docs/benchmarks.md). Every label has
# the gid ``<prefix>...-label-<id>`` and, when it sits in a box, that box ``<prefix>...-box-<id>``.

#: Width of a node view (points): beside the traffic map it fits a 1280 px page.
NODE_VIEW_WIDTH = 470.0
#: Task label font sizes (points): the largest that fits; below the smallest, labels are shortened.
LABEL_FONT_MAX, LABEL_FONT_MIN = 7.0, 4.5
#: Outline of moved tasks in the before/after view.
MOVED_COLOUR = "#d62728"
#: The head-to-head picture shows at most this many nodes (those sending the most to other nodes).
VERSUS_MAX_NODES = 16
#: Colours of the recommended placement and the baseline in the head-to-head picture.
VERSUS_COLOURS = ("#2b7bba", "#9a9a9a")
_ELLIPSIS = "\u2026"
#: Hinted renderers set small text up to about 4 % wider than its outline (Agg at 300 dpi).
TEXT_SLACK = 1.06
_SVG_STYLE = {"svg.hashsalt": "streamsched", "svg.fonttype": "none",
              "font.sans-serif": ["DejaVu Sans", "Bitstream Vera Sans"]}


def _new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` points outside pyplot (no global registry to close),
    on an Agg canvas for measuring; :func:`svg` writes it."""
    fig = Figure(figsize=(width / 72, height / 72))
    FigureCanvasAgg(fig)
    return fig


def svg(fig: Figure) -> str:
    """The figure as an SVG document (text as text, deterministic ids, no date)."""
    buffer = io.StringIO()
    with plt.rc_context(_SVG_STYLE):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


@functools.lru_cache(maxsize=4096)
def _width_at_10pt(text: str, bold: bool) -> float:
    prop = FontProperties(size=10, weight="bold" if bold else "normal")
    return text_to_path.get_text_width_height_descent(text, prop, ismath=False)[0]


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Room in points that ``text`` needs at ``size`` points: its outline width (which scales
    linearly) plus :data:`TEXT_SLACK` for renderers that round glyph advances (hinting)."""
    return _width_at_10pt(text, bold) * size / 10 * TEXT_SLACK


def shorten(text: str, size: float, width: float, bold: bool = False) -> str:
    """``text`` if it fits ``width`` points at ``size``, else its head cut with an ellipsis
    (a trailing ``[rank]`` kept while it fits), down to the ellipsis alone."""
    if text_width(text, size, bold) <= width:
        return text
    cut = text.rfind("[")
    head, tail = (text[:cut], text[cut:]) if cut > 0 else (text, "")
    for keep in (tail, ""):
        for k in range(len(head) - 1, -1, -1):
            short = head[:k] + _ELLIPSIS + keep
            if text_width(short, size, bold) <= width:
                return short
    return _ELLIPSIS


@dataclass(frozen=True)
class _NodeViewLayout:
    """Positions (points, y down) of every node, worker and task box of one placement."""

    width: float
    height: float
    font: float
    nodes: list  # (node, x, y, w, h, header, outgoing: "" when it does not fit beside the header)
    workers: list  # (node, worker, x, y, w, h, header)
    tasks: list  # (task, x, y, w, h, label)


def _grouped_tasks(graph: TaskGraph, placement: Placement) -> dict[int, list[tuple[int, np.ndarray]]]:
    """Used node -> [(worker, its tasks ordered by operator and rank)], nodes and workers ascending."""
    order = np.lexsort((graph.task_rank, graph.task_operator, placement.worker_of, placement.node_of))
    grouped: dict[int, list[tuple[int, np.ndarray]]] = {}
    for k in np.unique(placement.node_of).tolist():
        on_node = order[placement.node_of[order] == k]
        grouped[k] = [(w, on_node[placement.worker_of[on_node] == w])
                      for w in sorted(set(placement.worker_of[on_node].tolist()))]
    return grouped


def _worker_name(worker: int) -> str:
    return "no worker" if worker == NO_WORKER else f"worker {worker}"


def node_view_layout(graph: TaskGraph, cluster: Cluster, placement: Placement,
                     width: float = NODE_VIEW_WIDTH) -> _NodeViewLayout:
    """Node boxes in a grid, worker boxes stacked in each, task boxes in rows in each worker.

    Every box is sized from the measured width of its label: the largest font from
    :data:`LABEL_FONT_MAX` down to :data:`LABEL_FONT_MIN` at which the widest label fits one
    node column; the column count is the one giving the shortest picture. Labels still too
    wide at the smallest font (very long operator names) are shortened with an ellipsis.
    """
    grouped = _grouped_tasks(graph, placement)
    labels = {t: graph.task_label(t) for t in range(graph.n_tasks)}
    node = placement.node_of
    leaving = (node[graph.src] != node[graph.dst]) & (node[graph.src] >= 0) & (node[graph.dst] >= 0)
    sent = np.bincount(node[graph.src][leaving], weights=graph.rate[leaving], minlength=cluster.n_nodes)
    outgoing = {k: f"{rate_text(sent[k])}/s out" for k in grouped if k >= 0 and sent[k] > 0}
    widest = max(labels.values(), key=lambda s: text_width(s, 10)) if labels else ""
    best = None
    for font in np.arange(LABEL_FONT_MAX, LABEL_FONT_MIN - 1e-9, -0.5).tolist():
        for columns in range(1, min(len(grouped), 8) + 1):
            layout = _grid(grouped, cluster, labels, outgoing, width, font, columns, text_width(widest, font))
            if layout is not None and (best is None or layout.height < best.height):
                best = layout
        if best is not None:
            return best
    return _grid(grouped, cluster, labels, outgoing, width, LABEL_FONT_MIN, 1, None)


def rate_text(rate: float) -> str:
    """A rate in three significant digits with k/M/G for thousands: 950, 12.3k, 4.5M."""
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= factor:
            return f"{rate / factor:.3g}{suffix}"
    return f"{rate:.3g}"


def _grid(grouped, cluster: Cluster, labels: dict[int, str], outgoing: dict[int, str], width: float, font: float,
          columns: int, label_width: float | None) -> _NodeViewLayout | None:
    """The layout at one font and column count; None when a task label would not fit.
    ``label_width`` None: cells take the whole worker width and labels are shortened to it.
    A node's header is its name and, when both fit, the tuples/s it sends to other nodes."""
    pad, gap, wpad, tgap = 0.6 * font, font, 0.4 * font, 0.35 * font
    head_font, worker_font = 1.1 * font, 0.9 * font
    head_h, worker_head_h, cell_h = 1.7 * font, 1.5 * font, 2.0 * font
    node_w = (width - (columns + 1) * gap) / columns
    inner = node_w - 2 * pad - 2 * wpad
    cell_w = inner if label_width is None else label_width + 1.2 * font
    per_row = int((inner + tgap) // (cell_w + tgap))
    if per_row < 1:
        return None
    nodes, workers, tasks = [], [], []
    y, row_h = gap, 0.0
    for i, (k, members) in enumerate(grouped.items()):
        if i % columns == 0 and i:
            y, row_h = y + row_h + gap, 0.0
        x = gap + (i % columns) * (node_w + gap)
        wy = y + pad + head_h
        for w, ts in members:
            rows = math.ceil(ts.size / per_row)
            wh = worker_head_h + rows * (cell_h + tgap) - tgap + wpad
            workers.append((k, w, x + pad, wy, node_w - 2 * pad, wh,
                            shorten(_worker_name(w), worker_font, node_w - 2 * pad - 2 * wpad)))
            for j, t in enumerate(ts.tolist()):
                tx = x + pad + wpad + (j % per_row) * (cell_w + tgap)
                ty = wy + worker_head_h + (j // per_row) * (cell_h + tgap)
                tasks.append((t, tx, ty, cell_w, cell_h, shorten(labels[t], font, cell_w - 0.8 * font)))
            wy += wh + wpad
        node_h = wy - y - wpad + pad
        header = shorten(cluster.nodes[k].name if k >= 0 else "new", head_font, node_w - 2 * pad, bold=True)
        out = outgoing.get(k, "")
        if text_width(header, head_font, bold=True) + font + text_width(out, worker_font) > node_w - 2 * pad:
            out = ""
        nodes.append((k, x, y, node_w, node_h, header, out))
        row_h = max(row_h, node_h)
    return _NodeViewLayout(width, y + row_h + gap, font, nodes, workers, tasks)


def _points_axes(fig, x: float, y: float, w: float, h: float, fig_w: float, fig_h: float):
    """An axes covering (x, y, w, h) points of the figure (y from the top), one unit per point."""
    ax = fig.add_axes((x / fig_w, 1 - (y + h) / fig_h, w / fig_w, h / fig_h))
    ax.set_xlim(0, w)
    ax.set_ylim(h, 0)
    ax.axis("off")
    return ax


def _light(colour, share: float = 0.2):
    """``colour`` blended with white (``share`` of the colour kept)."""
    r, g, b = matplotlib.colors.to_rgb(colour)
    return (1 - share * (1 - r), 1 - share * (1 - g), 1 - share * (1 - b))


def _task_traffic(graph: TaskGraph) -> np.ndarray:
    """Tuples/s each task sends plus receives."""
    return (np.bincount(graph.src, weights=graph.rate, minlength=graph.n_tasks)
            + np.bincount(graph.dst, weights=graph.rate, minlength=graph.n_tasks))


def draw_node_view(ax, graph: TaskGraph, cluster: Cluster, layout: _NodeViewLayout, prefix: str = "",
                   moved: Sequence[int] = ()) -> None:
    """Draw ``layout`` on a points axes: node boxes in their node colour, task boxes shaded by
    the task's traffic (darkest = the busiest task), ``moved`` tasks outlined in red."""
    colours = node_colours(cluster.n_nodes)
    f = layout.font
    for k, x, y, w, h, header, out in layout.nodes:
        colour = colours[k] if k >= 0 else "#7f7f7f"  # k = -1: tasks a re-plan places for the first time
        ax.add_artist(Rectangle((x, y), w, h, facecolor=_light(colour), edgecolor=colour, linewidth=0.8,
                               clip_on=False, gid=f"{prefix}node-box-{k}"))
        ax.text(x + 0.6 * f, y + 0.6 * f + 0.85 * f, header, fontsize=1.1 * f, weight="bold", va="center",
                clip_on=False, gid=f"{prefix}node-label-{k}")
        if out:
            ax.text(x + w - 0.6 * f, y + 0.6 * f + 0.85 * f, out, fontsize=0.9 * f, ha="right", va="center",
                    color="#555555", clip_on=False, gid=f"{prefix}node-out-label-{k}")
    for k, wk, x, y, w, h, header in layout.workers:
        ax.add_artist(Rectangle((x, y), w, h, facecolor="white", edgecolor="#999999", linewidth=0.5,
                               clip_on=False, gid=f"{prefix}worker-box-{k}-{wk}"))
        ax.text(x + 0.4 * f, y + 0.75 * f, header, fontsize=0.9 * f, va="center", color="#555555",
                clip_on=False, gid=f"{prefix}worker-label-{k}-{wk}")
    traffic = _task_traffic(graph)
    shade = traffic / traffic.max() if traffic.size and traffic.max() > 0 else np.zeros(graph.n_tasks)
    cmap = plt.get_cmap("Blues")
    moved_set = set(int(t) for t in moved)
    for t, x, y, w, h, label in layout.tasks:
        face = cmap(0.08 + 0.8 * shade[t])
        is_moved = t in moved_set
        ax.add_artist(Rectangle((x, y), w, h, facecolor=face, linewidth=1.6 if is_moved else 0.4,
                               edgecolor=MOVED_COLOUR if is_moved else "#666666", clip_on=False,
                               gid=f"{prefix}task-box-{t}"))
        dark = sum(matplotlib.colors.to_rgb(face)) < 1.5
        ax.text(x + w / 2, y + h / 2, label, fontsize=f, ha="center", va="center",
                color="white" if dark else "black", clip_on=False, gid=f"{prefix}task-label-{t}")


def node_view(graph: TaskGraph, cluster: Cluster, placement: Placement, prefix: str = "",
              moved: Sequence[int] = ()):
    """One placement as nodes holding workers holding tasks (a Figure, one unit per point)."""
    layout = node_view_layout(graph, cluster, placement)
    fig = _new_figure(layout.width, layout.height)
    ax = _points_axes(fig, 0, 0, layout.width, layout.height, layout.width, layout.height)
    draw_node_view(ax, graph, cluster, layout, prefix, moved)
    return fig


def moved_tasks(before: Placement, after: Placement) -> np.ndarray:
    """Tasks whose node changed (a task new in ``before``, node -1, is not counted)."""
    return np.flatnonzero((before.node_of >= 0) & (before.node_of != after.node_of))


def before_after(graph: TaskGraph, cluster: Cluster, before: Placement, after: Placement, prefix: str = ""):
    """The running placement and the re-planned one side by side, every moved task outlined in
    red in both (:func:`moved_tasks`)."""
    moved = moved_tasks(before, after).tolist()
    layouts = [node_view_layout(graph, cluster, p) for p in (before, after)]
    title_h, gap = 16.0, 12.0
    fig_w = sum(lay.width for lay in layouts) + gap
    fig_h = title_h + max(lay.height for lay in layouts)
    fig = _new_figure(fig_w, fig_h)
    titles = ("before (running)", f"after (re-planned): {len(moved)} of {graph.n_tasks} tasks moved (red)")
    x = 0.0
    for side, layout, title in zip(("before-", "after-"), layouts, titles):
        head = _points_axes(fig, x, 0, layout.width, title_h, fig_w, fig_h)
        head.text(layout.font, title_h / 2, shorten(title, 9, layout.width - 2 * layout.font), fontsize=9,
                  va="center", gid=f"{prefix}{side}title-label-0")
        ax = _points_axes(fig, x, title_h, layout.width, layout.height, fig_w, fig_h)
        draw_node_view(ax, graph, cluster, layout, prefix + side, moved)
        x += layout.width + gap
    return fig


def traffic_and_load(graph: TaskGraph, cluster: Cluster, placement: Placement,
                     cpu_utilisation: np.ndarray | None = None, nic_utilisation: np.ndarray | None = None,
                     prefix: str = ""):
    """Top: the task x task traffic matrix (sender row, receiver column, darker = more tuples/s)
    ordered by node, worker and operator, node blocks outlined: traffic outside the diagonal
    blocks crosses nodes and a hot task is a dark row. Above :data:`MAX_PICTURE_TASKS` tasks,
    the node x node matrix of the used nodes instead (its diagonal, traffic kept on a node,
    left blank). Bottom: per node, placed load against capacity and, when given, the model's
    predicted CPU and network card utilisation (bars; the line is 100 %). Drawn on one points
    axes (no tick machinery: a picture per placement stays cheap)."""
    font, width, heat = 6.5, 330.0, 220.0
    bar_row = 10.4 + 1.6 * sum(u is not None for u in (cpu_utilisation, nic_utilisation))
    names = [shorten(node.name, font, 70) for node in cluster.nodes]
    left = max(text_width(n, font) for n in names) + 8
    heat = min(heat, width - left - 6)
    bars_top = 18 + heat + 34
    fig_h = bars_top + bar_row * cluster.n_nodes + 22
    fig = _new_figure(width, fig_h)
    ax = _points_axes(fig, 0, 0, width, fig_h, width, fig_h)
    if graph.n_tasks <= MAX_PICTURE_TASKS:
        order = np.lexsort((graph.task_rank, graph.task_operator, placement.worker_of, placement.node_of))
        row_of = np.empty(graph.n_tasks, dtype=np.int64)
        row_of[order] = np.arange(graph.n_tasks)
        row_node = placement.node_of[order]
        title = "task x task traffic by node (row sends to column; darker = more tuples/s)"
    else:
        row_node = np.unique(placement.node_of)
        row_of = np.searchsorted(row_node, placement.node_of)
        title = "node x node traffic (row sends to column; darker = more tuples/s; diagonal blank)"
    rows = row_node.size
    matrix = np.bincount(row_of[graph.src] * rows + row_of[graph.dst], weights=graph.rate,
                         minlength=rows * rows).reshape(rows, rows)
    if graph.n_tasks > MAX_PICTURE_TASKS:
        np.fill_diagonal(matrix, 0.0)
    peak = matrix.max() if matrix.size and matrix.max() > 0 else 1.0
    ax.text(4, 10, shorten(title, 7, width - 8), fontsize=7, va="center", gid=f"{prefix}heat-title-label-0")
    ax.imshow(matrix, cmap="Greys", norm=matplotlib.colors.PowerNorm(0.5, vmin=0, vmax=peak), interpolation="nearest",
              extent=(left, left + heat, 18 + heat, 18), aspect="auto")
    ax.add_artist(Rectangle((left, 18), heat, heat, fill=False, edgecolor="#666666", linewidth=0.5))
    cell = heat / max(rows, 1)
    cuts = np.flatnonzero(np.diff(row_node)) + 1
    ax.add_artist(LineCollection([[(left + c * cell, 18), (left + c * cell, 18 + heat)] for c in cuts]
                                 + [[(left, 18 + c * cell), (left + heat, 18 + c * cell)] for c in cuts],
                                 colors="#1f77b4", linewidths=0.5))
    for start, end in zip(np.r_[0, cuts], np.r_[cuts, rows]):
        if (end - start) * cell >= 1.4 * font:
            k = int(row_node[start])
            ax.text(left - 3, 18 + (start + end) / 2 * cell, names[k], fontsize=font, ha="right", va="center",
                    gid=f"{prefix}heat-label-{k}")
    load = np.bincount(placement.node_of, weights=graph.load, minlength=cluster.n_nodes)
    with np.errstate(divide="ignore", invalid="ignore"):
        series = [(np.where(cluster.capacity > 0, 100 * load / cluster.capacity, 0.0),
                   f"load / capacity ({cluster.capacity_unit})", "#4c72b0")]
    for values, label, colour in ((cpu_utilisation, "predicted CPU", "#dd8452"),
                                  (nic_utilisation, "predicted network", "#55a868")):
        if values is not None:
            series.append((np.nan_to_num(100 * np.asarray(values, dtype=float), nan=0.0, posinf=1e9), label, colour))
    # beyond 300 % (an infinite demand on a zero capacity) a bar runs to the edge
    top = min(max(110.0, max(float(values.max()) for values, _, _ in series) * 1.05), 300.0)
    scale = (width - left - 8) / top
    ax.text(4, bars_top - 14, "% of capacity per node", fontsize=7, va="center", gid=f"{prefix}bars-title-label-0")
    x = width - 8
    for values, label, colour in reversed(series):
        x -= text_width(label, 5.5) + 2
        ax.text(x, bars_top - 14, label, fontsize=5.5, va="center", gid=f"{prefix}legend-label-{colour[1:]}")
        x -= 9
        ax.add_artist(Rectangle((x, bars_top - 17), 7, 6, color=colour))
        x -= 6
    thickness = (bar_row - 2) / len(series)
    for k in range(cluster.n_nodes):
        y = bars_top + k * bar_row
        ax.text(left - 3, y + bar_row / 2, names[k], fontsize=font, ha="right", va="center",
                gid=f"{prefix}util-label-{k}")
        for i, (values, _, colour) in enumerate(series):
            over = values[k] > 100 + 1e-6
            ax.add_artist(Rectangle((left, y + 1 + i * thickness), min(values[k], top) * scale, thickness,
                                    color="#d62728" if over and i == 0 else colour))
    bottom = bars_top + cluster.n_nodes * bar_row
    ax.add_artist(Line2D([left, left], [bars_top, bottom], color="#666666", linewidth=0.5))
    ax.add_artist(Line2D([left + 100 * scale] * 2, [bars_top - 2, bottom + 2], color="black", linewidth=0.7))
    for tick in (0, 50, 100):
        ax.text(left + tick * scale, bottom + 8, f"{tick} %", fontsize=5.5, ha="center", va="center",
                gid=f"{prefix}tick-label-{tick}")
    return fig


def tradeoff(rows: Sequence[dict], prefix: str = ""):
    """Every placement as a point, inter-node traffic (x) against predicted throughput (y),
    the traffic/throughput Pareto front as a line. Names (with nodes
    used) sit in a column on the right, one line apart and joined to their points, so none
    overlaps another; schedulers at the same point share a label."""
    points: dict[tuple[float, float], list[str]] = {}
    used: dict[tuple[float, float], int] = {}
    for row in rows:
        x, y = row.get("inter_node_traffic"), row.get("throughput_tps")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (x, y)):
            continue
        key = (float(f"{x:.6g}"), float(f"{y:.6g}"))
        points.setdefault(key, []).append(str(row["scheduler"]))
        used[key] = int(row.get("nodes_used") or 0)
    font, width, plot_w, column = 7.0, 560.0, 330.0, 170.0
    line_h = 1.45 * font
    labels = [(key, _wrap(", ".join(names) + f": {used[key]} nodes", font, column)) for key, names in points.items()]
    needed = sum(len(lines) * line_h + 2 for _, lines in labels)
    plot_h = max(200.0, needed)
    fig_h = plot_h + 50
    fig = _new_figure(width, fig_h)
    ax = fig.add_axes((45 / width, 32 / fig_h, plot_w / width, plot_h / fig_h))
    if not points:
        ax.text(0.5, 0.5, "no placement to show", ha="center", transform=ax.transAxes)
        return fig
    keys = list(points)
    xs, ys = np.array([k[0] for k in keys]), np.array([k[1] for k in keys])
    ax.scatter(xs, ys, color=VERSUS_COLOURS[0], s=28, edgecolors="black", linewidths=0.4, zorder=3)
    front = sorted(keys, key=lambda k: (k[0], -k[1]))
    pareto, best = [], -math.inf
    for k in front:
        if k[1] > best:
            pareto.append(k)
            best = k[1]
    ax.step([k[0] for k in pareto], [k[1] for k in pareto], where="post", color="#d62728", linewidth=1.8,
            zorder=2, label="Pareto front (less traffic, more throughput)")
    ax.set_xlabel("inter-node traffic (tuples/s)", fontsize=7)
    ax.set_ylabel("predicted throughput (tuples/s)", fontsize=7)
    ax.set_title("better: up (more throughput) and left (less traffic)", fontsize=7, loc="left")
    ax.tick_params(labelsize=6)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="best")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(EngFormatter(sep=""))
    x_span, y_span = np.ptp(xs) or max(abs(xs[0]), 1.0), np.ptp(ys) or max(abs(ys[0]), 1.0)
    ax.set_xlim(xs.min() - 0.08 * x_span, xs.max() + 0.08 * x_span)
    ax.set_ylim(ys.min() - 0.08 * y_span, ys.max() + 0.08 * y_span)
    _label_column(fig, ax, labels, font, line_h, width - column - 4, fig_h, prefix)
    return fig


def _wrap(text: str, font: float, width: float) -> list[str]:
    """``text`` broken after commas into lines no wider than ``width`` points (a single name
    wider than that is shortened)."""
    lines: list[str] = []
    for word in text.split(", "):
        candidate = f"{lines[-1]}, {word}" if lines else word
        if lines and text_width(candidate, font) <= width:
            lines[-1] = candidate
        else:
            lines.append(shorten(word, font, width))
    return lines


def _label_column(fig, ax, labels, font: float, line_h: float, column_x: float, fig_h: float, prefix: str) -> None:
    """Place the labels in a column at ``column_x`` points, each as near its point's height as
    the labels above and below allow (a top-down then bottom-up sweep), with a leader line."""
    to_points = fig.dpi_scale_trans.inverted() + matplotlib.transforms.Affine2D().scale(72)
    anchors = [ax.transData.transform(key) for key, _ in labels]
    anchors_pt = [(to_points.transform(a)[0], fig_h - to_points.transform(a)[1]) for a in anchors]
    order = sorted(range(len(labels)), key=lambda i: anchors_pt[i][1])
    heights = [len(labels[i][1]) * line_h for i in order]
    tops = []
    floor = 4.0
    for i, h in zip(order, heights):
        top = max(anchors_pt[i][1] - h / 2, floor)
        tops.append(top)
        floor = top + h + 2
    ceiling = fig_h - 4
    for j in range(len(order) - 1, -1, -1):
        tops[j] = min(tops[j], ceiling - heights[j])
        ceiling = tops[j] - 2
    for j, i in enumerate(order):
        (key, lines), (px, py) = labels[i], anchors_pt[i]
        mid = tops[j] + heights[j] / 2
        fig_w = fig.get_figwidth() * 72
        fig.add_artist(Line2D([px / fig_w, (column_x - 3) / fig_w], [1 - py / fig_h, 1 - mid / fig_h],
                              color="#999999", linewidth=0.4))
        fig.text(column_x / fig_w, 1 - mid / fig_h, "\n".join(lines), fontsize=font,
                 va="center", linespacing=1.15, gid=f"{prefix}tradeoff-label-{i}")


def metric_bars(names: Sequence[str], columns: Sequence[tuple[str, Sequence[float | None]]], prefix: str = ""):
    """A bar table: one row per name, one column per metric (heading, values); each bar is the
    value against the column's largest, the value written beside it ('n/a' when missing)."""
    font, row_h, column_w, gap = 6.5, 12.0, 118.0, 8.0
    name_w = max([text_width(n, font) for n in names] + [20.0]) + 8
    headings = [_wrap_words(heading, font, column_w - gap) for heading, _ in columns]
    head_h = max(len(h) for h in headings) * 1.45 * font + 6
    width = name_w + len(columns) * column_w
    fig_h = head_h + row_h * len(names) + 4
    fig = _new_figure(width, fig_h)
    ax = _points_axes(fig, 0, 0, width, fig_h, width, fig_h)
    for r, name in enumerate(names):
        y = head_h + r * row_h
        if r % 2 == 0:
            ax.add_artist(Rectangle((0, y), width, row_h, color="#f2f2f7", linewidth=0))
        ax.text(name_w - 4, y + row_h / 2, name, fontsize=font, ha="right", va="center",
                gid=f"{prefix}name-label-{r}")
    for c, ((_, values), heading) in enumerate(zip(columns, headings)):
        x = name_w + c * column_w
        ax.text(x, head_h - 3, "\n".join(heading), fontsize=font, va="bottom", linespacing=1.2, weight="bold",
                gid=f"{prefix}heading-label-{c}")
        finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
        peak = max(finite) if finite and max(finite) > 0 else 1.0
        texts = [_short_number(v) for v in values]
        bar_room = column_w - gap - max(text_width(t, font) for t in texts) - 3
        for r, (value, text) in enumerate(zip(values, texts)):
            y = head_h + r * row_h
            length = abs(value) / peak * bar_room if value is not None and math.isfinite(value) else 0.0
            ax.add_artist(Rectangle((x, y + 2), length, row_h - 4, color="#4c72b0", linewidth=0))
            ax.text(x + length + 2, y + row_h / 2, text, fontsize=font, va="center",
                    color="#a00000" if text == "n/a" else "black", gid=f"{prefix}value-label-{c}-{r}")
    return fig


def _short_number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a" if value is None or math.isnan(value) else "unbounded"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _wrap_words(text: str, font: float, width: float) -> list[str]:
    """``text`` broken between words into lines no wider than ``width`` points."""
    lines: list[str] = []
    for word in text.split():
        candidate = f"{lines[-1]} {word}" if lines else word
        if lines and text_width(candidate, font, bold=True) <= width:
            lines[-1] = candidate
        else:
            lines.append(shorten(word, font, width, bold=True))
    return lines



def versus(graph: TaskGraph, cluster: Cluster, sides: Sequence[tuple[str, Placement, np.ndarray | None]],
           prefix: str = ""):
    """The recommended placement against the baseline, node by node: left, the tuples/s each
    node sends to other nodes (the inter-node traffic of i-scheduler.txt eq. 3 split by sender);
    right, the model's predicted CPU use of each node. ``sides`` are (name, placement, predicted
    CPU utilisation or None), one or two; the legend gives each one's total traffic. Above
    :data:`VERSUS_MAX_NODES` nodes, the nodes sending most under either placement."""
    font, width, line = 7.0, 380.0, 11.0
    sent = []
    for _, placement, _ in sides:
        node = placement.node_of
        leaving = (node[graph.src] != node[graph.dst]) & (node[graph.src] >= 0) & (node[graph.dst] >= 0)
        sent.append(np.bincount(node[graph.src][leaving], weights=graph.rate[leaving], minlength=cluster.n_nodes))
    busiest = np.max(sent, axis=0)
    shown = np.arange(cluster.n_nodes)
    if shown.size > VERSUS_MAX_NODES:
        shown = np.sort(np.argsort(-busiest, kind="stable")[:VERSUS_MAX_NODES])
    names = [shorten(cluster.nodes[k].name, font, 70) for k in shown.tolist()]
    left = max(text_width(n, font) for n in names) + 8
    gap = 14.0
    panel = (width - left - gap - 6) / 2
    bar_row = max(1.5 * font, 3.0 + 4.5 * len(sides))
    legend_h = line * len(sides) + 4
    top = legend_h + line + 4
    fig_h = top + bar_row * shown.size + 16 + (line if shown.size < cluster.n_nodes else 0)
    fig = _new_figure(width, fig_h)
    ax = _points_axes(fig, 0, 0, width, fig_h, width, fig_h)
    for i, ((name, _, _), colour) in enumerate(zip(sides, VERSUS_COLOURS)):
        y = 2 + i * line + line / 2
        ax.add_artist(Rectangle((4, y - 3), 8, 6, color=colour))
        text = f"{name}: {rate_text(sent[i].sum())} tuples/s between nodes"
        ax.text(16, y, shorten(text, font, width - 20), fontsize=font, va="center", gid=f"{prefix}vs-legend-label-{i}")
    x_cpu = left + panel + gap
    for x, title, gid in ((left, "sent to other nodes (tuples/s)", "traffic"),
                          (x_cpu, "predicted CPU use (% of node)", "cpu")):
        ax.text(x, legend_h + line / 2 + 2, shorten(title, font, panel), fontsize=font, va="center", weight="bold",
                gid=f"{prefix}vs-{gid}-title-label-0")
    peak = float(busiest.max()) if busiest.max() > 0 else 1.0
    cpu_values = [None if cpu is None else np.nan_to_num(100 * np.asarray(cpu, float), nan=0.0, posinf=1e9)
                  for _, _, cpu in sides]
    cpu_top = min(max([110.0] + [float(v[shown].max()) * 1.05 for v in cpu_values if v is not None]), 300.0)
    thickness = (bar_row - 3) / len(sides)
    for r, k in enumerate(shown.tolist()):
        y = top + r * bar_row
        ax.text(left - 3, y + bar_row / 2, names[r], fontsize=font, ha="right", va="center",
                gid=f"{prefix}vs-node-label-{k}")
        for i, colour in enumerate(VERSUS_COLOURS[:len(sides)]):
            yi = y + 1.5 + i * thickness
            ax.add_artist(Rectangle((left, yi), sent[i][k] / peak * panel, thickness, color=colour, linewidth=0))
            if cpu_values[i] is not None:
                ax.add_artist(Rectangle((x_cpu, yi), min(cpu_values[i][k], cpu_top) / cpu_top * panel, thickness,
                                        color=colour, linewidth=0))
    bottom = top + shown.size * bar_row
    for x in (left, x_cpu):
        ax.add_artist(Line2D([x, x], [top, bottom], color="#666666", linewidth=0.5))
    ax.add_artist(Line2D([x_cpu + 100 / cpu_top * panel] * 2, [top - 1, bottom + 1], color="black", linewidth=0.6))
    for value, text, anchor in ((0.0, "0", "left"), (peak, rate_text(peak), "right")):
        ax.text(left + value / peak * panel, bottom + 7, text, fontsize=5.5, ha=anchor, va="center",
                gid=f"{prefix}vs-traffic-tick-label-{anchor}")
    for tick in (0, 100):
        ax.text(x_cpu + tick / cpu_top * panel, bottom + 7, f"{tick} %", fontsize=5.5, ha="center", va="center",
                gid=f"{prefix}vs-cpu-tick-label-{tick}")
    if shown.size < cluster.n_nodes:
        ax.text(4, bottom + 7 + line, f"the {shown.size} of {cluster.n_nodes} nodes sending most to other nodes",
                fontsize=font, va="center", gid=f"{prefix}vs-note-label-0")
    return fig


#: How the live loop's timeline marks a window's decision: colour and line style.
DECISION_MARKS = {"apply": ("#d62728", "-"), "apply-failed": ("#7f7f7f", "-"), "would-apply": ("#ff7f0e", "--")}


def loop_timeline(rows: Sequence[dict], prefix: str = "") -> Figure:
    """The live loop's journal over time (x: seconds since the first window's end): measured
    source records/s and remote bytes/s per window (the current placement's predicted
    throughput dashed where known), each apply (red line), dry-run proposal (orange dashed) and
    failed apply (grey) marked at its window, cluster-file changes as dotted lines, and the
    windows that overlapped an apply shaded."""
    ends = [row["window"]["end"] for row in rows]
    origin = ends[0] if ends else 0.0
    x = [e - origin for e in ends]
    fig = _new_figure(560, 330)
    top = fig.add_subplot(2, 1, 1)
    bottom = fig.add_subplot(2, 1, 2, sharex=top)
    measured = [(row.get("measured") or {}).get("throughput") for row in rows]
    predicted = [(row.get("current") or {}).get("predicted") if row.get("basis") == "throughput" else None
                 for row in rows]
    remote = [(row.get("measured") or {}).get("remote_bytes_per_s") for row in rows]
    for ax, values, label, style in ((top, measured, "measured source records/s", "-"),
                                     (top, predicted, "predicted for the running placement", "--"),
                                     (bottom, remote, "measured remote bytes/s", "-")):
        pts = [(xi, v) for xi, v in zip(x, values) if v is not None and math.isfinite(v)]
        if pts:
            ax.plot(*zip(*pts), marker="o", markersize=3, linestyle=style, label=label)
    for xi, row in zip(x, rows):
        mark = DECISION_MARKS.get(row.get("decision"))
        for ax in (top, bottom):
            if mark:
                ax.axvline(xi, color=mark[0], linestyle=mark[1], linewidth=1.2)
            if row.get("cluster_changed"):
                ax.axvline(xi, color="#555555", linestyle=":", linewidth=1.0)
            if row.get("decision") == "settling":
                ax.axvspan(xi - row["window"]["seconds"], xi, color="#d62728", alpha=0.08, linewidth=0)
    top.plot([], [], color=DECISION_MARKS["apply"][0], label="apply")
    top.plot([], [], color="#555555", linestyle=":", label="cluster file changed")
    top.set_ylabel("records/s", fontsize=8)
    bottom.set_ylabel("bytes/s", fontsize=8)
    bottom.set_xlabel("seconds since the first window's end (one point per window)", fontsize=8)
    for ax in (top, bottom):
        ax.yaxis.set_major_formatter(EngFormatter())
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    top.legend(fontsize=6, loc="lower left")
    bottom.legend(fontsize=6, loc="lower left")
    fig.subplots_adjust(left=0.12, right=0.98, top=0.97, bottom=0.13, hspace=0.12)
    fig.set_gid(f"{prefix}loop-timeline")
    return fig
