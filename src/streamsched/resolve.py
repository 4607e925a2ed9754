"""The one resolver of names and paths: what every command, the experiments and the main job
turn into a task graph, a cluster or both.

- A **workload** is a built-in name (:func:`streamsched.workloads.workload`: the papers'
  workloads, Fischer's chains such as the demo's ``fischer-payload-10``, ``random-K``).
- A **graph argument** is a path: a snapshot directory of the store (as ``ingest`` prints it)
  or its ``.parquet``, a ``read-engine`` output directory (``graph.json``, ``cluster.yaml``,
  ``placement.json``), a topology (``.yaml``, or ``.json`` with ``operators``), or a graph file
  (:func:`streamsched.model.graph_files.read_graph`).
- A **cluster** is a built-in name (:func:`streamsched.workloads.cluster`, ``fischer-11``
  included) or a cluster file (YAML/JSON). Without one, a ``read-engine`` directory brings its
  own ``cluster.yaml`` (the machines the job was seen on, capacity in cores); anything else gets
  :data:`DEFAULT_CLUSTER`.

Layer: above the model, the workloads and the pipeline's store (snapshots); below the
evaluation, the main job and the CLI, which all resolve through here.
"""

from __future__ import annotations

from pathlib import Path

from streamsched import workloads
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.io import read_document
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.topology import Topology
from streamsched.model.units import check_units

#: The cluster of a graph that brings none (the micro-benchmarks' default).
DEFAULT_CLUSTER = "homogeneous-10"
#: The files a ``read-engine`` output directory holds.
ENGINE_GRAPH, ENGINE_CLUSTER, ENGINE_PLACEMENT = "graph.json", "cluster.yaml", "placement.json"


def graph(workload: str | None = None, path: str | Path | None = None, seed: int = 0) -> TaskGraph:
    """The task graph named by exactly one of ``workload`` (a built-in name) or ``path``."""
    if (workload is None) == (path is None):
        raise InputError("give exactly one of --workload NAME or --graph FILE")
    if workload is not None:
        return workloads.workload(workload, seed)
    return graph_file(Path(path))


def graph_file(path: Path) -> TaskGraph:
    """The graph a path holds (the module docstring lists the kinds)."""
    from streamsched.model.graph_files import read_graph
    from streamsched.pipeline.store import MANIFEST, list_snapshots, load_snapshot, read_manifest

    if path.is_dir():
        if (path / MANIFEST).is_file():
            return load_snapshot(path)
        if (path / ENGINE_GRAPH).is_file():
            return read_graph(path / ENGINE_GRAPH)
        if (path / "snapshots").is_dir():
            snapshots = list_snapshots(path)
            latest = f"; its latest: {snapshots[-1]}" if snapshots else " (it holds none yet)"
            raise InputError(f"{path}: a snapshot store; give one of its snapshot directories{latest}")
        raise InputError(f"{path}: a directory, but neither a snapshot ({MANIFEST}) nor a read-engine output "
                         f"({ENGINE_GRAPH})")
    if not path.exists():
        raise InputError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if suffix == ".parquet" and (path.parent / MANIFEST).is_file():
        try:
            is_snapshot = read_manifest(path.parent).get("graph") == path.name
        except InputError:  # a manifest.json of something else: read the file as it is
            is_snapshot = False
        if is_snapshot:
            return load_snapshot(path.parent)
    if suffix in (".yaml", ".yml"):
        return TaskGraph.from_topology(Topology.load(path))
    if suffix == ".json":
        document = read_document(path)
        if isinstance(document, dict) and "operators" in document:
            return TaskGraph.from_topology(Topology.load(path))
    return read_graph(path)


def cluster(spec: str | None = None, graph_path: str | Path | None = None) -> Cluster:
    """The cluster ``spec`` names (built-in name or file); without one, the ``cluster.yaml`` of
    a ``read-engine`` directory ``graph_path``, else :data:`DEFAULT_CLUSTER`."""
    if spec is None:
        brought = engine_cluster_file(graph_path)
        return Cluster.load(brought) if brought is not None else workloads.cluster(DEFAULT_CLUSTER)
    path = Path(spec)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        return Cluster.load(path)
    return workloads.cluster(spec)


def engine_cluster_file(graph_path: str | Path | None) -> Path | None:
    """``DIR/cluster.yaml`` when ``graph_path`` is a ``read-engine`` directory holding one."""
    if graph_path is None:
        return None
    candidate = Path(graph_path) / ENGINE_CLUSTER
    return candidate if Path(graph_path).is_dir() and candidate.is_file() else None


def write_engine_dir(out: Path, graph: TaskGraph, placement, nodes: Cluster) -> dict[str, Path]:
    """Write a ``read-engine`` output directory (what :func:`graph_file` and :func:`cluster`
    read back): the graph, the job's current placement and the observed cluster."""
    import yaml

    from streamsched.model.graph_files import write_graph

    out.mkdir(parents=True, exist_ok=True)
    files = {"graph": out / ENGINE_GRAPH, "placement": out / ENGINE_PLACEMENT, "cluster": out / ENGINE_CLUSTER}
    write_graph(graph, files["graph"])
    placement.write(files["placement"], graph, nodes)
    files["cluster"].write_text(yaml.safe_dump(nodes.to_dict(), sort_keys=False))
    return files


def inputs(workload: str | None, path: str | Path | None, cluster_spec: str | None, seed: int = 0,
           units: bool = True) -> tuple[TaskGraph, Cluster]:
    """Graph and cluster of one command, their units checked (``units=False``: by the caller,
    after a placement file's own cluster check); a mismatch says which cluster would fit."""
    task_graph = graph(workload, path, seed)
    nodes = cluster(cluster_spec, path)
    if not units:
        return task_graph, nodes
    try:
        check_units(task_graph, nodes)
    except InputError as exc:
        brought = engine_cluster_file(path)
        hint = (f"; omit --cluster to use {brought}, the cluster the graph was measured on" if brought is not None
                else f"; give --cluster a cluster file in {task_graph.load_unit} (read-engine writes one beside "
                     "the graph: DIR/cluster.yaml)")
        raise InputError(f"{exc}{hint}") from None
    return task_graph, nodes
