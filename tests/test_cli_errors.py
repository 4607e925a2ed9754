"""Every CLI failure is one line on stderr with the right exit code (issue 16: unknown commands
and options printed typer's boxed usage text; an output path in a missing directory, or a
directory given as the output file, ended in a traceback)."""

from __future__ import annotations

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
    missing = tmp_path / "no" / "such" / "placement.json"
    argv = ["schedule", "-w", "wordcount", "-c", "homogeneous-10", "-s", "even", "--out"]
    assert main(argv + [str(missing)]) == 2
    assert capsys.readouterr().err == f"error: {missing}: No such file or directory\n"
    assert main(argv + [str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: Is a directory\n"
