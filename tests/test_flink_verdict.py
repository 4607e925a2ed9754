"""The verdict on a Flink job: judged against the job's running placement (read-engine's
placement.json), and never by the Storm-fitted throughput model: by the set fitted on Flink
measurements (data/flink_model.json, streamsched.engine-model/1), or without one by traffic alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import placement_checker
from streamsched.cli import main
from streamsched.engines import flink
from streamsched.errors import InputError
from streamsched.evaluation.engine_models import FORMAT, fitted_model, load_engine_model
from streamsched.evaluation.verdict import verdict

FIXTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"


@pytest.fixture(scope="module")
def read_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("flink") / "read"
    assert main(["read-engine", "flink", "--dir", str(FIXTURE), "-o", str(out)]) == 0
    return out


def _compare(read_dir, capsys, *extra):
    capsys.readouterr()
    code = main(["compare", "--graph", str(read_dir), "--cluster", str(read_dir / "cluster.yaml"),
                 "--schedulers", "metis,even,t3", "--json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_flink_job_is_judged_against_its_running_placement_without_a_storm_model(read_dir, capsys, monkeypatch):
    monkeypatch.setattr("streamsched.job.fitted_model", lambda engine: None)  # as without data/flink_model.json
    code, document, err = _compare(read_dir, capsys)
    assert code == 0 and "baseline: the running placement" in err
    rows = {row["scheduler"]: row for row in document["results"]}
    reading = flink.read_capture(flink.load_capture(FIXTURE))
    assert rows["current"]["inter_node_traffic"] == pytest.approx(placement_checker.cut_traffic(reading.graph,
                                                                                                 reading.placement))
    decision = document["verdict"]
    assert decision["baseline"] == "current" and decision["model"] is None
    assert decision["inter_node_traffic"]["current"] == pytest.approx(rows["current"]["inter_node_traffic"])
    assert all("throughput_tps" not in row for row in document["results"])
    assert "no throughput model fitted on flink measurements" in decision["text"]
    assert "against current's" in decision["text"] and "predicted throughput" not in decision["text"]


def test_a_storm_comparison_keeps_even_as_its_baseline():
    rows = [{"scheduler": "metis", "rank": 1, "inter_node_traffic": 10.0, "throughput_tps": 100.0},
            {"scheduler": "even", "rank": 2, "inter_node_traffic": 20.0, "throughput_tps": 100.0}]
    decision = verdict(rows, 0.1, "default", "stated")
    assert decision["baseline"] == "even" and decision["inter_node_traffic"]["reduction_pct"] == pytest.approx(50.0)


def _model_file(tmp_path, **changes):
    document = {"format": FORMAT, "engine": "flink", "fitted_on": "benchmarks/flink (test)", "measurements": 6,
                "params": {"serialize_cycles_per_tuple": 9000.0}, "held_out_error_pct": {"median": 15.0, "n": 6}}
    document.update(changes)
    path = tmp_path / "flink_model.json"
    path.write_text(json.dumps(document))
    return path


def test_engine_model_files(tmp_path):
    model = load_engine_model(_model_file(tmp_path))
    assert model.engine == "flink" and model.error == pytest.approx(0.15)
    assert model.params.serialize_cycles_per_tuple == 9000.0 and "6 flink measurements" in model.source
    for changes, field in (({"format": "x"}, "format"), ({"params": {"nope": 1}}, "params.nope"),
                           ({"held_out_error_pct": {}}, "held_out_error_pct.median"), ({"measurements": 0}, "measurements")):
        with pytest.raises(InputError, match=f"flink_model.json.{field}"):
            load_engine_model(_model_file(tmp_path, **changes))


def test_the_shipped_flink_model_judges_a_flink_job(read_dir, capsys):
    shipped = fitted_model("flink")
    code, document, _ = _compare(read_dir, capsys)
    decision = document["verdict"]
    assert code == 0 and decision["model"] == "flink-fitted" and decision["baseline"] == "current"
    assert decision["model_error_pct"] == pytest.approx(100 * shipped.error)
    assert "benchmarks/flink_placement.py" in decision["model_error_source"]
    assert all("throughput_tps" in row for row in document["results"] if row.get("rank"))


def test_a_flink_fitted_model_is_used_when_one_exists(read_dir, capsys, tmp_path, monkeypatch):
    model = load_engine_model(_model_file(tmp_path))
    monkeypatch.setattr("streamsched.job.fitted_model", lambda engine: model if engine == "flink" else None)
    code, document, _ = _compare(read_dir, capsys)
    decision = document["verdict"]
    assert code == 0 and decision["model"] == "flink-fitted" and decision["model_error_pct"] == pytest.approx(15.0)
    assert "6 flink measurements" in decision["model_error_source"]
    assert all("throughput_tps" in row for row in document["results"] if row.get("rank"))
