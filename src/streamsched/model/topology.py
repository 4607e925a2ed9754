"""Logical topology: operators with parallelism, and the streams between them.

A :class:`Topology` is what a Storm/Heron/Flink user writes; :meth:`TaskGraph.from_topology`
instantiates it into tasks and weighted task-to-task edges by the grouping semantics.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamsched.errors import InputError
from streamsched.model.io import present, read_document, validate
from streamsched.model.limits import check_operators, check_tasks

ROLES = ("source", "operator", "sink")
#: shuffle splits evenly; fields follows a (Zipf-skewed) key distribution; global sends all to
#: the lowest task; all broadcasts; local-or-shuffle is shuffle when the placement is unknown;
#: forward connects task i to task i (Flink's forward, Fischer's aligned fields chains).
GROUPINGS = ("shuffle", "fields", "global", "all", "local-or-shuffle", "forward")


@dataclass(frozen=True)
class Operator:
    """One logical operator (spout or bolt), run as ``parallelism`` tasks."""

    name: str
    parallelism: int
    role: str = "operator"
    cpu_per_tuple: float = 1.0e-3
    """Load units consumed per tuple/s processed (sources: per tuple/s emitted)."""
    memory_mb: float = 128.0
    selectivity: float = 1.0
    """Output tuples per input tuple."""
    tuple_bytes: float = 100.0
    """Size of the tuples this operator emits."""
    source_rate: float = 0.0
    """Tuples/s emitted by the whole operator (sources only)."""
    task_load: float | None = None
    """Fixed load per task; overrides ``cpu_per_tuple`` x rate (the papers' "load 1 per task")."""

    def __post_init__(self) -> None:
        where = f"operator {self.name!r}"
        if not self.name:
            raise InputError("operator: empty name")
        if self.parallelism < 1:
            raise InputError(f"{where}.parallelism: must be >= 1, got {self.parallelism}")
        if self.role not in ROLES:
            raise InputError(f"{where}.role: {self.role!r} is not one of {', '.join(ROLES)}")
        for name in ("cpu_per_tuple", "memory_mb", "selectivity", "tuple_bytes", "source_rate"):
            if getattr(self, name) < 0:
                raise InputError(f"{where}.{name}: must be >= 0, got {getattr(self, name)}")
        if self.task_load is not None and self.task_load < 0:
            raise InputError(f"{where}.task_load: must be >= 0, got {self.task_load}")


@dataclass(frozen=True)
class Stream:
    """A subscription of ``dst`` to the full output of ``src`` with a grouping."""

    src: str
    dst: str
    grouping: str = "shuffle"
    key_skew: float = 0.0
    """Zipf exponent of the key distribution for fields grouping (0 = uniform)."""
    pair_rate: float | None = None
    """Fixed rate per communicating task pair, overriding rate propagation (micro-benchmarks)."""

    def __post_init__(self) -> None:
        where = f"stream {self.src}->{self.dst}"
        if self.grouping not in GROUPINGS:
            raise InputError(f"{where}.grouping: {self.grouping!r} is not one of {', '.join(GROUPINGS)}")
        if self.key_skew < 0:
            raise InputError(f"{where}.key_skew: must be >= 0, got {self.key_skew}")
        if self.pair_rate is not None and self.pair_rate < 0:
            raise InputError(f"{where}.pair_rate: must be >= 0, got {self.pair_rate}")


@dataclass(frozen=True)
class Topology:
    """A DAG of operators; validated on construction (known names, acyclic, forward widths)."""

    name: str
    operators: tuple[Operator, ...]
    streams: tuple[Stream, ...] = field(default=())

    def __post_init__(self) -> None:
        names = [op.name for op in self.operators]
        if not names:
            raise InputError(f"topology {self.name!r}: no operators")
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise InputError(f"topology {self.name!r}: operator {name!r} defined twice")
            seen.add(name)
        by_name = self.operator_map
        for stream in self.streams:
            for end in (stream.src, stream.dst):
                if end not in by_name:
                    raise InputError(f"stream {stream.src}->{stream.dst}: unknown operator {end!r}")
            if stream.grouping == "forward" and (
                by_name[stream.src].parallelism != by_name[stream.dst].parallelism
            ):
                raise InputError(
                    f"stream {stream.src}->{stream.dst}.grouping: forward needs equal parallelism"
                )
        check_tasks(self.n_tasks, f"topology {self.name!r}: the sum of parallelism")
        self.topological_order()  # raises on a cycle

    @property
    def operator_map(self) -> dict[str, Operator]:
        return {op.name: op for op in self.operators}

    @property
    def n_tasks(self) -> int:
        return sum(op.parallelism for op in self.operators)

    def topological_order(self) -> list[str]:
        """Operators in an order where every stream goes forward (Kahn's algorithm)."""
        indegree = {op.name: 0 for op in self.operators}
        children: dict[str, list[str]] = {op.name: [] for op in self.operators}
        for stream in self.streams:
            indegree[stream.dst] += 1
            children[stream.src].append(stream.dst)
        ready = deque(name for name, deg in indegree.items() if deg == 0)
        order: list[str] = []
        while ready:
            name = ready.popleft()
            order.append(name)
            for child in children[name]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
        if len(order) != len(indegree):
            stuck = sorted(name for name, deg in indegree.items() if deg > 0)
            raise InputError(f"topology {self.name!r}: streams form a cycle through {stuck[0]!r}")
        return order

    def to_dict(self) -> dict[str, Any]:
        ops = []
        for op in self.operators:
            entry = {k: getattr(op, k) for k in Operator.__dataclass_fields__}
            ops.append({k: v for k, v in entry.items() if v is not None})
        streams = []
        for s in self.streams:
            entry = {"from": s.src, "to": s.dst, "grouping": s.grouping}
            if s.key_skew:
                entry["key_skew"] = s.key_skew
            if s.pair_rate is not None:
                entry["pair_rate"] = s.pair_rate
            streams.append(entry)
        return {"name": self.name, "operators": ops, "streams": streams}

    @classmethod
    def from_dict(cls, data: Any, where: str = "topology") -> Topology:
        """A topology document (schema ``model/schemas/topology.schema.json``); the operator
        bound is checked first, then the schema, then the rules a schema cannot state."""
        if isinstance(data, dict) and isinstance(data.get("operators"), list):
            check_operators(len(data["operators"]), f"{where}.operators")
        validate(data, "topology", where)
        operators = []
        for raw in data["operators"]:
            values = present(raw)
            parallelism = int(values.pop("parallelism", 1))
            operators.append(Operator(**{k: v if k in ("name", "role") else float(v) for k, v in values.items()},
                                      parallelism=parallelism))
        streams = []
        for raw in data.get("streams") or ():
            values = present(raw)
            streams.append(Stream(src=values["from"], dst=values["to"], grouping=values.get("grouping", "shuffle"),
                                  key_skew=float(values.get("key_skew", 0.0)),
                                  pair_rate=None if "pair_rate" not in values else float(values["pair_rate"])))
        try:
            return cls(name=present(data).get("name", "topology"), operators=tuple(operators), streams=tuple(streams))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Topology:
        """Read a topology from YAML or JSON; errors name the file and field."""
        data = read_document(path)
        try:
            return cls.from_dict(data, where=str(path))
        except InputError as exc:
            msg = str(exc)
            raise InputError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
