"""A Prometheus server beside a local Flink (``streamsched flink-local start --prometheus``):
Flink's Prometheus reporter on every Flink process, and a ``prometheus`` process (Debian's
package; ``scripts/ensure-system.sh`` installs it) scraping them.

- **Reporter** (:func:`reporter_settings`): ``metrics.reporter.prom.factory.class:
  org.apache.flink.metrics.prometheus.PrometheusReporterFactory`` (the jar is in the wheel's
  ``pyflink/plugins/metrics-prometheus``; Flink finds plugins through ``FLINK_PLUGINS_DIR``,
  :func:`plugins_dir`) and ``metrics.reporter.prom.port: LOW-HIGH``, a range of free ports, one
  per process: every JobManager and TaskManager takes the first free port of the range
  (``PrometheusReporterFactory`` gives the range to its ``PortRange``), so one config file
  serves them all.
- **Prometheus** (:func:`start`): a config written to ``<dir>/prometheus/prometheus.yml``
  scraping the reporter ports (job ``flink``) and any further targets (job ``streamsched``,
  e.g. ``watch --metrics-port``), data in ``<dir>/prometheus/data``, listening on 127.0.0.1;
  ``<dir>/prometheus.json`` records its process id, so that :func:`stop` (called by
  ``flink-local stop``) ends exactly it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from streamsched.errors import InputError, StreamschedError

STATE_FILE = "prometheus.json"
REPORTER = "prom"
REPORTER_FACTORY = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
#: Seconds between two scrapes of the local Prometheus (also its evaluation interval).
SCRAPE_INTERVAL_S = 1.0


@dataclass
class LocalPrometheus:
    """A started Prometheus: its URL, directory, process id and what it scrapes."""

    url: str
    base: Path
    pid: int
    flink_targets: list[str] = field(default_factory=list)
    other_targets: list[str] = field(default_factory=list)
    scrape_interval_s: float = SCRAPE_INTERVAL_S


def binary() -> str:
    """The ``prometheus`` executable, or an error saying how to install it."""
    found = shutil.which("prometheus")
    if found is None:
        raise InputError("prometheus is not installed: apt-get install prometheus (Debian's package; `make system` "
                         "installs it)")
    return found


def plugins_dir(flink_home: Path) -> Path:
    """The wheel's Flink plugins directory, holding ``metrics-prometheus/``; what Flink's start
    scripts export as ``FLINK_PLUGINS_DIR`` (without it a process looks in ``./plugins``)."""
    path = flink_home / "plugins"
    if not any((path / "metrics-prometheus").glob("flink-metrics-prometheus-*.jar")):
        raise InputError(f"{path}: no metrics-prometheus/flink-metrics-prometheus-*.jar; reinstall apache-flink-libraries")
    return path


def free_port_range(count: int, low: int = 20000, high: int = 60000) -> list[int]:
    """``count`` consecutive ports free on 127.0.0.1 now (the reporter takes a range)."""
    for start in range(low + os.getpid() % 1000 * 37 % (high - low - count), high - count, count):
        ports = list(range(start, start + count))
        if all(_free(p) for p in ports):
            return ports
    raise StreamschedError(f"no {count} consecutive free ports between {low} and {high}")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def reporter_settings(ports: Sequence[int]) -> dict[str, str]:
    """Flink config keys that enable the Prometheus reporter on ``ports`` (consecutive)."""
    return {f"metrics.reporter.{REPORTER}.factory.class": REPORTER_FACTORY,
            f"metrics.reporter.{REPORTER}.port": f"{min(ports)}-{max(ports)}"}


def config_text(flink_targets: Sequence[str], other_targets: Sequence[str] = (),
                scrape_interval_s: float = SCRAPE_INTERVAL_S) -> str:
    """prometheus.yml: job ``flink`` scrapes the reporters, job ``streamsched`` the rest."""
    interval = f"{int(round(scrape_interval_s * 1000))}ms"
    jobs = [{"job_name": "flink", "static_configs": [{"targets": list(flink_targets)}]}]
    if other_targets:
        jobs.append({"job_name": "streamsched", "static_configs": [{"targets": list(other_targets)}]})
    return yaml.safe_dump({"global": {"scrape_interval": interval, "evaluation_interval": interval,
                                      "scrape_timeout": interval}, "scrape_configs": jobs}, sort_keys=False)


def _get(url: str, timeout: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


def start(base: str | Path, flink_targets: Sequence[str], other_targets: Sequence[str] = (), port: int = 0,
          scrape_interval_s: float = SCRAPE_INTERVAL_S, retention: str = "7d", wait_s: float = 60.0) -> LocalPrometheus:
    """Start Prometheus in ``base/prometheus`` scraping the targets (``host:port``); return once
    it answers ``/-/ready``. ``port`` 0: a free one."""
    base = Path(base).resolve()
    if (base / STATE_FILE).exists() and _ours(load(base)):
        raise InputError(f"{base}: a Prometheus runs there already ({load(base).url})")
    if not (scrape_interval_s > 0):
        raise InputError(f"scrape interval: {scrape_interval_s!r}; must be > 0 s")
    executable = binary()
    home = base / "prometheus"
    (home / "data").mkdir(parents=True, exist_ok=True)
    (base / "log").mkdir(parents=True, exist_ok=True)
    config = home / "prometheus.yml"
    config.write_text(config_text(flink_targets, other_targets, scrape_interval_s))
    port = port or free_port_range(1)[0]
    command = [executable, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
               f"--storage.tsdb.retention.time={retention}", f"--web.listen-address=127.0.0.1:{port}",
               "--log.level=warn"]
    with open(base / "log" / "prometheus.log", "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    server = LocalPrometheus(f"http://127.0.0.1:{port}", base, proc.pid, list(flink_targets), list(other_targets),
                             scrape_interval_s)
    (base / STATE_FILE).write_text(json.dumps({**asdict(server), "base": str(base)}, indent=1))
    deadline = time.time() + wait_s
    while True:
        if proc.poll() is not None:
            tail = (base / "log" / "prometheus.log").read_text(errors="replace")[-2000:]
            stop(base)
            raise StreamschedError(f"prometheus exited ({proc.returncode}):\n{tail}")
        try:
            if _get(f"{server.url}/-/ready")[0] == 200:
                return server
        except OSError:
            pass
        if time.time() > deadline:
            stop(base)
            raise StreamschedError(f"prometheus at {server.url} not ready after {wait_s:g} s")
        time.sleep(0.25)


def load(base: str | Path) -> LocalPrometheus:
    """The Prometheus :func:`start` recorded in ``base``."""
    path = Path(base).resolve() / STATE_FILE
    try:
        data = json.loads(path.read_text())
        return LocalPrometheus(data["url"], Path(data["base"]), int(data["pid"]), list(data["flink_targets"]),
                               list(data["other_targets"]), float(data["scrape_interval_s"]))
    except FileNotFoundError:
        raise InputError(f"{path}: no Prometheus was started there") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a local Prometheus record ({exc})") from None


def _ours(server: LocalPrometheus) -> bool:
    """The recorded process runs and is this Prometheus (its command line names the directory)."""
    try:
        waited, _ = os.waitpid(server.pid, os.WNOHANG)
        if waited == server.pid:
            return False
    except ChildProcessError:
        pass
    try:
        return str(server.base / "prometheus").encode() in Path(f"/proc/{server.pid}/cmdline").read_bytes()
    except OSError:
        return False


def stop(base: str | Path, timeout_s: float = 20.0) -> bool:
    """End the Prometheus recorded in ``base`` (SIGTERM, SIGKILL after ``timeout_s``); whether
    one was running. No record: False."""
    if not (Path(base).resolve() / STATE_FILE).exists():
        return False
    server = load(base)
    running = _ours(server)
    if running:
        try:
            os.killpg(server.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.time() + timeout_s
        while _ours(server) and time.time() < deadline:
            time.sleep(0.1)
        if _ours(server):
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    (server.base / STATE_FILE).unlink(missing_ok=True)
    return running
