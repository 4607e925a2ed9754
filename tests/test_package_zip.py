"""The package as Spark executors import it: from the zip ``pipeline.session.package_zip``
ships with ``addPyFile`` (issue 18). A data file read through ``Path(__file__)`` is not found
there (``NotADirectoryError``: the calibration file failed so on a real standalone cluster,
tests/test_spark_cluster.py); every data file must be read as a package resource."""

from __future__ import annotations

import subprocess
import sys
import sysconfig

from streamsched.pipeline.session import package_zip

CHECK = """
import sys
sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[2])
import streamsched
assert streamsched.__file__.startswith(sys.argv[1]), streamsched.__file__
from streamsched import performance
from streamsched.evaluation import verdict
from streamsched.edge import model
from streamsched.schedulers.i_scheduler import calibration
assert "default" in performance.REGIMES and verdict.model_error()[1].startswith("median held-out error")
print(len(performance.REGIMES), len(model.coefficients().query_types), len(calibration()))
"""


def test_the_data_files_are_read_from_the_shipped_zip(tmp_path):
    archive = package_zip()
    # -S: no site-packages, so streamsched can only come from the zip; the dependencies from
    # the environment's site-packages appended after it
    done = subprocess.run([sys.executable, "-S", "-c", CHECK, str(archive), sysconfig.get_paths()["purelib"]],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    regimes, query_types, thresholds = map(int, done.stdout.split())
    assert regimes >= 2 and query_types >= 1 and thresholds >= 1
