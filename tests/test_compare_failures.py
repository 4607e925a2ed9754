"""``compare`` keeps what finished, and its ``--json`` output is JSON: a scheduler that crashes
or runs out of memory becomes a row with status ``error`` (exit code 4), and native libraries'
messages (METIS prints to fd 1) never reach stdout."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from streamsched.cli import main
from streamsched.schedulers import scheduler_class


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_crashing_scheduler_becomes_an_error_row(monkeypatch, capsys):
    def crash(self, graph, cluster, params, seed):
        raise RuntimeError("boom\nsecond line of the traceback text")

    monkeypatch.setattr(scheduler_class("ols"), "place", crash)
    code, out, err = run(capsys, "compare", "-w", "diamond-30", "-c", "heterogeneous-10",
                         "--schedulers", "even,ols,t3", "--json")
    assert code == 4
    rows = {row["scheduler"]: row for row in json.loads(out)["results"]}
    assert rows["ols"]["status"] == "error" and rows["ols"]["error"] == "RuntimeError: boom"
    assert rows["even"]["status"] == "ok" and rows["t3"]["status"] == "ok" and rows["t3"]["valid"] is True
    assert "1 of 3 schedulers failed: ols" in err


def test_out_of_memory_keeps_the_report(monkeypatch, tmp_path, capsys):
    def out_of_memory(self, graph, cluster, params, seed):
        raise MemoryError("Unable to allocate 4.1 GiB for an array with shape (58624, 9380)")

    monkeypatch.setattr(scheduler_class("t3"), "place", out_of_memory)
    report = tmp_path / "r.html"
    code, out, _ = run(capsys, "compare", "-w", "linear-10", "-c", "homogeneous-10", "--schedulers", "t3,even",
                       "--report", str(report))
    assert code == 4
    assert "MemoryError: Unable to allocate 4.1 GiB" in report.read_text()
    saved = {row["scheduler"]: row for row in json.loads(report.with_suffix(".json").read_text())["results"]}
    assert saved["t3"]["status"] == "error" and saved["even"]["valid"] is True
    assert "even" in out and "error" in out  # the table is printed too


@pytest.mark.slow
def test_metis_messages_stay_off_stdout(tmp_path):
    """Two tasks into ten parts (one per node of homogeneous-10): METIS prints
    ``***Cannot bisect a graph with 0 vertices!`` on file descriptor 1 (a subprocess, since
    in-process capture does not see fd-level writes). With --verbose the message reaches stderr
    through the ``streamsched.native`` logger; stdout stays one JSON document either way."""
    (tmp_path / "g.csv").write_text("src,dst,rate\n1,2,5\n")
    command = [sys.executable, "-c", "from streamsched.cli import run; run()"]
    args = ["compare", "--graph", str(tmp_path / "g.csv"), "-c", "homogeneous-10", "--schedulers", "metis", "--json"]
    for extra in ([], ["--verbose"]):
        done = subprocess.run(command + extra + args, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        (row,) = json.loads(done.stdout)["results"]
        assert row["scheduler"] == "metis" and row["valid"] is True and row["inter_node_traffic"] == 0.0
        assert "Cannot bisect" not in done.stdout
    assert "METIS: ***Cannot bisect a graph with 0 vertices!" in done.stderr


def test_json_has_no_infinite_numbers(monkeypatch, capsys):
    """A gap of inf (no bound) prints as null: strict parsers reject ``Infinity``."""
    even = scheduler_class("even")
    original = even.place
    monkeypatch.setattr(even, "place", lambda self, *args: original(self, *args).with_metadata(gap=math.inf))
    code, out, _ = run(capsys, "compare", "-w", "linear-10", "-c", "homogeneous-10", "--schedulers", "even", "--json")

    def refuse(constant: str):
        raise ValueError(f"not JSON: {constant}")

    (row,) = json.loads(out, parse_constant=refuse)["results"]
    assert code == 0 and row["gap"] is None and row["valid"] is True
