"""Matplotlib pictures for reports and experiments: bar charts and placement drawings.

Every function returns PNG bytes (the Agg back-end, no display), so a report can embed them
as ``data:`` URIs and stay a single self-contained file.
"""

from __future__ import annotations

import io
import math
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from streamsched.evaluation.performance import HOP_OTHER_NODE, HOP_OTHER_WORKER, HOP_SAME_WORKER, edge_hops  # noqa: E402
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


def _task_positions(graph: TaskGraph) -> np.ndarray:
    """Layered layout: x = longest-path depth, y = spread evenly, grouped by operator."""
    from streamsched.evaluation.performance import _levels

    levels, _ = _levels(graph)
    pos = np.zeros((graph.n_tasks, 2))
    for depth, tasks in enumerate(levels):
        order = tasks[np.lexsort((graph.task_rank[tasks], graph.task_operator[tasks]))]
        pos[order, 0] = depth
        pos[order, 1] = (np.arange(order.size) - (order.size - 1) / 2)
    return pos


def placement_picture(graph: TaskGraph, cluster: Cluster, placement: Placement, title: str) -> bytes:
    """Left: the task graph, tasks coloured by node, edges by hop (same worker / other worker /
    other node, red). Right: every used node as a box of its worker boxes holding task labels."""
    colours = node_colours(cluster.n_nodes)
    hops = edge_hops(graph, placement)
    pos = _task_positions(graph)
    height = max(3.0, min(12.0, 0.28 * max(np.unique(pos[:, 0], return_counts=True)[1].max(), 8)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, height), gridspec_kw={"width_ratios": [3, 2]})
    segments = np.stack([pos[graph.src], pos[graph.dst]], axis=1)
    for hop, colour, style, width in ((HOP_SAME_WORKER, "#aaaaaa", "solid", 0.6),
                                      (HOP_OTHER_WORKER, "#555555", "dashed", 0.8),
                                      (HOP_OTHER_NODE, "#d62728", "solid", 1.0)):
        chosen = hops == hop
        if chosen.any():
            left.add_collection(LineCollection(segments[chosen], colors=colour, linestyles=style,
                                               linewidths=width, zorder=1))
    node = placement.node_of
    left.scatter(pos[:, 0], pos[:, 1], s=160, c=[colours[k] for k in node], edgecolors="black", linewidths=0.5, zorder=2)
    if graph.n_tasks <= 120:
        for t in range(graph.n_tasks):
            w = placement.worker_of[t]
            left.annotate("" if w == NO_WORKER else f"w{w}", pos[t], ha="center", va="center", fontsize=6, zorder=3)
    left.set_title(f"{title}: task graph (colour = node, label = worker, red = inter-node)", fontsize=9)
    left.axis("off")
    _worker_boxes(right, graph, cluster, placement, colours)
    fig.subplots_adjust(left=0.01, right=0.99, top=0.93, bottom=0.01, wspace=0.03)
    return png(fig, tight=False)


def _worker_boxes(ax, graph: TaskGraph, cluster: Cluster, placement: Placement, colours) -> None:
    used = np.unique(placement.node_of)
    columns = max(1, math.ceil(math.sqrt(used.size * 1.5)))
    font = 6 if graph.n_tasks <= 120 else 4
    for i, k in enumerate(used.tolist()):
        cx, cy = (i % columns) * 1.1, -(i // columns) * 1.25
        ax.add_patch(FancyBboxPatch((cx, cy - 1.0), 1.0, 1.0, boxstyle="round,pad=0.01",
                                    facecolor=colours[k], alpha=0.25, edgecolor="black"))
        ax.text(cx + 0.02, cy - 0.02, cluster.nodes[k].name, fontsize=7, va="top", weight="bold")
        tasks = np.flatnonzero(placement.node_of == k)
        workers = sorted(set(placement.worker_of[tasks].tolist()))
        for j, w in enumerate(workers):
            members = tasks[placement.worker_of[tasks] == w]
            top = cy - 0.15 - j * (0.83 / len(workers))
            box_h = 0.83 / len(workers) - 0.03
            ax.add_patch(FancyBboxPatch((cx + 0.04, top - box_h), 0.92, box_h, boxstyle="round,pad=0.005",
                                        facecolor="white", alpha=0.8, edgecolor=colours[k]))
            label = "no worker" if w == NO_WORKER else f"worker {w}"
            shown = [graph.task_label(t) for t in members.tolist()[:9]]
            if members.size > 9:
                shown.append(f"+{members.size - 9} more")
            names = "\n".join(", ".join(shown[i:i + 3]) for i in range(0, len(shown), 3))
            ax.text(cx + 0.06, top - 0.01, f"{label}:\n{names}", fontsize=font, va="top")
    rows = math.ceil(used.size / columns)
    ax.set_xlim(-0.05, columns * 1.1)
    ax.set_ylim(-rows * 1.25, 0.05)
    ax.set_title("nodes (boxes) and their workers", fontsize=9)
    ax.axis("off")
