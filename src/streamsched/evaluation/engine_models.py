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
``backPressuredTimeMsPerSecond``) and records in/out per second at saturation. No Flink set
is fitted yet: :func:`fitted_model` answers None for Flink until such a file exists.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from streamsched.errors import InputError
from streamsched.performance import ModelParams

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
    return EngineModel(engine, model_params, float(median) / 100.0,
                       f"fitted on {count} {engine} measurements ({fitted_on}); median held-out error {median:g} %")


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
