"""Store hygiene without Spark: stale work directories, the key of an ingest's input."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

from streamsched.pipeline import store as st


def test_claim_records_the_owner_and_removes_only_stale_runs(tmp_path):
    live = st.claim_tmp(tmp_path, "live")
    assert json.loads((live / st.OWNER).read_text())["pid"] == os.getpid()
    # A run in another process that is alive, and one that was killed (SIGKILL: no clean-up).
    code = ("import sys, time; from streamsched.pipeline import store; store.claim_tmp(sys.argv[1], sys.argv[2]); "
            "print('claimed', flush=True); time.sleep(60)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    running, killed = (subprocess.Popen([sys.executable, "-c", code, str(tmp_path), name], stdout=subprocess.PIPE,
                                        env=env) for name in ("running", "killed"))
    try:
        for child in (running, killed):
            assert child.stdout.readline().strip() == b"claimed"
        killed.kill()
        killed.wait()
        (tmp_path / "tmp" / "killed" / "part-0.parquet").write_bytes(b"x")
        # An old directory without a lock (a run of an earlier version) and a recent one.
        old, recent = tmp_path / "tmp" / "old", tmp_path / "tmp" / "recent"
        old.mkdir(), recent.mkdir()
        os.utime(old, (time.time() - 7200, time.time() - 7200))
        st.claim_tmp(tmp_path, "next")
        assert sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.is_dir()) == ["live", "next", "recent",
                                                                                     "running"]
    finally:
        running.kill()
        running.wait()
    assert [p.name for p in st.remove_stale_runs(tmp_path)] == ["running"]


def test_input_key_follows_contents_and_settings(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("1\n"), b.write_text("1\n")
    key = st.input_key([a], {"window": 60})
    assert st.input_key([b], {"window": 60}) == key  # same content under another name
    assert st.input_key([a], {"window": 30}) != key
    b.write_text("2\n")
    assert st.input_key([b], {"window": 60}) != key
    assert st.find_ingested(tmp_path, key) is None
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    (snapshot / st.MANIFEST).write_text("{}")
    st.record_ingested(tmp_path, key, {"snapshots": [str(snapshot)], "run_id": "r"})
    assert st.find_ingested(tmp_path, key)["run_id"] == "r"
    (snapshot / st.MANIFEST).unlink()  # the snapshot is gone: ingest again
    assert st.find_ingested(tmp_path, key) is None


def test_reingesting_the_same_files_reuses_the_snapshot_unless_forced(spark, tmp_path):
    import shutil
    from pathlib import Path

    import pytest

    pytest.importorskip("pyspark")
    from streamsched.pipeline.ingest import Window, ingest

    inputs = tmp_path / "in"
    shutil.copytree(Path(__file__).parent / "fixtures" / "pipeline" / "native", inputs)
    store = tmp_path / "store"
    first = ingest(spark, [inputs], store, Window(seconds=10))
    again = ingest(spark, [inputs], store, Window(seconds=10))
    assert not first["reused"] and again["reused"]
    assert again["snapshots"] == first["snapshots"] and again["run_id"] == first["run_id"]
    forced = ingest(spark, [inputs], store, Window(seconds=10), force=True)
    assert not forced["reused"] and forced["snapshots"] != first["snapshots"]
    assert not any((store / "tmp").iterdir()) if (store / "tmp").exists() else True


def test_input_key_reads_a_file_once_then_again_once_it_changed(tmp_path, monkeypatch):
    """The CLI's check for an earlier ingest and the ingest both key the input: one read of each
    file, unless it changed in between."""
    data = tmp_path / "traffic-1.csv"
    data.write_text("a\n")
    reads = []
    digest = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda handle, name: reads.append(handle.name) or digest(handle, name))
    first = st.input_key([data], {})
    assert st.input_key([data], {}) == first and reads == [str(data)]
    data.write_text("b, longer\n")
    changed = st.input_key([data], {})
    assert len(reads) == 2
    # By hand: SHA-256 of the settings as JSON, then of each file's content hash.
    assert changed == hashlib.sha256(b"{}" + hashlib.sha256(b"b, longer\n").hexdigest().encode()).hexdigest()
