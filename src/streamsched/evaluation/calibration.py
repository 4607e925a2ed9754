"""Calibrating the performance model on the papers' measurements (issue 17, item 1).

``data/paper_measurements.csv`` holds every throughput the papers state in their text or tables
(i-scheduler.txt and t3-scheduler.txt section 6, fischer-metis-scheduler.txt Table I and V-B1,
the thesis chapter 4), one row per statement: an absolute throughput, or a gain of one scheduler
over another (a number or a range such as "8-46 %", "higher", "similar"). Each row names the
setup (workload, cluster, scheduler, setting) the model recomputes.

:func:`fit` finds the model's free parameters (:data:`FREE`) for one paper hardware by least
squares on log errors (``scipy.optimize.least_squares``, deterministic starts) with a weak prior
towards :class:`ModelParams`' defaults, so that directions the data do not constrain stay put.
:func:`calibrate` fits every hardware, reports the error of every cell in and out of sample
(leave-one-experiment-out: each experiment's rows are refitted without them and predicted) and
whether each paper's ordering of schedulers is reproduced. ``benchmarks/calibrate_model.py``
writes the result to ``data/model_calibration.json``, which :mod:`streamsched.performance` reads.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from scipy.optimize import least_squares

from streamsched.evaluation.comparison import params_for
from streamsched.errors import InputError
from streamsched import workloads
from streamsched.performance import ModelParams, predict
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import scheduler_class
from streamsched.schedulers.i_scheduler import find_threshold

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
MEASUREMENTS = DATA_DIR / "paper_measurements.csv"

#: The fitted parameters: (name, lower bound, upper bound, fitted in log10).
FREE: tuple[tuple[str, float, float, bool], ...] = (
    ("cycles_per_load_unit", 1e3, 1e11, True),
    ("serialize_cycles_per_tuple", 1e1, 1e7, True),
    ("serialize_cycles_per_byte", 1e-2, 1e3, True),
    ("network_latency_s", 1e-5, 1e-1, True),
    ("max_cpu_utilisation", 0.3, 1.0, False),
)
#: Model settings a measurement's setup names (section 6.1: the I/O-intensive runs throttle the
#: spouts, Storm's max spout pending; Fischer ran Storm 0.9 with acking on, V-B2).
SETTINGS: dict[str, dict[str, Any]] = {
    "application": {}, "cpu-intensive": {}, "io-intensive": {"max_spout_pending": 1}, "acking": {"acking": True},
    "application-throttled": {"max_spout_pending": 1},
}
#: The setting a throttled variant gives the application runs (:func:`throttled_variant`).
THROTTLED = "application-throttled"
QUANTITIES = ("throughput", "gain_pct", "gain_tps")
UNITS = ("tuples/10s/task", "tuples/s", "%")
#: Weight of the prior, per decade (log parameters) or per unit (utilisation), against log errors.
PRIOR_WEIGHT = 0.05

_COLUMNS = ("paper", "source", "read_from", "hardware", "experiment", "workload", "cluster", "sweep", "aggregate",
            "setting", "scheduler", "scheduler_params", "baseline", "baseline_cluster", "quantity", "value", "low",
            "high", "unit", "modelled", "note", "quote")


@dataclass(frozen=True)
class Measurement:
    """One statement of a paper (a row of ``paper_measurements.csv``; ``line`` is its line)."""

    line: int
    paper: str
    source: str
    read_from: str
    hardware: str
    experiment: str
    workload: str
    cluster: str
    sweep: tuple[str, ...]
    aggregate: str
    setting: str
    scheduler: str
    scheduler_params: tuple[tuple[str, Any], ...]
    baseline: str
    baseline_cluster: str
    quantity: str
    value: float | None
    low: float | None
    high: float | None
    unit: str
    modelled: bool
    note: str
    quote: str

    def label(self) -> str:
        versus = f" over {self.baseline}" if self.baseline else ""
        where = f"{self.workload} on {self.cluster}".replace("{n}", "N")
        return f"{self.scheduler}{versus}, {where}"

    def measured_text(self) -> str:
        if self.value is not None:
            return f"{self.value:g}"
        if self.high is None:
            return f"> {self.low:g}"
        if self.low is None:
            return f"< {self.high:g}"
        return f"{self.low:g} to {self.high:g}"


def load_measurements(path: str | Path = MEASUREMENTS) -> list[Measurement]:
    """The rows of ``path``; a malformed row raises ``InputError`` naming file, line and field."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}:1: missing column {missing[0]!r}")
        return [_measurement(path, i, raw) for i, raw in enumerate(reader, start=2)]


def _measurement(path: Path, line: int, raw: dict[str, str]) -> Measurement:
    def bad(name: str, why: str) -> InputError:
        return InputError(f"{path}:{line}: field {name}: {why}, got {raw.get(name)!r}")

    def number(name: str) -> float | None:
        text = (raw.get(name) or "").strip()
        if not text:
            return None
        try:
            value = float(text)
        except ValueError:
            raise bad(name, "not a number") from None
        if not math.isfinite(value):
            raise bad(name, "not finite")
        return value

    if raw.get("quantity") not in QUANTITIES:
        raise bad("quantity", "must be one of " + ", ".join(QUANTITIES))
    if raw.get("unit") not in UNITS:
        raise bad("unit", "must be one of " + ", ".join(UNITS))
    if raw.get("read_from") not in ("text", "table", "figure"):
        raise bad("read_from", "must be text, table or figure")
    if raw.get("modelled") not in ("yes", "no"):
        raise bad("modelled", "must be yes or no")
    if raw.get("setting") not in SETTINGS:
        raise bad("setting", "must be one of " + ", ".join(SETTINGS))
    value, low, high = number("value"), number("low"), number("high")
    if value is None and low is None and high is None:
        raise bad("value", "a value, a low or a high bound is needed")
    if low is not None and high is not None and low > high:
        raise bad("low", "above high")
    if raw["quantity"] == "throughput" and (value is None or value <= 0):
        raise bad("value", "a throughput must be a number > 0")
    if raw["quantity"] != "throughput" and not raw.get("baseline"):
        raise bad("baseline", "a gain needs a baseline scheduler")
    sweep = tuple(raw.get("sweep", "").split())
    templated = "{n}" in raw.get("workload", "") or "{n}" in raw.get("cluster", "")
    if templated != bool(sweep):
        raise bad("sweep", "a sweep goes with {n} in workload or cluster, and only then")
    if sweep and raw.get("aggregate") not in ("mean", "each"):
        raise bad("aggregate", "a sweep is aggregated by mean or each")
    params: list[tuple[str, Any]] = []
    for item in (raw.get("scheduler_params") or "").split():
        key, _, text = item.partition("=")
        if not key or not text:
            raise bad("scheduler_params", "expected key=value items")
        params.append((key, int(text) if re.fullmatch(r"-?\d+", text) else text))
    return Measurement(
        line=line, paper=raw["paper"], source=raw["source"], read_from=raw["read_from"], hardware=raw["hardware"],
        experiment=raw["experiment"], workload=raw["workload"], cluster=raw["cluster"], sweep=sweep,
        aggregate=raw.get("aggregate") or "", setting=raw["setting"], scheduler=raw["scheduler"],
        scheduler_params=tuple(params), baseline=raw.get("baseline") or "",
        baseline_cluster=raw.get("baseline_cluster") or "", quantity=raw["quantity"], value=value, low=low,
        high=high, unit=raw["unit"], modelled=raw["modelled"] == "yes", note=raw.get("note") or "",
        quote=raw.get("quote") or "")


# ------------------------------------------------------------------ the model's side of a row
@dataclass(frozen=True)
class Instance:
    """A scheduler's placement of a workload on a cluster, evaluated under a setting."""

    scheduler: str
    workload: str
    cluster: str
    scheduler_params: tuple[tuple[str, Any], ...]
    setting: str


@dataclass(frozen=True)
class Case:
    """What the model predicts for one row (one member of a sweep when ``aggregate`` is each):
    ``instance``'s throughput, or its ratio to ``baseline`` (averaged over ``members``)."""

    measurement: Measurement
    members: tuple[tuple[Instance, Instance | None], ...]


def cases(measurement: Measurement) -> list[Case]:
    """The row as model cases: one per sweep member with ``each``, one for the mean or a plain row."""
    m = measurement

    def pair(n: str | None) -> tuple[Instance, Instance | None]:
        def sub(text: str) -> str:
            return text.replace("{n}", n) if n is not None else text

        own = Instance(m.scheduler, sub(m.workload), sub(m.cluster), m.scheduler_params, m.setting)
        if not m.baseline:
            return own, None
        return own, Instance(m.baseline, own.workload, sub(m.baseline_cluster) or own.cluster,
                             m.scheduler_params, m.setting)

    if not m.sweep:
        return [Case(m, (pair(None),))]
    if m.aggregate == "each":
        return [Case(m, (pair(n),)) for n in m.sweep]
    return [Case(m, tuple(pair(n) for n in m.sweep))]


#: Scheduler parameters fixed so that placements do not depend on the machine's load:
#: I-Scheduler keeps the papers' reduction (phi of theta = 1 s, i-scheduler.txt section 6) but
#: its solver may run until it proves the reduced problem optimal.
LOAD_INDEPENDENT = {"i-scheduler": {"phi": find_threshold(1.0), "theta": 600.0}}


@lru_cache(maxsize=None)
def placed(scheduler: str, workload: str, cluster: str,
           scheduler_params: tuple[tuple[str, Any], ...]) -> tuple[TaskGraph, Any, Placement]:
    """The graph, cluster and placement of one instance (seed 0, cached: schedulers run once)."""
    graph, nodes = workloads.workload(workload), workloads.cluster(cluster)
    params = {**LOAD_INDEPENDENT.get(scheduler, {}), **dict(scheduler_params)}
    scheduler_obj = scheduler_class(scheduler)(**params_for(scheduler, params))
    return graph, nodes, scheduler_obj.schedule(graph, nodes, seed=0)


@lru_cache(maxsize=8192)
def throughput(instance: Instance, params: ModelParams, unit: str = "tuples/s") -> float:
    """The model's throughput of ``instance`` under ``params`` and the instance's setting; in the
    papers' unit ``tuples/10s/task`` it is the executed tuples per 10 s per bolt task
    (i-scheduler.txt and t3-scheduler.txt section 6: "tuples executed in each bolt's task per 10 second period")."""
    graph, nodes, placement = placed(instance.scheduler, instance.workload, instance.cluster,
                                     instance.scheduler_params)
    x = predict(graph, nodes, placement, params.with_(**SETTINGS[instance.setting])).throughput_tps
    if unit == "tuples/10s/task":
        bolts = int(np.count_nonzero(np.bincount(graph.dst, minlength=graph.n_tasks)))
        return 10.0 * x / bolts
    return x


def predicted(case: Case, params: ModelParams) -> float:
    """The model's value of a case in the row's quantity (a gain is in percent)."""
    m = case.measurement
    if m.quantity == "throughput":
        return throughput(case.members[0][0], params, m.unit)
    values = []
    for own, base in case.members:
        a, b = throughput(own, params), throughput(base, params)
        values.append(a - b if m.quantity == "gain_tps" else 100.0 * (a / b - 1.0))
    return float(np.mean(values))


def log_error(measurement: Measurement, value: float) -> float:
    """Signed log error of a predicted value: ``log(predicted / measured)`` for a throughput,
    ``log((1 + g_pred) / (1 + g_meas))`` for a gain (the log of the throughput ratios); 0 inside a
    stated range, the log distance to the nearer bound outside it."""
    m = measurement
    if m.quantity == "throughput":
        return math.log(max(value, 1e-300) / m.value)
    ratio = max(1.0 + value / 100.0, 1e-12)
    if m.value is not None:
        return math.log(ratio / (1.0 + m.value / 100.0))
    low = 1.0 + m.low / 100.0 if m.low is not None else 0.0
    high = 1.0 + m.high / 100.0 if m.high is not None else math.inf
    if ratio < low:
        return math.log(ratio / low)
    if ratio > high:
        return math.log(ratio / high)
    return 0.0


def error_pct(log_err: float) -> float:
    """A log error as a percentage: ``100 (e^|r| - 1)``."""
    return 100.0 * math.expm1(abs(log_err))


# ------------------------------------------------------------------ fitting
def _spec(free: Iterable[str] | None) -> list[tuple[str, float, float, bool]]:
    names = [name for name, *_ in FREE]
    chosen = names if free is None else list(free)
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise InputError(f"calibration: {unknown[0]!r} is not a free parameter (free: {', '.join(names)})")
    return [spec for spec in FREE if spec[0] in chosen]


def _to_vector(params: ModelParams, spec) -> np.ndarray:
    return np.array([math.log10(getattr(params, name)) if logged else getattr(params, name)
                     for name, _, _, logged in spec])


def _from_vector(z: np.ndarray, base: ModelParams, spec) -> ModelParams:
    values = {}
    for (name, low, high, logged), v in zip(spec, z):
        value = 10.0 ** v if logged else float(v)
        values[name] = float(min(max(value, low), high))
    return base.with_(**values)


@dataclass
class Fit:
    """The parameters found, the cost and the signed log error of every case."""

    params: ModelParams
    cost: float
    errors: list[float] = field(default_factory=list)


def fit(case_list: list[Case], prior: ModelParams | None = None, prior_weight: float = PRIOR_WEIGHT,
        starts: Iterable[ModelParams] | None = None, free: Iterable[str] | None = None) -> Fit:
    """Least squares over the ``free`` parameters (default: all of :data:`FREE`; the others stay
    at ``prior``) on the log errors of ``case_list`` plus the prior term ``prior_weight x (z -
    z_prior)`` (``z``: log10 parameters, utilisation as is). Every start is run (trust-region
    reflective within the bounds of :data:`FREE`) and the lowest cost kept: deterministic."""
    prior = prior or ModelParams()
    spec = _spec(free)
    z_prior = _to_vector(prior, spec)
    low = np.array([math.log10(lo) if logged else lo for _, lo, _, logged in spec])
    high = np.array([math.log10(hi) if logged else hi for _, _, hi, logged in spec])

    def residuals(z: np.ndarray) -> np.ndarray:
        params = _from_vector(z, prior, spec)
        data = [log_error(c.measurement, predicted(c, params)) for c in case_list]
        return np.concatenate([np.array(data), prior_weight * (z - z_prior)])

    best: Fit | None = None
    for start in (list(starts) if starts is not None else default_starts(prior)):
        z0 = np.clip(_to_vector(start, spec), low + 1e-9, high - 1e-9)
        result = least_squares(residuals, z0, bounds=(low, high), diff_step=1e-3, xtol=1e-6, ftol=1e-8,
                               max_nfev=120)
        if best is None or result.cost < best.cost - 1e-12:
            best = Fit(_from_vector(result.x, prior, spec), float(result.cost))
    assert best is not None
    best.errors = [log_error(c.measurement, predicted(c, best.params)) for c in case_list]
    return best


def default_starts(prior: ModelParams) -> list[ModelParams]:
    """The prior, then one start per regime of the model: processing-bound (CPU cost 100x,
    utilisation at T3's 0.8 cap), serialisation-bound (remote tuples 1000x dearer than
    processing) and latency-bound (network latency 50x)."""
    return [prior,
            prior.with_(cycles_per_load_unit=prior.cycles_per_load_unit * 100, max_cpu_utilisation=0.8),
            prior.with_(cycles_per_load_unit=prior.cycles_per_load_unit / 100,
                        serialize_cycles_per_tuple=prior.serialize_cycles_per_tuple * 1000),
            prior.with_(network_latency_s=prior.network_latency_s * 50)]


# ------------------------------------------------------------------ orderings
@dataclass(frozen=True)
class OrderingPair:
    """An order a paper states: ``row`` beats ``other`` (two absolute throughputs of one setup),
    or, for a gain row (``other`` None), its scheduler beats its baseline when ``own_wins``."""

    row: Measurement
    other: Measurement | None
    own_wins: bool

    def names(self) -> tuple[str, str]:
        """(better, worse) as scheduler names, with the cluster where the two differ."""
        m = self.row
        if self.other is not None:
            return m.scheduler, self.other.scheduler
        own = m.scheduler + (f" on {m.cluster}" if m.baseline_cluster else "")
        base = m.baseline + (f" on {m.baseline_cluster}" if m.baseline_cluster else "")
        return (own, base) if self.own_wins else (base, own)


def ordering_pairs(measurements: Iterable[Measurement]) -> list[OrderingPair]:
    """The orders of schedulers a paper states: of two different absolute throughputs of one
    setup, the higher wins; a gain whose value or range lies above 0 (``low >= 0``: "higher")
    says the scheduler wins, below 0 (``high <= 0``: "lower") the baseline wins; a range around
    0 ("similar") states no order."""
    rows = [m for m in measurements if m.modelled]
    pairs: list[OrderingPair] = []
    absolute = [m for m in rows if m.quantity == "throughput"]
    for i, a in enumerate(absolute):
        for b in absolute[i + 1:]:
            same_setup = (a.paper, a.workload, a.cluster, a.setting) == (b.paper, b.workload, b.cluster, b.setting)
            if same_setup and a.scheduler != b.scheduler and a.value != b.value:
                pairs.append(OrderingPair(a, b, True) if a.value > b.value else OrderingPair(b, a, True))
    for m in rows:
        if m.quantity == "throughput":
            continue
        low = m.value if m.value is not None else m.low
        high = m.value if m.value is not None else m.high
        if low is not None and (low > 0 or (low == 0 and m.value is None)):
            pairs.append(OrderingPair(m, None, True))
        elif high is not None and (high < 0 or (high == 0 and m.value is None)):
            pairs.append(OrderingPair(m, None, False))
    return pairs


def throttled_variant(measurements: Iterable[Measurement], hardware: str) -> list[Measurement]:
    """``hardware``'s modelled rows as the hardware ``<hardware>-throttled`` whose application
    runs have their spouts throttled (max spout pending 1, :data:`THROTTLED`): the papers do not
    state the applications' spout limit, so both readings are fitted."""
    return [replace(m, hardware=f"{hardware}-throttled", setting=THROTTLED if m.setting == "application" else m.setting)
            for m in measurements if m.modelled and m.hardware == hardware]


def ordering_reproduced(pair: OrderingPair, params: ModelParams) -> bool:
    """Whether the model orders the pair as the paper does (strictly, every sweep member)."""
    if pair.other is not None:
        return predicted(cases(pair.row)[0], params) > predicted(cases(pair.other)[0], params)
    gains = [predicted(case, params) for case in cases(pair.row)]
    return all(g > 0 for g in gains) if pair.own_wins else all(g < 0 for g in gains)


# ------------------------------------------------------------------ the whole calibration
def calibrate(measurements: list[Measurement] | None = None, hold_out: bool = True,
              free: Iterable[str] | None = None, variants: Iterable[str] = (), progress=None) -> dict[str, Any]:
    """Fit every hardware's parameters on its modelled rows, the leave-one-experiment-out error
    of every row (its experiment's rows refitted without them, from the full fit and the prior),
    the orderings per paper, and each set's error on the other hardware's rows. ``variants``:
    hardware also fitted with the applications' spouts throttled (:func:`throttled_variant`);
    ``free``: the parameters fitted (default: all of :data:`FREE`). JSON-ready."""
    measurements = measurements if measurements is not None else load_measurements()
    for hardware in variants:
        measurements = measurements + throttled_variant(measurements, hardware)
    prior = ModelParams()
    free = [name for name, *_ in _spec(free)]
    out: dict[str, Any] = {"free_parameters": free, "prior_weight": PRIOR_WEIGHT,
                           "prior": {name: getattr(prior, name) for name in free}, "sets": {}, "rows": []}
    groups = sorted({m.hardware for m in measurements if m.modelled})
    fitted: dict[str, ModelParams] = {}
    row_out: dict[int, dict[str, Any]] = {}
    for hardware in groups:
        rows = [m for m in measurements if m.modelled and m.hardware == hardware]
        all_cases = [c for m in rows for c in cases(m)]
        if progress:
            progress(f"{hardware}: fitting {len(all_cases)} cases")
        full = fit(all_cases, prior, free=free)
        fitted[hardware] = full.params
        held: dict[int, list[float]] = {}
        held_pred: dict[int, list[float]] = {}
        experiments = sorted({m.experiment for m in rows})
        if hold_out:
            for name in experiments:
                if progress:
                    progress(f"{hardware}: holding out {name}")
                train = [c for c in all_cases if c.measurement.experiment != name]
                test = [c for c in all_cases if c.measurement.experiment == name]
                if not train:
                    continue
                held_fit = fit(train, prior, starts=[full.params, prior], free=free)
                for c in test:
                    value = predicted(c, held_fit.params)
                    held.setdefault(c.measurement.line, []).append(log_error(c.measurement, value))
                    held_pred.setdefault(c.measurement.line, []).append(value)
        for c, err in zip(all_cases, full.errors):
            entry = row_out.setdefault((hardware, c.measurement.line), {"predicted": [], "error_pct": [],
                                                                        "log_error": []})
            entry["predicted"].append(predicted(c, full.params))
            entry["log_error"].append(err)
            entry["error_pct"].append(error_pct(err))
        for line, errs in held.items():
            row_out[(hardware, line)].update(held_out_predicted=held_pred[line], held_out_log_error=errs,
                                             held_out_error_pct=[error_pct(e) for e in errs])
        in_sample = [abs(e) for e in full.errors]
        out_sample = [abs(e) for errs in held.values() for e in errs]
        out["sets"][hardware] = {
            "params": {name: getattr(full.params, name) for name in free},
            "setting": SETTINGS[THROTTLED] if hardware.endswith("-throttled") else {},
            "papers": sorted({m.paper for m in rows}),
            "rows": len(rows), "cases": len(all_cases), "experiments": experiments,
            "cost": full.cost,
            "fit_error_pct": _summary(in_sample),
            "held_out_error_pct": _summary(out_sample) if out_sample else None,
        }
    for m in measurements:
        entry = {"line": m.line, "paper": m.paper, "source": m.source, "read_from": m.read_from,
                 "hardware": m.hardware, "experiment": m.experiment, "setup": m.label(),
                 "setting": m.setting, "quantity": m.quantity, "unit": m.unit,
                 "measured": m.measured_text(), "modelled": m.modelled, "note": m.note}
        entry.update(row_out.get((m.hardware, m.line), {}))
        out["rows"].append(entry)
    out["orderings"] = orderings(measurements, fitted)
    out["transfer"] = {
        name: {other: _summary([abs(log_error(c.measurement, predicted(c, params)))
                                for m in measurements if m.modelled and m.hardware == other for c in cases(m)])
               for other in groups}
        for name, params in fitted.items()}
    return out


def orderings(measurements: list[Measurement], fitted: dict[str, ModelParams]) -> dict[str, Any]:
    """Per paper and per fitted set holding its rows: the ordering pairs the paper states and
    which the set reproduces."""
    result: dict[str, Any] = {}
    for paper in sorted({m.paper for m in measurements}):
        for hardware in sorted({m.hardware for m in measurements if m.paper == paper and m.modelled}):
            rows = [m for m in measurements if m.paper == paper and m.hardware == hardware and m.modelled]
            details = []
            for pair in ordering_pairs(rows):
                m, (better, worse) = pair.row, pair.names()
                where = f"{m.workload} on {m.cluster}".replace("{n}", "N")
                details.append({"source": m.source, "setup": where, "setting": m.setting, "better": better,
                                "worse": worse, "reproduced": ordering_reproduced(pair, fitted[hardware])})
            done = sum(d["reproduced"] for d in details)
            result.setdefault(paper, {})[hardware] = {"pairs": len(details), "reproduced": done,
                                                      "all_reproduced": done == len(details), "details": details}
    return result


def _summary(values: list[float]) -> dict[str, float]:
    """Median, mean and largest of absolute log errors, as percentages."""
    arr = np.asarray(values, float)
    if arr.size == 0:
        return {"n": 0}
    return {"n": int(arr.size), "median": error_pct(float(np.median(arr))), "mean": error_pct(float(arr.mean())),
            "max": error_pct(float(arr.max())),
            "within_25pct": int(np.count_nonzero(arr <= math.log(1.25)))}
