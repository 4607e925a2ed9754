"""The pipeline on a real standalone Spark cluster (issue 18): a Master and a Worker started from
the installed pyspark on free localhost ports; ``ingest``, one ``watch`` window and
``reproduce --engine spark`` run against it as a user runs them (the CLI in a subprocess, relative
paths, no ``PYSPARK_PYTHON``), and the snapshots equal the ``local[2]`` ones row for row.

The Worker's executors run ``python3`` from its PATH: a wrapper that starts this machine's
Python without site processing and with the virtualenv's third-party packages on PYTHONPATH,
so they have the dependencies but not streamsched (the editable install's ``.pth`` is not read):
streamsched reaches them only as the zip the driver ships.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pyspark = pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("java") is None, reason="Java is not installed")]

SPARK_HOME = Path(pyspark.__file__).parent
STREAMSCHED = [str(Path(sys.executable).parent / "streamsched")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _executor_python(where: Path) -> Path:
    """A ``python3`` with the virtualenv's packages but without streamsched (see module doc)."""
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True)
    wrapper = bin_dir / "python3"
    site = sysconfig.get_paths()["purelib"]
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH}}:{site}" exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    check = subprocess.run([str(wrapper), "-c", "import streamsched"], capture_output=True)
    assert check.returncode != 0, "the executors' python must not find streamsched by itself"
    return bin_dir


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a running Master with one Worker (2 cores, 1 GB)."""
    root = tmp_path_factory.mktemp("spark-cluster")
    executor_bin = _executor_python(root / "executor")
    port, ui = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    env = _clean_env(SPARK_LOG_DIR=str(root / "logs"), SPARK_WORKER_DIR=str(root / "work"),
                     PATH=f"{executor_bin}:{os.environ['PATH']}")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = [open(root / name, "w") for name in ("master.log", "worker.log")]
    processes = [subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)], env=env, stdout=logs[0], stderr=subprocess.STDOUT)]
    processes.append(subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
         "--memory", "1g", "--webui-port", str(_free_port()), master_url],
        env=env, stdout=logs[1], stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as answer:
                    if any(w.get("state") == "ALIVE" for w in json.load(answer).get("workers", [])):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                pytest.fail("the standalone cluster did not come up: " + (root / "worker.log").read_text()[-2000:])
            time.sleep(1)
        yield master_url
    finally:
        for process in processes[::-1]:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()


def _run(cwd: Path, *args: str) -> str:
    started = time.monotonic()
    done = subprocess.run(STREAMSCHED + list(args), cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"streamsched {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
    print(f"streamsched {' '.join(args)}: {time.monotonic() - started:.1f} s")
    return done.stdout


def _snapshot_rows(store: Path) -> list[dict[str, list]]:
    """Every table of every snapshot in ``store``, in order, rows sorted."""
    snapshots = sorted(p for p in (store / "snapshots").glob("*/*") if p.is_dir())
    return [{f.name: sorted(tuple(sorted(r.items())) for r in pq.read_table(f).to_pylist())
             for f in sorted(s.glob("*.parquet"))} for s in snapshots]


def test_ingest_and_watch_on_a_standalone_cluster_equal_local(cluster, tmp_path):
    _run(tmp_path, "gen-metrics", "-w", "wordcount", "--out", "m", "--rows", "20000", "--seed", "3")
    for master, store in ((cluster, "st-cluster"), ("local[2]", "st-local")):
        report = json.loads(_run(tmp_path, "ingest", "m", "--store", store, "--master", master, "--json"))
        assert report["rows_read"] == report["rows_accepted"] + sum(report["rows_quarantined"].values())
    local, remote = _snapshot_rows(tmp_path / "st-local"), _snapshot_rows(tmp_path / "st-cluster")
    assert len(local) == 1 and remote == local
    for master, store in ((cluster, "w-cluster"), ("local[2]", "w-local")):
        _run(tmp_path, "watch", "m", "--store", store, "-c", "homogeneous-10", "--once", "--window", "30",
             "--master", master)
    local, remote = _snapshot_rows(tmp_path / "w-local"), _snapshot_rows(tmp_path / "w-cluster")
    assert local and remote == local


def test_reproduce_with_the_spark_engine_on_a_standalone_cluster(cluster, tmp_path):
    _run(tmp_path, "reproduce", "micro-optimum", "--quick", "--engine", "spark", "--master", cluster, "--out", "r")
    _run(tmp_path, "reproduce", "micro-optimum", "--quick", "--out", "l")
    remote, local = ({(r["scheduler"], r["workload"], r["cluster"]): r for r in
                      json.loads((tmp_path / d / "results.json").read_text())} for d in ("r", "l"))
    assert remote and remote.keys() == local.keys()
    # Costs agree wherever they do not depend on the machine's speed: proven optima and the
    # schedulers without a wall-clock limit (i-scheduler's solver stops at theta seconds, and
    # two cells share the Worker's two cores).
    timed = {"i-scheduler"}
    differ = [(key, local[key]["inter_node_traffic"], row["inter_node_traffic"]) for key, row in remote.items()
              if (row["status"] == "optimal" or key[0] not in timed)
              and row["inter_node_traffic"] != local[key]["inter_node_traffic"]]
    assert not differ, differ
