"""The throughput model fitted on Flink measurements (``data/flink_model.json``, written by
``benchmarks/flink_placement.py --fit`` from ``data/flink_measurements.json``): it loads, its
stated held-out error is what the recorded measurements give when recomputed, the prediction
follows the model's equations on a hand-computed case, and the fit recovers parameters that
generated its data."""

from __future__ import annotations

import json
import statistics
from importlib import resources

import pytest

from streamsched.errors import InputError
from streamsched.evaluation.engine_models import (
    FIXED_PARAMS, MEASUREMENTS_FORMAT, Case, fit_params, fitted_model, graph_of, held_out, predicted_source_rate,
    read_measurements,
)
from streamsched.performance import ModelParams

HZ = 2.7e9  # the model's default core clock (Node.ghz)


def _data(name: str) -> dict:
    return json.loads(resources.files("streamsched").joinpath("data", name).read_text())


def test_the_flink_model_loads_and_names_what_it_was_fitted_on():
    model = fitted_model("flink")
    assert model is not None and model.engine == "flink"
    document = _data("flink_model.json")
    assert "benchmarks/flink_placement.py" in document["fitted_on"]
    assert model.error == pytest.approx(document["held_out_error_pct"]["median"] / 100)
    for name, value in document["params"].items():
        assert getattr(model.params, name) == pytest.approx(value)


def test_the_stated_held_out_error_is_recomputed_from_the_recorded_measurements():
    document = _data("flink_model.json")
    cases, cores, reference = read_measurements(_data("flink_measurements.json"), "flink_measurements.json")
    assert document["measurements"] == len(cases)
    rows = held_out(cases, cores, reference)
    errors = [100 * r["error"] for r in rows]
    stated = document["held_out_error_pct"]
    assert stated["n"] == len(rows)
    assert stated["median"] == pytest.approx(statistics.median(errors), rel=1e-6)
    assert stated["max"] == pytest.approx(max(errors), rel=1e-6)
    # each held-out case is predicted from another placement's reading or the job's default one
    assert all(r["reference"] != r["placement"] for r in rows)
    # the no-effect baseline: each placement predicted to run as fast as the reference in its round
    ref = {c.round: c.measured for c in cases if c.placement == reference}
    baseline = statistics.median(100 * abs(ref[c.round] - c.measured) / c.measured for c in cases)
    assert stated["no_effect_baseline_median"] == pytest.approx(baseline, rel=1e-9)
    assert stated["verdict"].startswith("poor") == (stated["median"] > baseline)
    assert stated["verdict"] in fitted_model("flink").source


def _pair(load=(0.2, 0.3), rate=1000.0, bytes_rate=1e6) -> Case:
    graph = graph_of({"name": "pair", "operators": ["a", "b"], "task_operator": [0, 1], "load": list(load),
                      "src": [0], "dst": [1], "rate": [rate], "bytes_rate": [bytes_rate]}, "pair")
    return Case(0, "ref", graph, ("tm-1", "tm-1"), 1000.0)


def test_prediction_by_hand():
    """A source (0.2 cores) and a sink (0.3 cores) joined by 1000 records/s of 1000 B, on a
    1-core host: one load unit = one core (``cycles_per_load_unit`` = the clock)."""
    params = ModelParams(**FIXED_PARAMS).with_(cycles_per_load_unit=HZ, serialize_cycles_per_byte=270.0)
    ref = _pair()
    # one TaskManager: the host's core holds 0.5 cores of work at the read rate, so 2x the rate
    assert predicted_source_rate(ref, ("tm-1", "tm-1"), params, 1) == pytest.approx(2000.0)
    # two TaskManagers: 1e6 B/s x 270 cycles/B = 0.1 core at each end, 0.7 cores: 1/0.7 x the rate
    assert predicted_source_rate(ref, ("tm-1", "tm-2"), params, 1) == pytest.approx(1000.0 / 0.7)
    # two cores: the sink's thread (0.3 + 0.1 core) limits before the host (0.7 of 2 cores)
    assert predicted_source_rate(ref, ("tm-1", "tm-2"), params, 2) == pytest.approx(1000.0 / 0.4)


def test_the_fit_recovers_the_parameters_that_generated_its_measurements():
    truth = ModelParams(**FIXED_PARAMS).with_(cycles_per_load_unit=1.3e9, serialize_cycles_per_byte=40.0)
    ref = _pair(load=(0.6, 0.9), bytes_rate=5e6)
    placements = [("tm-1", "tm-1"), ("tm-1", "tm-2"), ("tm-2", "tm-1")]
    cases = [Case(0, f"p{k}", ref.graph, tms, predicted_source_rate(ref, tms, truth, 2))
             for k, tms in enumerate(placements)]
    fitted = fit_params(cases, {0: ref}, 2)
    for c in cases:
        assert predicted_source_rate(ref, c.taskmanagers, fitted, 2) == pytest.approx(c.measured, rel=1e-3)
    assert fitted.serialize_cycles_per_byte / fitted.cycles_per_load_unit == pytest.approx(40.0 / 1.3e9, rel=1e-2)


def test_bad_measurements_name_the_field():
    with pytest.raises(InputError, match=r"m\.format"):
        read_measurements({"format": "x"}, "m")
    with pytest.raises(InputError, match=r"m\.rounds"):
        read_measurements({"format": MEASUREMENTS_FORMAT, "rounds": []}, "m")
    entry = {"taskmanagers": ["tm-1"], "windows": [{"source_records_per_s": 1.0}],
             "graph": {"name": "g", "operators": ["a"], "task_operator": [0], "load": [0.1], "src": [], "dst": [],
                       "rate": [], "bytes_rate": []}}
    assert len(read_measurements({"format": MEASUREMENTS_FORMAT, "rounds": [{"placements": {"p": entry}}]}, "m")[0]) == 1
    broken = {**entry, "taskmanagers": ["tm-1", "tm-2"]}
    with pytest.raises(InputError, match=r"m\.rounds\[0\]\.placements\.p: 2 TaskManagers for 1 subtasks"):
        read_measurements({"format": MEASUREMENTS_FORMAT, "rounds": [{"placements": {"p": broken}}]}, "m")
    no_graph = {k: v for k, v in entry.items() if k != "graph"}
    with pytest.raises(InputError, match=r"m\.rounds\[0\]\.placements\.p"):
        read_measurements({"format": MEASUREMENTS_FORMAT, "rounds": [{"placements": {"p": no_graph}}]}, "m")
