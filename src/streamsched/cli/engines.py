"""Engine commands: ``streamsched read-engine ENGINE ...`` reads a running engine's topology
into OUTDIR/graph.json (the graph file format ``schedule --graph`` reads), OUTDIR/placement.json
(its current placement) and OUTDIR/cluster.yaml (the machines it was seen on).

Each engine is one sub-command of ``read-engine`` (``storm-ui``; more engines add theirs on
:data:`read_app`), and every reader ends in :func:`write_reading`. The readers themselves live
in ``streamsched.engines`` (docs/engines.md).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import typer
import yaml
from rich.console import Console

from streamsched.cli.app import app, err_console
from streamsched.cli.common import finite_or_null
from streamsched.cli.summaries import reading_lines
from streamsched.errors import InputError
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.model.paths import staged_directory

console = Console()
read_app = typer.Typer(no_args_is_help=True,
                       help="Read a running engine: task graph, current placement and observed cluster.")
app.add_typer(read_app, name="read-engine")

OutOpt = typer.Option(..., "--out", "-o", help="directory for graph.json, placement.json and cluster.yaml")


def write_reading(stage: Path, out: Path, graph: TaskGraph, placement: Placement, cluster: Cluster,
                  summary: Mapping[str, Any] | None = None, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """Write graph.json, placement.json and cluster.yaml into ``stage`` (the staged OUTDIR,
    :func:`~streamsched.model.paths.staged_directory`), print what was read (warnings to
    stderr) and return the summary (naming the files in ``out``)."""
    from streamsched.model.graph_files import write_graph

    write_graph(graph, stage / "graph.json")
    placement.write(stage / "placement.json", graph, cluster)
    (stage / "cluster.yaml").write_text(yaml.safe_dump(cluster.to_dict(), sort_keys=False))
    report = {
        **dict(summary or {}),
        "graph": {**graph.summary(), "file": str(out / "graph.json")},
        "placement": str(out / "placement.json"),
        "cluster": {"name": cluster.name, "nodes": [n.name for n in cluster.nodes],
                    "capacity_unit": cluster.capacity_unit, "file": str(out / "cluster.yaml")},
    }
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    return report


@contextmanager
def malformed_capture(source) -> Iterator[None]:
    """An engine's answer (saved or live) of an unexpected shape: one line naming the source
    (exit 2) instead of the reader's TypeError or KeyError."""
    try:
        yield
    except (TypeError, KeyError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        raise InputError(f"{source}: unexpected response shape ({type(exc).__name__}: {exc})") from None
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{source}: unexpected value ({exc})") from None


@read_app.command("storm-ui")
def storm_ui(
    url: Optional[str] = typer.Option(None, "--url", help="Storm UI base URL, e.g. http://nimbus:8080"),
    topology_id: Optional[str] = typer.Option(None, "--topology-id", help="with --url: the topology's id"),
    directory: Optional[Path] = typer.Option(None, "--dir", help="saved UI responses instead of a live UI"),
    out: Path = OutOpt,
    window: Optional[str] = typer.Option(
        None, "--window", help="600, 10800, 86400 or :all-time (live default 600; --dir: the saved one)"),
    load: str = typer.Option("busy", "--load", help="executor load: busy (executed x latency) or capacity"),
    spout_load: float = typer.Option(0.1, "--spout-load", help="cores per spout executor (the UI gives none)"),
    host_cores: float = typer.Option(4.0, "--host-cores", help="cores of a host without a supervisor summary"),
    timeout: float = typer.Option(60.0, "--timeout", help="seconds for the whole read (every request ends by then)"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Storm UI REST API: executors, their placement and hosts.

    One graph task per executor (loads in cores, pair rates from the per-input executed
    counts), the current executor placement and the hosts. Live reads keep the responses in
    OUTDIR/storm-ui/ (give it to `export --format storm --storm-ui-dir`)."""
    from streamsched.engines.storm import ui_rest

    with staged_directory(out) as stage, malformed_capture(url or directory):
        data = ui_rest.read(url=url, topology_id=topology_id, directory=directory, window=window,
                            timeout=timeout, save_dir=stage / "storm-ui" if url is not None else None)
        reading = ui_rest.estimate(data, spout_load=spout_load, load=load, host_cores=host_cores)
        report = write_reading(stage, out, reading.graph, reading.placement, reading.cluster, {
            "engine": "storm-ui", "topology_id": data.topology_id, "window": data.window,
            "storm_ui_dir": str(out / "storm-ui" if url is not None else directory),
            "executors": len(reading.layout.executors),
            "system_executors": sum(1 for e in reading.layout.executors if e.system),
        }, reading.warnings)
    if as_json:
        print(json.dumps(finite_or_null(report), indent=1))
    else:
        for line in reading_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


@read_app.command("flink")
def flink_rest(
    url: Optional[str] = typer.Option(None, "--url", help="JobManager REST URL, e.g. http://jobmanager:8081"),
    job_id: Optional[str] = typer.Option(None, "--job-id", help="with --url: the job's id (default: the only running job)"),
    directory: Optional[Path] = typer.Option(None, "--dir", help="saved REST responses instead of a live JobManager"),
    out: Path = OutOpt,
    window: float = typer.Option(10.0, "--window", help="live: seconds between two snapshots (0: one, Flink's 60 s meters)"),
    node_by: str = typer.Option("taskmanager", "--node-by", help="one node per taskmanager or per host"),
    timeout: float = typer.Option(60.0, "--timeout", help="seconds for the whole read, window included"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Flink REST API: one graph task per subtask (loads in busy cores, pair rates per ship
    strategy), the current placement on TaskManagers and the TaskManagers. Live reads keep the
    responses in OUTDIR/flink-rest/ (read them again with --dir)."""
    from streamsched.engines import flink

    keys = ("job_id", "job_name", "flink_version", "rates_from", "window_s", "node_by", "measured_per_s", "edges")
    with staged_directory(out) as stage, malformed_capture(url or directory):
        reading = flink.read(url=url, job_id=job_id, directory=directory, window_s=window, timeout=timeout,
                             node_by=node_by, save_dir=stage / "flink-rest" if url is not None else None)
        report = write_reading(stage, out, reading.graph, reading.placement, reading.cluster, {
            "engine": "flink", **{k: reading.report[k] for k in keys},
            "flink_rest_dir": str(out / "flink-rest" if url is not None else directory),
        }, reading.warnings)
    if as_json:
        print(json.dumps(finite_or_null(report), indent=1))
    else:
        for line in reading_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def storm_export_options(storm_ui_dir: Optional[Path], topology_id: Optional[str],
                         supervisors: Optional[list[str]], ackers: Optional[int],
                         executors: Optional[list[str]]) -> dict[str, Any]:
    """``export --format storm`` options as :func:`~streamsched.engines.storm.plan.storm_plan`
    keywords: executors, supervisor ids and ports from saved UI responses, or Nimbus' numbering
    with ``--ackers`` and ``--executors COMPONENT=N`` (parallelism hints)."""
    options: dict[str, Any] = {}
    mapping = _pairs("--supervisor", supervisors)
    if storm_ui_dir is not None:
        from streamsched.engines.storm import ui_rest

        if ackers is not None or executors:
            raise InputError("--ackers and --executors describe a topology not yet submitted; "
                             "with --storm-ui-dir the executors are Storm's own")
        layout = ui_rest.estimate(ui_rest.read_dir(storm_ui_dir)).layout
        if mapping:
            from dataclasses import replace

            layout = replace(layout, supervisors={**layout.supervisors, **mapping})
        options["layout"] = layout
    else:
        if mapping:
            options["supervisors"] = mapping
        if ackers is not None:
            options["ackers"] = ackers
        hints = _pairs("--executors", executors)
        if hints:
            try:
                options["executors"] = {k: int(v) for k, v in hints.items()}
            except ValueError:
                raise InputError(f"--executors: {hints}: counts must be integers") from None
    if topology_id is not None:
        options["topology_id"] = topology_id
    return options


def _pairs(option: str, values: Optional[list[str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or []:
        key, sep, item = value.partition("=")
        if not sep or not key.strip() or not item.strip():
            raise InputError(f"{option} {value!r}: expected NAME=VALUE")
        out[key.strip()] = item.strip()
    return out
