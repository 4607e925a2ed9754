"""The example job's ``shifting`` kind (issue 36 item 3): its hot key as SQL, and bad schedules
refused in one line. The live behaviour (the hot GroupAggregate subtask 2 before a shift, 0
after, on the job's own counters) is tests/test_live_loop_live.py's."""

from __future__ import annotations

import pytest

from streamsched.cli import main
from streamsched.engines.flink import local
from streamsched.errors import InputError


def test_the_hot_key_alternates_at_the_given_times():
    assert local.SHIFT_KEYS == (0, 4)
    assert local.shift_sql([100]) == "CASE WHEN UNIX_TIMESTAMP() < 100 THEN 0 ELSE 4 END"
    assert local.shift_sql([100, 250, 400]) == ("CASE WHEN UNIX_TIMESTAMP() < 100 THEN 0 WHEN UNIX_TIMESTAMP() < 250 "
                                                "THEN 4 WHEN UNIX_TIMESTAMP() < 400 THEN 0 ELSE 4 END")
    source, sink, insert = local.example_sql(100, 100, 2, 10, "shifting", shift_at=[100, 250])
    assert "'fields.k.max' = '9'" in source and "blackhole" in sink
    assert ("SELECT CASE WHEN MOD(ABS(v), 1000) < 700 THEN CASE WHEN UNIX_TIMESTAMP() < 100 THEN 0 "
            "WHEN UNIX_TIMESTAMP() < 250 THEN 4 ELSE 0 END ELSE k END AS k") in insert
    # the other kinds are as they were
    assert local.example_sql(100, 100, 2, 10, "skewed")[2] == local.example_sql(100, 100, 2, 10, "skewed", shift_at=())[2]


@pytest.mark.parametrize("kind, times, message", [
    ("shifting", [], "kind shifting needs --shift-at, increasing Unix seconds >= 0 (got [])"),
    ("shifting", [200, 100], "increasing Unix seconds >= 0 (got [200, 100])"),
    ("shifting", [100, 100], "(got [100, 100])"),
    ("shifting", [-5], "(got [-5])"),
    ("skewed", [100], "--shift-at is for kind shifting only"),
])
def test_bad_schedules_are_refused(kind, times, message):
    with pytest.raises(InputError) as error:
        local.example_sql(100, 100, 2, 10, kind, shift_at=times)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_bad_shift_time_exits_2_in_one_line(tmp_path, capsys):
    code = main(["flink-local", "submit-example", "--dir", str(tmp_path), "--kind", "shifting", "--shift-at", "+10,x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "error: --shift-at '+10,x': expected Unix seconds or +SECONDS, comma-separated"
    assert list(tmp_path.iterdir()) == []
