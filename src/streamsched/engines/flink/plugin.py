"""streamsched's placement plugin for Flink 2.3's adaptive scheduler: its Java sources (in
``java/``, our own code), its build with ``javac`` against the jars of the installed
``apache-flink-libraries`` wheel (no Maven), and where the jar is.

The jar holds a replacement of ``org.apache.flink.runtime.scheduler.adaptive.allocator.
DefaultSlotAssigner`` (assigns as Flink 2.3 does without a plan) and ``streamsched.flink.
PlanPlacer`` (places subtasks where a plan says). Put it on the JobManager's class path before
``flink-dist`` (Flink's ``lib/``: its start scripts put every other jar first) and set
``jobmanager.scheduler: adaptive`` (docs/engines.md, "Applying a placement").

``python -m streamsched.engines.flink.plugin`` builds it (``make setup`` does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from streamsched.errors import InputError, StreamschedError

#: Flink's version the plugin is built for and refuses anything else than (checked by the jar
#: on the JobManager too).
FLINK_SERIES = "2.3"
JAR_NAME = f"streamsched-flink-placement-{FLINK_SERIES}.jar"
SOURCES = Path(__file__).parent / "java"
#: JobManager JVM system property and environment variable naming the plan file or directory.
PLAN_PROPERTY = "streamsched.flink.placement"
PLAN_ENVIRONMENT = "STREAMSCHED_FLINK_PLACEMENT"
#: The class the plugin replaces (its jar shows on the JobManager's class path).
REPLACED_CLASS = "org.apache.flink.runtime.scheduler.adaptive.allocator.DefaultSlotAssigner"


def flink_home() -> Path:
    """The Flink distribution of the ``apache-flink-libraries`` wheel (``lib/``, ``bin/``)."""
    try:
        home = Path(str(distribution("apache-flink-libraries").locate_file("pyflink")))
    except PackageNotFoundError:
        raise InputError("apache-flink-libraries is not installed: pip install 'streamsched[flink]' "
                         "(or `make setup`) installs Flink's jars") from None
    if not (home / "lib").is_dir() or not list((home / "lib").glob("flink-dist-*.jar")):
        raise InputError(f"{home}: no lib/flink-dist-*.jar; reinstall apache-flink-libraries")
    return home


def flink_version(home: Path) -> str:
    """The version of ``lib/flink-dist-<version>.jar``."""
    (dist,) = sorted((home / "lib").glob("flink-dist-*.jar"))[:1]
    return dist.name[len("flink-dist-"):-len(".jar")]


def jar_path() -> Path:
    """Where the built jar is (inside the installed package)."""
    return SOURCES / JAR_NAME


def installed_jar() -> Path:
    """The built jar, or an error saying how to build it."""
    jar = jar_path()
    if not jar.is_file():
        raise InputError(f"{jar}: the Flink placement plugin is not built; run "
                         "`python -m streamsched.engines.flink.plugin` (part of `make setup`)")
    return jar


def build(force: bool = False) -> Path:
    """Compile the Java sources against the wheel's Flink jars into :func:`jar_path` (skipped
    when the jar is newer than every source, unless ``force``)."""
    jar = jar_path()
    sources = sorted(SOURCES.rglob("*.java"))
    if not force and jar.is_file() and all(jar.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return jar
    home = flink_home()
    version = flink_version(home)
    if not version.startswith(FLINK_SERIES + "."):
        raise InputError(f"{home}: Flink {version}; the placement plugin is written for Flink {FLINK_SERIES}.x")
    javac = shutil.which("javac")
    if javac is None:
        raise InputError("javac is missing: install a JDK 17 (Debian: openjdk-17-jdk-headless; `make system`)")
    classpath = os.pathsep.join(str(p) for p in sorted((home / "lib").glob("*.jar")))
    with tempfile.TemporaryDirectory(prefix="streamsched-plugin-") as tmp:
        classes = Path(tmp) / "classes"
        run = subprocess.run([javac, "--release", "17", "-Xlint:all", "-Werror", "-cp", classpath,
                              "-d", str(classes), *map(str, sources)], capture_output=True, text=True)
        if run.returncode != 0:
            raise StreamschedError(f"javac failed on the Flink placement plugin: {run.stderr.strip()[-2000:]}")
        staged = Path(tmp) / JAR_NAME
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n"
                         f"Implementation-Title: streamsched Flink placement plugin\r\n"
                         f"Implementation-Version: built against Flink {version}\r\n\r\n")
            for cls in sorted(classes.rglob("*.class")):
                out.write(cls, cls.relative_to(classes).as_posix())
        shutil.move(str(staged), jar)
    return jar


if __name__ == "__main__":
    try:
        print(build(force="--force" in sys.argv[1:]))
    except StreamschedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
