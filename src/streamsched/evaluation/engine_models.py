"""Which fitted throughput model may judge a placement on a given engine.

The performance model's fitted sets (``data/model_calibration.json``) come from measurements
of Storm in the papers; they say nothing about Flink, whose network stack, slot sharing and
credit-based back-pressure differ. A placement read from another engine is therefore judged
by a set fitted on that engine's own measurements, ``data/<engine>_model.json``, or by
inter-node traffic alone with a plain statement that no fitted model applies.

File format ``streamsched.engine-model/1`` (JSON)::

    {"format": "streamsched.engine-model/1", "engine": "flink",
     "fitted_on": "what was measured: benchmark, command, machine, date",
     "measurements": 24,                 # placements x jobs measured
     "params": {...},                    # ModelParams fields (streamsched.performance)
     "held_out_error_pct": {"median": 12.0, "n": 24}}

The measurements such a fit needs from Flink, per subtask and placement: busy, idle and
back-pressured time per second (``busyTimeMsPerSecond``, ``idleTimeMsPerSecond``,
``backPressuredTimeMsPerSecond``) and records in/out per second at saturation.
``data/flink_model.json`` is fitted by ``benchmarks/flink_placement.py --fit`` on the raw
measurements it records in ``data/flink_measurements.json`` (:func:`read_measurements`,
:func:`fit_params`, :func:`held_out`; docs/benchmarks.md, "Flink placements").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES
from streamsched.performance import ModelParams, predict

FORMAT = "streamsched.engine-model/1"
#: Engines the calibration's own sets were fitted on (the papers measured Storm).
CALIBRATED_ENGINES = ("storm",)


@dataclass(frozen=True)
class EngineModel:
    """A parameter set fitted on one engine's measurements and its held-out error."""

    engine: str
    params: ModelParams
    error: float          # relative (0.12 = 12 %)
    source: str           # one line: what it was fitted on


def load_engine_model(path: str | Path) -> EngineModel:
    """Read and check a ``streamsched.engine-model/1`` file (``InputError`` naming the field)."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{where}: file not found") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{where}: not JSON ({str(exc).splitlines()[0]})") from None
    return _parse(data, where)


def _parse(data, where: str) -> EngineModel:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{where}.format: expected {FORMAT!r}")
    engine = data.get("engine")
    if not isinstance(engine, str) or not engine:
        raise InputError(f"{where}.engine: expected the engine's name")
    params = data.get("params")
    known = {f.name for f in fields(ModelParams)}
    if not isinstance(params, dict):
        raise InputError(f"{where}.params: expected a mapping of model parameters")
    unknown = sorted(set(params) - known)
    if unknown:
        raise InputError(f"{where}.params.{unknown[0]}: not a model parameter")
    held = data.get("held_out_error_pct")
    median = held.get("median") if isinstance(held, dict) else None
    if isinstance(median, bool) or not isinstance(median, (int, float)) or not (math.isfinite(median) and median > 0):
        raise InputError(f"{where}.held_out_error_pct.median: expected a positive number (a fit states its error)")
    count = data.get("measurements")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(f"{where}.measurements: expected the number of measurements fitted on (>= 1)")
    try:
        model_params = ModelParams(**params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}.params: {exc}") from None
    fitted_on = str(data.get("fitted_on", "unstated"))
    judged = f"; {held['verdict']}" if isinstance(held.get("verdict"), str) else ""
    return EngineModel(engine, model_params, float(median) / 100.0,
                       f"fitted on {count} {engine} measurements ({fitted_on}); median held-out error {median:g} %{judged}")


def fitted_model(engine: str) -> EngineModel | None:
    """The set fitted on ``engine``'s measurements shipped as ``data/<engine>_model.json``, or
    None when there is none (Flink today)."""
    resource = resources.files("streamsched").joinpath("data", f"{engine}_model.json")
    if not resource.is_file():
        return None
    return _parse(json.loads(resource.read_text(encoding="utf-8")), f"streamsched/data/{engine}_model.json")


def no_model_text(engine: str) -> str:
    """What the verdict says when no fitted model applies to ``engine``."""
    return (f"no throughput model fitted on {engine} measurements exists (the model's fitted sets come from Storm "
            f"measurements in the papers), so no throughput is predicted: judged on inter-node traffic only")


# ------------------------------------------------------------------ fitting a set on Flink measurements
#: The raw measurements a Flink set is fitted on (``data/flink_measurements.json``, written by
#: ``benchmarks/flink_placement.py``): per round, per placement, the graph read from the running
#: job (one host: TaskManagers are its workers), each subtask's TaskManager, and the measured
#: source records/s at saturation of every measurement window.
MEASUREMENTS_FORMAT = "streamsched.flink-measurements/1"
#: The parameters fitted: the cycles one core-second of measured busy time stands for (M1), and
#: the cycles per byte leaving a TaskManager, at each end (M2). Per-record exchange cost is not
#: separable from per-byte cost with one record size and stays 0; no pending limit (Flink's
#: credit-based back-pressure has none).
FITTED_PARAMS = ("cycles_per_load_unit", "serialize_cycles_per_byte")
FIXED_PARAMS = {"serialize_cycles_per_tuple": 0.0, "message_overhead_bytes": 0.0, "max_spout_pending": 0,
                "max_cpu_utilisation": 1.0}


@dataclass(frozen=True)
class Case:
    """One measured placement of one round: the graph read while it ran, where each subtask ran,
    and the median measured source records/s at saturation."""

    round: int
    placement: str
    graph: TaskGraph
    taskmanagers: tuple[str, ...]
    measured: float


def read_measurements(data, where: str) -> tuple[list[Case], int, str]:
    """The cases of a ``streamsched.flink-measurements/1`` document, the host's cores, and the
    placement whose reading predicts the others (the job's running placement)."""
    if not isinstance(data, dict) or data.get("format") != MEASUREMENTS_FORMAT:
        raise InputError(f"{where}.format: expected {MEASUREMENTS_FORMAT!r}")
    cases = []
    for r, rnd in enumerate(data.get("rounds") or []):
        for name, entry in (rnd.get("placements") or {}).items():
            w = f"{where}.rounds[{r}].placements.{name}"
            try:
                graph = graph_of(entry["graph"], f"{w}.graph")
                rates = [float(x["source_records_per_s"]) for x in entry["windows"]]
                tms = tuple(str(t) for t in entry["taskmanagers"])
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{w}: {exc!r} (expected graph, taskmanagers, windows[].source_records_per_s)") from None
            if len(tms) != graph.n_tasks or not rates:
                raise InputError(f"{w}: {len(tms)} TaskManagers for {graph.n_tasks} subtasks, {len(rates)} windows")
            cases.append(Case(r, name, graph, tms, float(np.median(rates))))
    if not cases:
        raise InputError(f"{where}.rounds: no measured placement")
    return cases, int(data.get("host_cores", 0)) or 1, str(data.get("reference", cases[0].placement))


def graph_of(doc, where: str) -> TaskGraph:
    """The task graph of a measurement (its arrays as JSON lists; loads in cores)."""
    try:
        return TaskGraph.build(doc["name"], doc["operators"], doc["task_operator"], doc["load"], doc["src"], doc["dst"],
                               doc["rate"], doc["bytes_rate"], where=where, load_unit=CORES)
    except (KeyError, TypeError) as exc:
        raise InputError(f"{where}: {exc!r} (expected name, operators, task_operator, load, src, dst, rate, "
                         f"bytes_rate)") from None


def predicted_source_rate(reference: Case, taskmanagers: tuple[str, ...], params: ModelParams, host_cores: int) -> float:
    """Source records/s the model predicts for the placement ``taskmanagers`` from the graph read
    under ``reference`` (:func:`streamsched.performance.predict`, equations M1-M4): one node, this
    host, of ``host_cores`` cores; each TaskManager a worker, so bytes between TaskManagers pay
    the exchange cost and every subtask shares the host's CPU."""
    names = sorted(set(reference.taskmanagers) | set(taskmanagers))
    cluster = Cluster("flink-host", (Node("host", capacity=float(host_cores), slots=len(names), cores=host_cores),),
                      capacity_unit=CORES)
    placement = Placement.build(np.zeros(len(taskmanagers), np.int64),
                                np.array([names.index(t) for t in taskmanagers], np.int64))
    return predict(reference.graph, cluster, placement, params).source_tps


def fit_params(cases: list[Case], references: dict[int, Case], host_cores: int) -> ModelParams:
    """:data:`FITTED_PARAMS` minimising the squared log error of the predicted source rate of
    every case (each predicted from its round's reference reading): a coarse log grid, then
    Nelder-Mead from its best point (deterministic)."""
    base = ModelParams(**FIXED_PARAMS)

    def params_of(x) -> ModelParams:
        return base.with_(cycles_per_load_unit=float(10 ** x[0]), serialize_cycles_per_byte=float(10 ** x[1]))

    def cost(x) -> float:
        p = params_of(x)
        out = 0.0
        for c in cases:
            pred = predicted_source_rate(references[c.round], c.taskmanagers, p, host_cores)
            out += (math.log(pred) - math.log(c.measured)) ** 2 if pred > 0 and math.isfinite(pred) else 1e6
        return out

    grid = [(a, b) for a in np.linspace(8, 10.5, 11) for b in np.linspace(-1, 3, 17)]
    start = min(grid, key=cost)
    best = minimize(cost, np.array(start), method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-10})
    return params_of(best.x if best.fun <= cost(start) else start)


def held_out(cases: list[Case], host_cores: int, reference: str) -> list[dict]:
    """Leave one placement out: fit on the other placements (every round), predict the left-out
    one in each round from that round's reading of ``reference`` (of another placement when
    ``reference`` is the one left out); one row per case with the relative error."""
    placements = sorted({c.placement for c in cases}, key=[c.placement for c in cases].index)
    rows = []
    for left in placements:
        ref_name = reference if left != reference else next(p for p in placements if p != left)
        refs = {c.round: c for c in cases if c.placement == ref_name}
        train = [c for c in cases if c.placement != left and c.round in refs]
        params = fit_params(train, refs, host_cores)
        for c in cases:
            if c.placement == left and c.round in refs:
                pred = predicted_source_rate(refs[c.round], c.taskmanagers, params, host_cores)
                rows.append({"round": c.round, "placement": left, "reference": ref_name, "measured": c.measured,
                             "predicted": pred, "error": abs(pred - c.measured) / c.measured})
    return rows
