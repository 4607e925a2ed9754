"""Task graphs on disk: edge lists (CSV, JSON, Parquet) and Fischer's sendgraph JSON.

Canonical columns. Edges: ``src``, ``dst`` (task ids), ``rate`` (tuples/s), optional
``bytes`` (bytes/s); ``source``/``target``/``value`` are accepted as aliases. Tasks (optional):
``id``, ``operator``, ``load``, optional ``memory_mb``, ``onheap_mb`` (the JVM heap part of
``memory_mb``) and ``worker_heap_mb`` (Storm's ``topology.worker.max.heap.size.mb``, the same on
every row), ``load_unit`` (``tasks`` or ``cores``, the same on every row), ``max_per_node`` (most tasks of the operator on one node, 0 = no limit)
and ``slot_group`` (the operator's slot sharing group): the last two are per operator, the same
on every row of an operator (:mod:`streamsched.model.colocation`). CSV and Parquet keep tasks in a sibling file ``<name>.tasks.<ext>``;
JSON keeps both as ``{"load_unit": ..., "tasks": [...], "edges": [...]}``. Without a tasks
table every task named by an edge gets load 1 and operator ``"task"``; without a stated unit,
loads count ``tasks``.
A sendgraph ``{"nodes": [{"name": "12"}], "links": [{"source": 12, "target": 30, "value": n}]}``
is read as counts over ``window_s`` seconds (rate = value / window_s). A CAPSys profile (a JSON
list of operators with ``outboundtype``) is read with :mod:`streamsched.model.contention`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from streamsched.errors import InputError
from streamsched.model.io import read_document, validate
from streamsched.model.taskgraph import MAX_VALUE, TaskGraph
from streamsched.model.units import TASKS, check_unit

ALIASES = {"source": "src", "target": "dst", "value": "rate", "bytes_rate": "bytes"}


def tasks_path_for(path: Path) -> Path:
    return path.with_name(f"{path.name.split('.')[0]}.tasks{path.suffix}")


def _read_table(path: Path) -> pa.Table:
    try:
        if path.suffix.lower() == ".parquet":
            return pq.read_table(path)
        return pcsv.read_csv(path)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (pa.ArrowInvalid, OSError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise InputError(f"{path}: cannot parse ({first})") from None


def _column(table: pa.Table, path: Path, name: str, dtype, required: bool = True):
    columns = {ALIASES.get(c, c): c for c in table.column_names}
    if name not in columns:
        if required:
            raise InputError(f"{path}: missing column {name!r} (have {', '.join(table.column_names)})")
        return None
    col = table.column(columns[name])
    try:
        values = col.to_numpy(zero_copy_only=False)
        if dtype is str:
            return np.asarray(values, dtype=object).astype(str)
        if values.dtype == object:
            raise ValueError("not numeric")
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/huge ids: refused below, by row
            out = values.astype(dtype)
    except (ValueError, TypeError, pa.ArrowInvalid):
        raise InputError(f"{path}: column {name!r} is not numeric") from None
    if np.issubdtype(np.asarray(values).dtype, np.floating) and np.issubdtype(np.dtype(dtype), np.integer):
        if not np.all(np.isfinite(values)) or not np.all(values == np.floor(values)):
            k = int(np.flatnonzero(~np.isfinite(values) | (values != np.floor(values)))[0])
            raise InputError(f"{path}: {_row(path, k)}: column {name!r} is not an integer task id")
    return out


def _row(path: Path, k: int) -> str:
    return f"line {k + 2}" if path.suffix.lower() == ".csv" else f"row {k}"


def _check_values(path: Path, name: str, values: np.ndarray) -> None:
    bad = np.flatnonzero(~((values >= 0) & (values <= MAX_VALUE)))
    if bad.size:
        k = int(bad[0])
        raise InputError(f"{path}: {_row(path, k)}: {name} is {values[k]:g}; must be a finite number in [0, {MAX_VALUE:g}]")


def _assemble(name: str, path: Path, src_ids, dst_ids, rate, byte_rate, tasks, load_unit: str = TASKS) -> TaskGraph:
    """Map external task ids to indices; an edge naming an unknown task is an error."""
    _check_values(path, "rate", rate)
    if byte_rate is not None:
        _check_values(path, "bytes", byte_rate)
    if tasks is None:
        ids = np.unique(np.concatenate([src_ids, dst_ids]))
        operators, task_operator = ("task",), np.zeros(ids.size, dtype=np.int32)
        load, memory, onheap, heap_limit = np.ones(ids.size), None, None, None
    else:
        ids, op_names, load, memory, onheap, heap_limit, tasks_path, *rule = tasks
        if np.unique(ids).size != ids.size:
            dup = ids[np.flatnonzero(np.diff(np.sort(ids)) == 0)[0]]
            raise InputError(f"{tasks_path}: task id {dup} listed twice")
        _check_values(tasks_path, "load", load)
        for column, values in (("onheap_mb", onheap), ("worker_heap_mb", heap_limit)):
            if values is not None:
                _check_values(tasks_path, column, np.atleast_1d(values))
        operators, task_operator = np.unique(op_names, return_inverse=True)
        operators = tuple(str(o) for o in operators)
        if rule:
            caps, groups = (_per_operator(tasks_path, name, values, task_operator)
                            for name, values in zip(("max_per_node", "slot_group"), rule))
    if tasks is None or not rule:
        caps, groups = (), ()
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]

    def index(values: np.ndarray, column: str) -> np.ndarray:
        pos = np.searchsorted(sorted_ids, values)
        pos_clipped = np.minimum(pos, max(sorted_ids.size - 1, 0))
        unknown = np.flatnonzero((pos >= sorted_ids.size) | (sorted_ids[pos_clipped] != values))
        if unknown.size:
            k = int(unknown[0])
            raise InputError(f"{path}: {_row(path, k)}: {column} {values[k]} is not a known task")
        return order[pos]

    return TaskGraph.build(
        name=name,
        operator_names=operators,
        task_operator=task_operator,
        load=load,
        src=index(src_ids, "src"),
        dst=index(dst_ids, "dst"),
        rate=rate,
        bytes_rate=byte_rate,
        task_ids=ids,
        memory_mb=memory,
        where=str(path),
        load_unit=load_unit,
        max_per_node=caps,
        slot_group=groups,
        onheap_mb=onheap,
        worker_heap_mb=heap_limit or 0.0,
    )


def _per_operator(path: Path, name: str, values, task_operator: np.ndarray) -> tuple:
    """One value per operator from a per-task column (None: column absent); every task of an
    operator must give the same value."""
    if values is None:
        return ()
    first = np.full(int(task_operator.max(initial=-1)) + 1, -1)
    first[task_operator[::-1]] = np.arange(task_operator.size)[::-1]
    differs = np.flatnonzero(values != values[first[task_operator]])
    if differs.size:
        k = int(differs[0])
        raise InputError(f"{path}: {_row(path, k)}: {name} {values[k].item()!r} differs from "
                          f"{values[first[task_operator[k]]].item()!r} "
                         f"on another task of the same operator")
    if name == "max_per_node" and np.any(values < 0):
        k = int(np.flatnonzero(values < 0)[0])
        raise InputError(f"{path}: {_row(path, k)}: max_per_node is {values[k].item()}; must be an integer >= 0 (0: no limit)")
    return tuple(v.item() if isinstance(v, np.generic) else v for v in values[first])


def _tasks_from_table(table: pa.Table, path: Path):
    ids = _column(table, path, "id", np.int64)
    ops = _column(table, path, "operator", str, required=False)
    load = _column(table, path, "load", np.float64, required=False)
    memory = _column(table, path, "memory_mb", np.float64, required=False)
    onheap = _column(table, path, "onheap_mb", np.float64, required=False)
    caps = _column(table, path, "max_per_node", np.int64, required=False)
    groups = _column(table, path, "slot_group", str, required=False)
    heap_limit = _same_on_every_row(table, path, "worker_heap_mb", np.float64)
    n = ids.size
    unit = _same_on_every_row(table, path, "load_unit", str)
    return (ids, ops if ops is not None else np.full(n, "task"), load if load is not None else np.ones(n), memory,
            onheap, None if heap_limit is None else float(heap_limit), path, caps, groups), \
        None if unit is None else check_unit(str(unit), f"{path}: {_row(path, 0)}: load_unit")


def _same_on_every_row(table: pa.Table, path: Path, name: str, dtype):
    """The tasks table's column ``name`` holding one value on every row: that value, or None
    without the column."""
    values = _column(table, path, name, dtype, required=False)
    if values is None or values.size == 0:
        return None
    different = np.flatnonzero(values != values[0])
    if different.size:
        k = int(different[0])
        raise InputError(f"{path}: {_row(path, k)}: {name} {values[k].item()!r} differs from the first row's "
                         f"{values[0].item()!r}")
    return values[0]


def _one_unit(path: Path, stated: str | None, table: str | None) -> str:
    """The file's load unit: the top-level and the tasks table's must agree; default ``tasks``."""
    if stated is not None and table is not None and stated != table:
        raise InputError(f"{path}: load_unit {stated!r} but the tasks table says {table!r}")
    return stated or table or TASKS


def read_graph(path: str | Path, tasks: str | Path | None = None, window_s: float = 1.0) -> TaskGraph:
    """Read a task graph from CSV, Parquet, our JSON or a sendgraph JSON (by content)."""
    path = Path(path)
    suffix = path.suffix.lower()
    name = path.name.split(".")[0]
    if suffix == ".json":
        data = read_document(path)
        if isinstance(data, list) and data and isinstance(data[0], dict) and "outboundtype" in data[0]:
            from streamsched.model.contention import graph_from_profile, read_caps_profile

            return graph_from_profile(read_caps_profile(data, str(path)), name, where=str(path))
        validate(data, "graph", str(path))
        if "links" in data:
            return _read_sendgraph(data, path, name, window_s)
        edges = _records_table(data["edges"], path, "edges")
        task_info, table_unit = None, None
        if data.get("tasks") is not None:
            task_info, table_unit = _tasks_from_table(_records_table(data["tasks"], path, "tasks"), path)
        unit = _one_unit(path, data.get("load_unit"), table_unit)
        name = name if data.get("name") is None else data["name"]
        contention = data.get("contention")
    elif suffix in (".csv", ".parquet"):
        edges = _read_table(path)
        tasks_file = Path(tasks) if tasks is not None else tasks_path_for(path)
        task_info, unit, contention = None, TASKS, None
        if tasks is not None or tasks_file.exists():
            task_info, table_unit = _tasks_from_table(_read_table(tasks_file), tasks_file)
            unit = _one_unit(tasks_file, None, table_unit)
    else:
        raise InputError(f"{path}: unknown graph format {suffix!r} (use .csv, .json or .parquet)")
    graph = _assemble(
        name, path,
        _column(edges, path, "src", np.int64),
        _column(edges, path, "dst", np.int64),
        _column(edges, path, "rate", np.float64),
        _column(edges, path, "bytes", np.float64, required=False),
        task_info,
        unit,
    )
    return graph if contention is None else _with_contention(graph, contention, path)


def _with_contention(graph: TaskGraph, document: dict, path: Path) -> TaskGraph:
    """``graph`` with the contention profile of its JSON's ``contention`` field (CAPSys's
    profile records and the dimensions that were measured)."""
    from dataclasses import replace

    from streamsched.model.contention import in_operator_order, read_caps_profile, with_profile

    where = f"{path}: contention"
    profile = read_caps_profile(document["operators"], f"{where}.operators")
    profile = in_operator_order(replace(profile, measured=tuple(document["measured"])), graph.operator_names, where)
    return with_profile(graph, profile, where)


def _records_table(records: list[dict], path: Path, field: str) -> pa.Table:
    try:
        return pa.Table.from_pylist(records)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise InputError(f"{path}: {field}: {str(exc).splitlines()[0]}") from None


def _read_sendgraph(data: dict, path: Path, name: str, window_s: float) -> TaskGraph:
    try:
        node_ids = np.array([int(n["name"]) for n in data.get("nodes") or ()], dtype=np.int64)
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: nodes: each node needs an integer 'name'") from None
    links = _records_table(data["links"], path, "links")
    src = _column(links, path, "src", np.int64)
    dst = _column(links, path, "dst", np.int64)
    counts = _column(links, path, "rate", np.float64)
    ids = np.unique(np.concatenate([node_ids, src, dst]))
    tasks = (ids, np.full(ids.size, "task"), np.ones(ids.size), None, None, None, path, None, None)
    return _assemble(name, path, src, dst, counts / window_s, None, tasks)


def write_graph(graph: TaskGraph, path: str | Path) -> None:
    """Write edges (and tasks) in the canonical columns; CSV/Parquet put tasks beside."""
    path = Path(path)
    edges = pa.table({
        "src": graph.task_ids[graph.src],
        "dst": graph.task_ids[graph.dst],
        "rate": graph.rate,
        "bytes": graph.bytes_rate,
    })
    tasks = pa.table({
        "id": graph.task_ids,
        "operator": np.asarray(graph.operator_names, dtype=object)[graph.task_operator],
        "load": graph.load,
        "memory_mb": graph.memory_mb,
    })
    if graph.onheap_mb is not None:
        tasks = tasks.append_column("onheap_mb", pa.array(graph.onheap_mb))
    if graph.worker_heap_mb > 0:
        tasks = tasks.append_column("worker_heap_mb", pa.array(np.full(graph.n_tasks, graph.worker_heap_mb)))
    if graph.max_per_node:
        tasks = tasks.append_column("max_per_node", pa.array(np.asarray(graph.max_per_node)[graph.task_operator]))
    if graph.slot_group:
        tasks = tasks.append_column("slot_group", pa.array(np.asarray(graph.slot_group, dtype=object)[graph.task_operator],
                                                           pa.string()))
    suffix = path.suffix.lower()
    if suffix == ".json":
        document = {"name": graph.name, "load_unit": graph.load_unit, "tasks": tasks.to_pylist(),
                    "edges": edges.to_pylist()}
        if graph.contention is not None:  # CSV and Parquet have no place for it: derived again when read
            from streamsched.model.contention import caps_records

            document["contention"] = {"measured": list(graph.contention.measured),
                                      "operators": caps_records(graph.contention)}
        validate(document, "graph", str(path), written=True)
        path.write_text(json.dumps(document))
        return
    tasks = tasks.append_column("load_unit", pa.array([graph.load_unit] * graph.n_tasks, pa.string()))
    if suffix == ".parquet":
        pq.write_table(edges, path)
        pq.write_table(tasks, tasks_path_for(path))
    elif suffix == ".csv":
        pcsv.write_csv(edges, path)
        pcsv.write_csv(tasks, tasks_path_for(path))
    else:
        raise InputError(f"{path}: unknown graph format {suffix!r} (use .csv, .json or .parquet)")
