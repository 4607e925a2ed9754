"""Every CLI failure is one line on stderr with the right exit code (issue 16: unknown commands
and options printed typer's boxed usage text; an output path in a missing directory, or a
directory given as the output file, ended in a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamsched.cli import main


@pytest.mark.parametrize("argv, code, message", [
    (["nosuch"], 2, "error: No such command 'nosuch'. (see `streamsched --help`)"),
    (["schedule", "--bogus"], 2, "error: No such option: --bogus"),
    (["edge", "simulate", "--intervals", "0"], 2, "error: Invalid value for '--intervals'"),
])
def test_usage_errors_are_one_line(capsys, argv, code, message):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_an_unwritable_output_is_one_line_naming_it(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    under_a_file = tmp_path / "file" / "such" / "placement.json"
    argv = ["schedule", "-w", "wordcount", "-c", "homogeneous-10", "-s", "even", "--out"]
    assert main(argv + [str(under_a_file)]) == 2
    assert capsys.readouterr().err == (f"error: --out {under_a_file.parent}: {tmp_path / 'file'} is a file, "
                                       "not a directory\n")
    assert not (tmp_path / "no").exists()
    assert main(argv + [str(tmp_path / "no" / "such" / "placement.json")]) == 0  # a missing directory is made
    capsys.readouterr()
    assert main(argv + [str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: Is a directory\n"


def test_bad_input_to_a_spark_command_from_the_console_script_is_one_line(tmp_path):
    """The console script starts Spark before it reads the options (cli/spark_start.py), so the
    error comes after the JVM's start, whose launcher options make it print
    ``WARNING: Using incubator modules: jdk.incubator.vector`` on stderr (Spark's
    launcher/JavaModuleOptions.java): that line is held back, the error is all there is."""
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "traffic-1.csv").write_text("timestamp,topology,src_task\n1,t,1\n")
    script = Path(sys.executable).with_name("streamsched")
    done = subprocess.run([str(script), "ingest", str(tmp_path / "metrics"), "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr == (f"error: {tmp_path / 'metrics' / 'traffic-1.csv'}: line 1: missing column 'dst_task' "
                           "(have timestamp, topology, src_task)\n")
    assert done.stdout == ""
