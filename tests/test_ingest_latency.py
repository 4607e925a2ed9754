"""What issue 15 (item 3, latency) changed in how ingest runs, checked for its outcomes: the
progress line goes to stderr while ``--json`` keeps stdout one JSON document; the merge of a
partition sorted by group (one ``mapInArrow``) gives what merging each group alone gives, wherever
the batches cut the groups; a pipeline command loads only the pipeline's command module; the
Spark session of a Spark command is started from the command line before the options are read,
handed to the command, then used to start the Python workers, which import the installed
(compiled) PySpark rather than Spark's zip of its sources.
(How fast this is is measured in benchmarks/pipeline_ingest.py, docs/benchmarks.md.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyspark
import pytest

from streamsched import workloads
from streamsched.cli import main, spark_start
from streamsched.pipeline.blocks import read_blocks
from streamsched.pipeline.generate import generate_metrics
from streamsched.pipeline.merge import GROUP, MergeWindow, merge_group, merge_sorted
from streamsched.pipeline.session import WARM_UP_GROUP, compiled_workers_home
from streamsched.pipeline.sources import DEFAULT_TIME_RANGE


def _generated(tmp_path, rows: int = 3000, rows_per_file: int = 1000):
    """Generator output with every kind of dirty row (duplicates among them), several files."""
    out = tmp_path / "gen"
    summary = generate_metrics(workloads.workload("diamond-12"), out, rows=rows, dirty=0.05, seed=3,
                               rows_per_file=rows_per_file)
    return out, summary


def _rows(table: pa.Table) -> list[tuple]:
    """Every row as a tuple (packed doubles as bytes), sorted: order-free comparison."""
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


@pytest.mark.parametrize("batch_rows", [1, 2, 3, 7, 10_000])
def test_sorted_merge_equals_merging_each_group_alone(tmp_path, batch_rows):
    out, summary = _generated(tmp_path)
    assert summary["dirty"]["duplicate"] > 0 and summary["dirty"]["unknown_task"] > 0
    blocks = [b for f in sorted(out.glob("traffic-*.csv"))
              for b in read_blocks(str(f), "traffic", DEFAULT_TIME_RANGE)]
    table = pa.Table.from_batches(blocks)
    window = MergeWindow(30.0)
    declared = {"diamond-12": set(range(12))}
    # The reference: merge_group on each group alone, as the former applyInArrow ran it.
    keys = list(zip(*(table.column(c).to_pylist() for c in GROUP)))
    expected = []
    for key in sorted(set(keys), key=repr):
        group = table.filter(pa.array([k == key for k in keys]))
        expected.append(merge_group(group, window, declared))
    ordered = table.take(pc.sort_indices(table, [(c, "ascending") for c in GROUP]))
    got = pa.Table.from_batches(list(merge_sorted(iter(ordered.to_batches(batch_rows)), window, declared)),
                                schema=table.schema)
    assert _rows(got) == _rows(pa.concat_tables(expected))
    reasons = pc.value_counts(got.filter(pc.equal(got.column("part"), "rejected")).column("reason")).to_pylist()
    assert {r["values"] for r in reasons} >= {"duplicate", "unknown_task"}


@pytest.mark.spark
def test_progress_on_stderr_and_json_on_stdout(spark, tmp_path, capsys):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    out, summary = _generated(tmp_path)
    code = main(["ingest", str(out), "--store", str(tmp_path / "store"), "--window", "30", "--json",
                 "--progress-every", "0.05"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)  # stdout is the report alone
    assert report["rows_read"] == summary["traffic_rows"] + summary["load_rows"]  # dirty rows included
    lines = [line for line in captured.err.splitlines() if line.startswith("ingest: ")]
    files = len(summary["files"])
    assert lines[-1].startswith(f"ingest: done: {files}/{files} files read, {report['rows_read']:,} rows, ")
    counts = [int(m.group(1).replace(",", "")) for m in map(re.compile(r"files read, ([\d,]+) rows").search, lines)]
    assert counts == sorted(counts)  # rows read only grow


def test_command_line_parts_that_start_spark_early():
    assert spark_start.command_of(["--verbose", "ingest", "d", "--master", "local[1]"]) == (
        "ingest", ["d", "--master", "local[1]"])
    assert spark_start.master_of(["d", "--master", "local[1]"]) == "local[1]"
    assert spark_start.master_of(["d", "--master=spark://h:7077"]) == "spark://h:7077"
    assert spark_start.master_of(["d"]) == "local[2]"
    # Not a Spark command, or only its help: nothing is started.
    assert spark_start.start_early(["schedule", "-w", "diamond-12"]) is None
    assert spark_start.start_early(["ingest", "--help"]) is None
    assert spark_start._early == {}


@pytest.mark.spark
def test_the_early_session_is_handed_over_then_its_python_workers_are_warmed(spark):
    assert spark_start.start_early(["ingest", "d"]) == "local[2]"
    started = spark_start._early["local[2]"]
    assert spark_start.session("local[2]") is spark  # the active session, not a second one
    started.join(timeout=300)
    assert not started.is_alive() and started.error is None
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(WARM_UP_GROUP)
    assert jobs and all(tracker.getJobInfo(job).status == "SUCCEEDED" for job in jobs)


WORKER_PYSPARK = """
import os
from streamsched.pipeline.session import spark_session
spark = spark_session("local[1]")
def where(rows):
    import pyspark
    yield pyspark.__file__
print(spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()[0])
print("SPARK_HOME" in os.environ)
"""


@pytest.mark.slow
@pytest.mark.spark
def test_local_workers_import_the_installed_pyspark_not_its_source_zip(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_PYTHON")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", WORKER_PYSPARK], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    worker_pyspark, home_left_set = done.stdout.split()
    # Spark's own home puts .../pyspark/python/lib/pyspark.zip first on the workers' path.
    assert ".zip" not in worker_pyspark
    assert Path(worker_pyspark) == Path(pyspark.__file__)  # the installed, compiled PySpark
    assert home_left_set == "False"  # the process environment is left as it was
    (home,) = (tmp_path / "streamsched").glob("spark-home-*")
    assert sorted(p.name for p in home.iterdir()) == ["bin", "jars", "sbin"]
    assert (home / "jars").resolve() == Path(pyspark.__file__).parent / "jars"


def test_a_spark_home_with_dangling_links_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = compiled_workers_home()
    for link in home.iterdir():  # as if the PySpark it linked to had been removed and reinstalled
        link.unlink()
        link.symlink_to(tmp_path / "gone" / link.name)
    assert compiled_workers_home() == home
    assert (home / "bin" / "spark-submit").is_file()
    assert not (home / "python").exists()


@pytest.mark.slow
def test_a_pipeline_command_loads_only_the_pipeline_commands():
    script = ("import sys; from streamsched.cli import load_commands; load_commands(sys.argv[1]); "
              "print(sorted(m for m in sys.modules if m.startswith('streamsched.cli.')))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", script, "ingest"], capture_output=True, text=True,
                                       check=True).stdout.replace("'", '"'))
    assert "streamsched.cli.pipeline" in loaded
    # Not the scheduling commands (cli/core.py, with the schedulers, the comparison and the
    # performance model) either: the options and helpers the commands share are in cli/common.py.
    assert not {"streamsched.cli.evaluation", "streamsched.cli.optimal", "streamsched.cli.edge",
                "streamsched.cli.core"} & set(loaded)
    everything = json.loads(subprocess.run([sys.executable, "-c", script, "no-such-command"], capture_output=True,
                                           text=True, check=True).stdout.replace("'", '"'))
    assert {"streamsched.cli.evaluation", "streamsched.cli.optimal", "streamsched.cli.pipeline"} <= set(everything)
