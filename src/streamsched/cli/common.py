"""What the command modules share: the common options, reading a graph, a cluster or a
placement argument, printing a summary or ``--json``. Light to import (the model and the
readers are imported when called), so that the pipeline commands load without the schedulers'
modules."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console

from streamsched.errors import InputError

if TYPE_CHECKING:
    from streamsched.model import Cluster, Placement, TaskGraph

#: 120 columns when piped (rich would default to 80 and cut the comparison table).
console = Console(width=None if sys.stdout.isatty() else 120)

WorkloadOpt = typer.Option(None, "--workload", "-w", help="built-in workload name (see `list workloads`)")
GraphOpt = typer.Option(None, "--graph", "-g", help="graph: a snapshot directory (as `ingest` prints it) or its .parquet, "
                        "a read-engine output directory, an edge list (.csv/.parquet/.json), sendgraph JSON, or topology (.yaml)")
ClusterOpt = typer.Option(None, "--cluster", "-c", help="built-in cluster name (see `list clusters`) or cluster "
                          "file; default: the cluster.yaml of a read-engine --graph directory, else homogeneous-10")
ParamOpt = typer.Option(None, "--param", "-p", help="scheduler parameter k=v (repeatable)")
JsonOpt = typer.Option(False, "--json", help="print the full result as JSON instead of a summary")


def emit(data: Any, as_json: bool, lines: list[str]) -> None:
    """``--json``: ``data`` as strict JSON (infinite or NaN figures as null); else the summary
    ``lines`` (streamsched.cli.summaries)."""
    if as_json:
        console.print_json(data=finite_or_null(data), default=str)
        return
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def finite_or_null(value: Any) -> Any:
    """``value`` with every infinite or NaN float replaced by None (JSON has no such numbers:
    a gap of inf without a bound must still print as a document every parser reads)."""
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def load_inputs(workload: Optional[str], graph: Optional[Path], cluster: Optional[str],
                units: bool = True) -> tuple[TaskGraph, Cluster]:
    """Graph and cluster of a command (:func:`streamsched.resolve.inputs`); ``units=False`` for
    commands that read a placement (its cluster is checked first, then the units)."""
    from streamsched import resolve

    return resolve.inputs(workload, graph, cluster, units=units)


def read_placement(path: Path, graph: TaskGraph, nodes: Cluster) -> Placement:
    """A placement file for ``graph`` on ``nodes``; one made for another cluster (its name, or
    its content fingerprint, differs) is refused (exit 2) rather than read by node names."""
    from streamsched.model.io import read_document
    from streamsched.model import Placement

    data = read_document(path)
    if isinstance(data, dict):
        made_for, fingerprint = data.get("cluster"), data.get("cluster_hash")
        if (isinstance(made_for, str) and made_for != nodes.name
                or isinstance(fingerprint, str) and fingerprint != nodes.fingerprint()):
            raise InputError(f"{path}: made for cluster {made_for!r} (fingerprint {fingerprint}), not {nodes.name!r} "
                             f"(fingerprint {nodes.fingerprint()}); give its cluster with --cluster")
    return Placement.from_dict(data, graph, nodes, where=str(path))


def check_output_file(path: Optional[Path], option: str = "--out") -> None:
    """Before any work: ``path`` must be writable as a file: not a directory, and its directory
    either exists or can be made (no file in the way; the writer makes it), else one line naming
    it (exit 2)."""
    if path is None:
        return
    if path.is_dir():
        raise InputError(f"{path}: Is a directory")
    check_output_dir(path.parent if str(path.parent) else Path("."), option)


def check_output_dir(directory: Path, option: str = "--out") -> None:
    """``directory`` exists as a directory or can be made: its nearest existing ancestor is a
    directory (a file in the way: one line naming it, exit 2)."""
    for ancestor in (directory, *directory.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(f"{option} {directory}: {ancestor} is a file, not a directory")
            return


def parse_params(pairs: Optional[list[str]]) -> dict[str, Any]:
    """``["k=v", ...]`` -> dict; values stay strings (schedulers coerce them by declaration)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {pair!r}: expected k=v")
        out[key.strip()] = value.strip()
    return out


def print_compare_table(task_graph: TaskGraph, nodes: Cluster, seed: int, rows: list[dict[str, Any]],
                         decision: dict[str, Any]) -> None:
    """The ranked rows (best marked), then the sort key and the verdict line."""
    from rich.table import Table

    from streamsched.cli.app import err_console
    from streamsched.evaluation.comparison import SORT_KEY

    columns = {"rank": "#", "scheduler": "scheduler", "inter_node_traffic": "inter-node", "inter_worker_traffic": "inter-worker",
               "nodes_used": "nodes", "load_imbalance": "imbalance", "throughput_tps": "predicted",
               "bottleneck": "bottleneck", "wall_time_s": "time (s)", "status": "status",
               "bound": "bound", "gap": "gap"}
    title = f"{task_graph.name} on {nodes.name} (seed {seed}); traffic and predicted throughput in tuples/s"
    if decision.get("ranked_by") == "predicted throughput":  # the link-capacity model's figures instead
        swap = {"throughput_tps": "predicted_throughput", "bottleneck": "predicted_bottleneck"}
        columns = {swap.get(k, k): v for k, v in columns.items()}
        title = (f"{task_graph.name} on {nodes.name} (seed {seed}); traffic in tuples/s, predicted throughput "
                 f"in records/s at the sources")
    table = Table(*columns.values(), title=title)
    for row in rows:
        cells = [cell(row.get(c, "")) for c in columns]
        if row.get("scheduler") in decision.get("tie", ()):
            cells[1] += " (tie)"
        if isinstance(row.get("gap"), float):
            cells[-1] = f"{100 * row['gap']:.1f} %"
        if row.get("best"):
            cells[0], cells[1] = f"{row['rank']} best", f"[bold]{cells[1]}[/bold]"
        table.add_row(*cells)
    console.print(table)
    for row in rows:
        if row.get("error"):
            err_console.print(f"{row['scheduler']}: {row['error']}", highlight=False)
        if row.get("status") == "skipped":
            err_console.print(f"{row['scheduler']}: skipped: {row['reason']}", highlight=False)
    if decision["model"] is None:
        console.print(f"ranked by {decision.get('sort_key', SORT_KEY)}; {decision['model_error_source']}",
                      highlight=False, soft_wrap=True)
    else:
        console.print(f"ranked by {decision.get('sort_key', SORT_KEY)}; throughput predicted by model {decision['model']!r} "
                      f"(error ±{decision['model_error_pct']:.0f} %, {decision['model_error_source']})",
                      highlight=False, soft_wrap=True)
    console.print(decision["text"], highlight=False, markup=False, soft_wrap=True)


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        from streamsched.evaluation.verdict import fmt

        return fmt(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)
