"""What the command modules share: the common options, reading a graph, a cluster or a
placement argument, printing a summary or ``--json``. Light to import (the model and the
readers are imported when called), so that the pipeline commands load without the schedulers'
modules."""

from __future__ import annotations

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
ClusterOpt = typer.Option("homogeneous-10", "--cluster", "-c", help="built-in cluster name or cluster YAML file")
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


def load_graph(workload: Optional[str], graph: Optional[Path]) -> TaskGraph:
    """The task graph named by ``--workload`` or read from ``--graph``."""
    if (workload is None) == (graph is None):
        raise InputError("give exactly one of --workload NAME or --graph FILE")
    if workload is not None:
        from streamsched import workloads

        return workloads.workload(workload)
    return read_graph_argument(graph)


def read_graph_argument(graph: Path) -> TaskGraph:
    """One graph argument for every command: a snapshot directory of the store (as ``ingest``
    prints it) or the snapshot's own ``.parquet`` (both read with the manifest's topology name
    and load unit), a ``read-engine`` output directory (its ``graph.json``), a topology
    (``.yaml``, or ``.json`` with ``operators``), or a graph file (:func:`read_graph`)."""
    from streamsched.model import TaskGraph, Topology
    from streamsched.model.graph_files import read_graph
    from streamsched.pipeline.store import MANIFEST, list_snapshots, load_snapshot, read_manifest

    if graph.is_dir():
        if (graph / MANIFEST).is_file():
            return load_snapshot(graph)
        if (graph / "graph.json").is_file():
            return read_graph(graph / "graph.json")
        if (graph / "snapshots").is_dir():
            snapshots = list_snapshots(graph)
            latest = f"; its latest: {snapshots[-1]}" if snapshots else " (it holds none yet)"
            raise InputError(f"{graph}: a snapshot store; give one of its snapshot directories{latest}")
        raise InputError(f"{graph}: a directory, but neither a snapshot ({MANIFEST}) nor a read-engine output "
                         "(graph.json)")
    if not graph.exists():
        raise InputError(f"{graph}: file not found")
    if graph.suffix.lower() == ".parquet" and (graph.parent / MANIFEST).is_file():
        try:
            is_snapshot = read_manifest(graph.parent).get("graph") == graph.name
        except InputError:  # a manifest.json of something else: read the file as it is
            is_snapshot = False
        if is_snapshot:
            return load_snapshot(graph.parent)
    suffix = graph.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return TaskGraph.from_topology(Topology.load(graph))
    if suffix == ".json" and graph.exists():
        from streamsched.io import read_document

        if isinstance(read_document(graph), dict) and "operators" in read_document(graph):
            return TaskGraph.from_topology(Topology.load(graph))
    return read_graph(graph)


def load_cluster(spec: str) -> Cluster:
    """A built-in cluster name, or a YAML/JSON cluster file."""
    from streamsched import workloads
    from streamsched.model import Cluster

    path = Path(spec)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        return Cluster.load(path)
    return workloads.cluster(spec)


def read_placement(path: Path, graph: TaskGraph, nodes: Cluster) -> Placement:
    """A placement file for ``graph`` on ``nodes``; one made for another cluster (its name, or
    its content fingerprint, differs) is refused (exit 2) rather than read by node names."""
    from streamsched.io import read_document
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
