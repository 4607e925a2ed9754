"""``watch --apply-flink URL``: the adaptive loop on a live Flink job (issue 36, items 1-2).

Each window of the loop goes through four steps, one after the other:

1. **Collect.** :class:`GridCollector` (``collect flink``'s :class:`FlinkCollector`) reads the
   job's counters once per window, on a grid (``k x W + 0.6 W``), so that each tumbling window of
   the watch holds one chunk of counter differences; it keeps each reading's measured source
   records/s and remote bytes/s (over the reading's own interval) and the job's placement.
2. **Ingest.** The watch (Spark Structured Streaming, :mod:`.watch`) turns the window's chunk into
   a snapshot and hands its graph to :meth:`LiveLoop.on_graph`.
3. **Re-plan** from the job's running placement (the collector's latest reading, or the plan
   the loop last applied when no reading has seen it yet) on the snapshot's graph, with the
   scheduler's ``replan``. Both placements are predicted on that graph: by throughput (model
   T1-T5, :mod:`streamsched.model.throughput`) where the cluster file gives every TaskManager's
   link capacities, else by remote bytes/s. Identical TaskManagers are relabelled so that the
   fewest subtasks move (:func:`streamsched.engines.flink.apply.relabel`).
4. **Decide.** A move is priced as its measured downtime: the records the sources do not send
   while the job is down (downtime x source rate) must be won back within ``payback`` windows,
   so the predicted gain must exceed ``downtime / (payback x W)`` and ``min_gain``; and it must do
   so in ``confirm`` consecutive windows (hysteresis: one noisy window moves nothing). Then the
   plan is applied through ``apply flink``'s code (:func:`streamsched.engines.flink.apply.apply`,
   which checks every subtask landed where planned and puts the job back when a step fails).
   Windows whose readings overlap an apply are ``settling`` (their rates include the downtime);
   the windows read after it are measured against the plan's prediction (``since_apply``).

Every window gives one line of the **journal** (:data:`JOURNAL_FORMAT`, JSON lines): its rows,
snapshot, measured throughput and remote bytes, both placements' predicted values, the decision
and why, the moved subtasks, the downtime, and, after an apply, the measured value against the
prediction. A window in which no reading landed gets a line too (``no-data``), so the journal
has one line per window, none missing or doubled; a restarted loop does not journal a window
twice. :func:`read_journal` and :func:`summary` read it back.

Faults: readings that fail (the JobManager unreachable) give one line when they begin to fail
and one when a reading succeeds again, and are tried again once per window (each within the
reading's deadline); the windows without a reading get ``no-data`` lines. An apply that fails
(``apply-failed``: apply put the job back, or says how far it got) is not tried again from the
same running placement with the same plan until the cluster file changes; a plan naming a
TaskManager that is no longer registered (one that died) is not applied.

Stopping: :meth:`LiveLoop.request_stop` (the CLI's SIGINT/SIGTERM handler) sets
:attr:`LiveLoop.stopped` (the watch ends within a poll) and returns True when the loop may stop
now; during an apply it returns False, the apply finishes and is journalled, and then
``stopped`` is set. No apply starts once a stop was requested. (No exception is raised into the
watch's thread: it waits in a py4j call to Spark, which would log the interrupt with a traceback.)
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from streamsched.engines import flink
from streamsched.engines.flink import apply as flink_apply
from streamsched.errors import InputError, StreamschedError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.decision import Decision
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.throughput import predict_throughput
from streamsched.pipeline.collect_rest import FlinkCollector, flink_baseline
from streamsched.pipeline.store import read_manifest

JOURNAL_FORMAT = "streamsched.live-loop/1"
#: Consecutive windows whose predicted gain must exceed the threshold before an apply.
CONFIRM_WINDOWS = 2
#: The loop's least predicted gain (fraction). Above ``apply flink``'s one-shot 5 %: between
#: windows of an unchanged job on the lab the predicted gain varied from +0.2 to +6 % (busy
#: times measured on 2 shared cores), once +61 % (the first window after a rescale).
MIN_GAIN = 0.10
#: Windows within which a move must win back the records its downtime costs.
PAYBACK_WINDOWS = 20
#: Downtime assumed before the loop has measured one (s): apply's two rescales took 0.4-3.2 s
#: here (docs/benchmarks.md); the job runs at a changed parallelism for a cooldown in between.
DEFAULT_DOWNTIME_S = 5.0
#: Where in each window the collector reads (fraction of the window after its start): a reading
#: covers the interval since the one before, so 0.6 of it lies in the window it is counted in,
#: and 0.4 of a window is left for the reading to land before the window ends.
GRID_OFFSET = 0.6


@dataclass
class ChunkFigures:
    """What one collector reading measured over its interval."""

    time: float
    seconds: float
    throughput: float | None
    remote_bytes_per_s: float | None


class GridCollector(FlinkCollector):
    """``collect flink`` reading once per window on the window grid; keeps each interval's
    measured figures (:class:`ChunkFigures`) and its reading (the job's placement)."""

    def __init__(self, *args, **kwargs):
        self.figures: list[ChunkFigures] = []
        self.latest: tuple[float, Any] | None = None  # (time, FlinkReading) of the last interval
        self._lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def interval(self, previous, current):
        graph, info = super().interval(previous, current)
        # the same reading as the chunk's (the estimator is deterministic), kept whole
        before = flink.Snapshot(previous["time"], previous["documents"], self.url)
        after = flink.Snapshot(current["time"], current["documents"], self.url)
        base, _resets = flink_baseline(before, after, self.job_id)
        reading = flink.read_capture(flink.Capture(self.job_id, (base, after), self.url, self.url), own_windows=False)
        with self._lock:
            self.figures.append(ChunkFigures(current["time"], current["time"] - previous["time"],
                                             flink_apply.measured_source_rate(reading),
                                             reading.report["measured_per_s"].get("bytes_in_remote")))
            del self.figures[:-1000]
            self.latest = (current["time"], reading)
        return graph, info

    def figures_between(self, start: float, end: float) -> list[ChunkFigures]:
        with self._lock:
            return [f for f in self.figures if start <= f.time < end]

    def latest_reading(self) -> tuple[float, Any] | None:
        with self._lock:
            return self.latest

    def follow_grid(self, window_s: float, stop: threading.Event,
                    report_error: Callable[[str], None] = lambda message: None) -> None:
        """Read now, then at ``k x window_s + GRID_OFFSET x window_s`` until ``stop`` is set; the
        next reading after failed ones differences over the longer interval. ``report_error``
        gets one line when readings begin to fail (an outage) and one when one succeeds again."""
        failing_since, failed = None, 0
        while not stop.is_set():
            try:
                self.poll()
            except StreamschedError as exc:
                if failing_since is None:
                    failing_since = time.time()
                    report_error(f"reading failed ({exc}); reading again once per window")
                failed += 1
            else:
                if failing_since is not None:
                    report_error(f"reading again after {time.time() - failing_since:.0f} s ({failed} failed "
                                 f"reading{'s' if failed > 1 else ''})")
                    failing_since, failed = None, 0
            now = time.time()
            target = (math.floor(now / window_s - GRID_OFFSET) + 1 + GRID_OFFSET) * window_s
            stop.wait(max(0.0, target - now))


@dataclass
class LiveLoop:
    """The re-planning step of ``watch --apply-flink`` (module docstring): ``on_graph`` per
    window, ``on_cluster`` when the cluster file changes."""

    scheduler: Any
    cluster: Cluster
    collector: GridCollector
    url: str
    job_id: str
    journal: Path
    window_s: float
    plan_dir: Path
    replan_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    min_gain: float = MIN_GAIN
    confirm: int = CONFIRM_WINDOWS
    payback: float = PAYBACK_WINDOWS
    dry_run: bool = False
    log: Callable[[str], None] = lambda message: None
    apply_fn: Callable[..., Any] = flink_apply.apply
    record_apply: Callable[[float, int], None] = lambda downtime, moved: None
    decisions: list[Decision] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.confirm < 1:
            raise InputError(f"--confirm-windows: {self.confirm}; must be at least 1")
        if not (math.isfinite(self.payback) and self.payback > 0):
            raise InputError(f"--payback: {self.payback!r}; must be a number of windows > 0")
        self.streak = 0
        self.downtime_s: float | None = None
        self.applied: dict[str, Any] | None = None   # the last apply: window, plan, times, prediction
        self.cluster_changed = False
        #: (running placement, plan) -> why its apply failed: not tried again until the cluster changes
        self.failed: dict[tuple, str] = {}
        self.busy = False
        self.stopping = False
        self.stopped = threading.Event()  # the watch ends: a stop was asked and no apply is in progress
        self._lock = threading.Lock()
        self.journaled = {row["window"]["end"] for row in read_journal(self.journal) if "window" in row} \
            if self.journal.exists() else set()
        self.last_end = max(self.journaled) if self.journaled else None

    # ------------------------------------------------------------------ stopping
    def request_stop(self) -> bool:
        """A stop was asked (Ctrl-C, SIGTERM): True when the loop may stop now, False during an
        apply (it stops once the apply is journalled)."""
        with self._lock:
            self.stopping = True
            if not self.busy:
                self.stopped.set()
            return not self.busy

    # ------------------------------------------------------------------ the watch's calls
    def on_cluster(self, cluster: Cluster) -> list:
        self.cluster = cluster
        self.cluster_changed = True
        self.failed.clear()  # plans that failed on the old cluster may be tried on the new one
        self.streak = 0  # windows weighed on other capacities confirm nothing
        self.log(f"cluster file changed: {', '.join(_links(cluster))}")
        return []

    def on_graph(self, graph: TaskGraph, snapshot: str | None = None) -> Decision | None:
        manifest = read_manifest(snapshot) if snapshot else {}
        window = manifest.get("window") or {}
        end = float(window.get("end", time.time()))
        start = end - self.window_s
        if end in self.journaled:
            return None  # a replayed window a previous run journalled
        self._fill_gap(graph.name, start)
        row: dict[str, Any] = {"format": JOURNAL_FORMAT, "time": time.time(), "topology": graph.name,
                               "window": {"start": start, "end": end, "seconds": self.window_s},
                               "snapshot": snapshot, "rows": manifest.get("rows"),
                               "cluster_changed": self.cluster_changed, "links": _links(self.cluster)}
        self.cluster_changed = False
        row["measured"] = self._measured(start, end)
        covers, applied = row["measured"]["covers"], self.applied
        overlaps = applied is not None and covers[0] < applied["ended"] and covers[1] > applied["started"]
        if applied is not None and applied["predicted"] is not None and covers[0] >= applied["ended"]:
            row["since_apply"] = self._against_prediction(row["measured"])
        try:
            try:
                decision = self._decide(graph, snapshot, start, end, row, overlaps)
            except StreamschedError as exc:
                row.update(decision="error", why=str(exc))
                decision = Decision(graph.name, "snapshot", False, "error", None, 0.0, None, 0, snapshot)
            self._journal(row)
            self.decisions.append(decision)
        finally:
            with self._lock:  # an apply stays "busy" until its line is written
                stop_now, self.busy = self.busy and self.stopping, False
        if stop_now:
            self.log("stopping after the apply (journalled)")
            self.stopped.set()
        return decision

    # ------------------------------------------------------------------ steps
    def _decide(self, graph: TaskGraph, snapshot: str | None, start: float, end: float,
                row: dict[str, Any], overlaps: bool) -> Decision:
        measured_remote = row["measured"]["remote_bytes_per_s"]
        latest = self.collector.latest_reading()
        if latest is None or latest[1].graph.name != graph.name:
            row.update(decision="skip", why=f"not the job the loop applies to ({self.job_id})" if latest else
                       "no reading of the job yet")
            return Decision(graph.name, "snapshot", False, row["decision"], None, 0.0, None, 0, snapshot)
        reading = latest[1]
        if overlaps:
            self.streak = 0  # its rates include the downtime (and maybe the rescale's other parallelism)
            row.update(decision="settling", why="the window's readings overlap the last apply")
            return Decision(graph.name, "snapshot", False, "settling", 0.0, 0.0, None, 0, snapshot,
                            measured_before=measured_remote)
        if self.applied is not None and self.applied["plan"] is not None and latest[0] < self.applied["ended"]:
            current = self.applied["plan"]  # no reading has seen the job since the apply
            names = self.applied["names"]
        else:
            current, names = reading.placement, [n.name for n in reading.cluster.nodes]
        running = self._on_graph(graph, reading.graph, current, names)
        basis, now = self._predict(graph, running)
        row.update(basis=basis, current={"predicted": now["value"], **now})
        proposed = self.scheduler.replan(graph, self.cluster, running, seed=self.seed, **self.replan_options)
        node_of, _renamed = flink_apply.relabel(running.node_of, proposed.node_of,
                                                flink_apply.identical_nodes(self.cluster))
        plan = Placement.build(node_of, metadata=proposed.metadata)
        _, then = self._predict(graph, plan)
        gain = _gain(basis, now["value"], then["value"])
        downtime = self.downtime_s if self.downtime_s is not None else DEFAULT_DOWNTIME_S
        threshold = max(self.min_gain, downtime / (self.payback * self.window_s))
        moves = self._moves(graph, running, plan)
        row.update(proposed={"predicted": then["value"], **then, "moved": len(moves)}, gain=gain,
                   threshold=threshold, downtime_priced_s=downtime, moved=moves)
        decision = Decision(graph.name, "snapshot", False, "", now["remote_bytes"], then["remote_bytes"],
                            None if not now["remote_bytes"] else
                            100 * (now["remote_bytes"] - then["remote_bytes"]) / now["remote_bytes"],
                            len(moves), snapshot, measured_before=measured_remote)
        failed = self.failed.get(_key(running, plan))
        absent = sorted({self.cluster.nodes[int(k)].name for k in plan.node_of}
                        - {n.name for n in reading.cluster.nodes})
        if not moves:
            self.streak = 0
            row.update(decision="keep", why="the scheduler keeps the running placement (no subtask would move)")
        elif failed is not None:
            self.streak = 0
            row.update(decision="keep", why=f"this plan failed from this placement before ({failed}); not tried "
                                            f"again until the cluster file changes")
        elif absent:
            self.streak = 0
            row.update(decision="keep", why=f"the plan uses TaskManager {', '.join(absent)}, not registered with the "
                                            f"JobManager (gone?)")
        elif gain < threshold:
            self.streak = 0
            row.update(decision="keep", why=f"predicted gain in {basis} {100 * gain:+.1f} % is below the threshold "
                                            f"{100 * threshold:.1f} % (max of --min-gain and a downtime of "
                                            f"{downtime:.1f} s over {self.payback:g} windows)")
        else:
            self.streak += 1
            row["streak"] = self.streak
            if self.streak < self.confirm:
                row.update(decision="wait", why=f"predicted gain {100 * gain:+.1f} % in {basis}: window "
                                                f"{self.streak} of {self.confirm} before applying")
            elif self.dry_run:
                self.streak = 0
                row.update(decision="would-apply", why=f"predicted gain {100 * gain:+.1f} % in {basis} for "
                                                       f"{self.confirm} windows (--dry-run: not applied)")
            elif self.stopping:
                row.update(decision="keep", why="stopping: no apply starts once a stop was asked")
            else:
                self._apply(graph, reading, running, plan, then, gain, basis, end, row)
        decision.why = row["decision"]
        decision.emitted = row["decision"] == "apply"
        decision.assignment = row.get("plan_file")
        return decision

    def _apply(self, graph: TaskGraph, reading, running: Placement, plan: Placement, then: dict, gain: float,
               basis: str, end: float, row: dict[str, Any]) -> None:
        self.streak = 0
        self.plan_dir.mkdir(parents=True, exist_ok=True)
        plan_file = self.plan_dir / f"window-{int(end)}.placement.json"
        plan.write(plan_file, graph, self.cluster)
        row["plan_file"] = str(plan_file)
        before = replace(reading, graph=graph) if np.array_equal(graph.task_ids, reading.graph.task_ids) else reading
        with self._lock:
            if self.stopping:
                row.update(decision="keep", why="stopping: no apply starts once a stop was asked")
                return
            self.busy = True
        started = time.time()
        try:
            self.log(f"applying {plan_file.name}: predicted gain {100 * gain:+.1f} % in {basis}")
            result = self.apply_fn(self.url, plan_file, self.job_id, settle_s=0.0, window_s=4.0, before=before,
                                   min_gain=-math.inf, machines=self.cluster if self.cluster.has_links else None,
                                   log=self.log)
        except StreamschedError as exc:
            # apply put the job back (its error says how that went); the windows it overlapped settle
            row.update(decision="apply-failed", why=str(exc), apply_seconds=time.time() - started,
                       apply_times=[started, time.time()], fault=type(exc).__name__)
            self.failed[_key(running, plan)] = f"window {end:.0f}: {type(exc).__name__}"
            self.log(f"apply failed: {exc}")
            self.applied = {"window": end, "started": started, "ended": time.time(), "plan": None, "names": None,
                            "predicted": None, "basis": basis}
            return
        ended = time.time()
        row.update(decision="apply" if result.applied else "keep",
                   why=(f"predicted gain {100 * gain:+.1f} % in {basis} for {self.confirm} windows; "
                        f"{result.reason}"),
                   moved_subtasks=result.moved, downtime_s=result.downtime_s, apply_seconds=ended - started,
                   apply_times=[started, ended],
                   rescales=result.rescales)
        if result.applied:
            self.downtime_s = result.downtime_s
            self.record_apply(result.downtime_s, len(result.moved))
            names = [n.name for n in self.cluster.nodes]
            self.applied = {"window": end, "started": started, "ended": ended, "plan": plan, "names": names,
                            "predicted": then["value"], "basis": basis}

    # ------------------------------------------------------------------ pieces
    def _on_graph(self, graph: TaskGraph, read_graph: TaskGraph, placement: Placement,
                  names: list[str]) -> Placement:
        """``placement`` (over ``read_graph``, nodes ``names``) as a placement of the snapshot's
        ``graph`` on the loop's cluster, matched by task id and TaskManager id."""
        node_of_id = {int(t): names[int(k)] if k >= 0 else None
                      for t, k in zip(read_graph.task_ids.tolist(), placement.node_of.tolist())}
        node_of = np.empty(graph.n_tasks, np.int64)
        for i, task in enumerate(graph.task_ids.tolist()):
            name = node_of_id.get(int(task))
            if name is None:
                raise InputError(f"task {task} of the snapshot runs on no TaskManager of job {self.job_id}")
            if name not in self.cluster.index:
                raise InputError(f"TaskManager {name} is not in cluster {self.cluster.name!r} (the --cluster file "
                                 f"must name every TaskManager of the job)")
            node_of[i] = self.cluster.index[name]
        return Placement.build(node_of)

    def _predict(self, graph: TaskGraph, placement: Placement) -> tuple[str, dict[str, Any]]:
        remote = inter_node_traffic(graph, placement, weight="bytes")
        if self.cluster.has_links:
            p = predict_throughput(graph, self.cluster, placement.node_of)
            value = p.throughput if math.isfinite(p.throughput) else None
            return "throughput", {"value": value, "bottleneck": p.bottleneck, "remote_bytes": remote}
        return "remote bytes", {"value": remote, "bottleneck": None, "remote_bytes": remote}

    def _moves(self, graph: TaskGraph, running: Placement, plan: Placement) -> list[dict[str, Any]]:
        names = [n.name for n in self.cluster.nodes]
        return [{"task": int(graph.task_ids[k]), "operator": graph.operator_names[graph.task_operator[k]],
                 "from": names[int(running.node_of[k])], "to": names[int(plan.node_of[k])]}
                for k in np.flatnonzero(running.node_of != plan.node_of).tolist()]

    def _measured(self, start: float, end: float) -> dict[str, Any]:
        """The window's measured source records/s and remote bytes/s: its readings' own
        intervals, weighted by their lengths (independent of how many readings it holds), and
        the time they cover (``covers``: from the first one's start to the last one's end)."""
        chunks = self.collector.figures_between(start, end)
        seconds = sum(c.seconds for c in chunks)

        def mean(key: str) -> float | None:
            values = [(getattr(c, key), c.seconds) for c in chunks if getattr(c, key) is not None]
            total = sum(s for _, s in values)
            return sum(v * s for v, s in values) / total if total > 0 else None

        covers = [min(c.time - c.seconds for c in chunks), max(c.time for c in chunks)] if chunks else [start, end]
        return {"throughput": mean("throughput"), "remote_bytes_per_s": mean("remote_bytes_per_s"),
                "readings": len(chunks), "seconds": seconds, "covers": covers}

    def _against_prediction(self, measured: dict[str, Any]) -> dict[str, Any]:
        applied = self.applied
        value = measured["throughput"] if applied["basis"] == "throughput" else measured["remote_bytes_per_s"]
        predicted = applied["predicted"]
        return {"applied_in_window": applied["window"], "basis": applied["basis"], "predicted": predicted,
                "measured": value, "ratio": value / predicted if value is not None and predicted else None}

    def _fill_gap(self, topology: str, start: float) -> None:
        """A line for every window between the last journalled one and ``start`` in which no
        reading landed (the watch emits only windows with rows)."""
        if self.last_end is None:
            return
        end = self.last_end + self.window_s
        while end <= start + 1e-6:
            if end not in self.journaled:
                self.streak = 0
                self._journal({"format": JOURNAL_FORMAT, "time": time.time(), "topology": topology,
                               "window": {"start": end - self.window_s, "end": end, "seconds": self.window_s},
                               "measured": self._measured(end - self.window_s, end), "decision": "no-data",
                               "why": "no reading landed in this window (a reading failed or outlasted it)"})
            end += self.window_s

    def _journal(self, row: dict[str, Any]) -> None:
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with open(self.journal, "a") as handle:
            handle.write(json.dumps(row, default=_plain) + "\n")
            handle.flush()
        self.journaled.add(row["window"]["end"])
        self.last_end = max(self.last_end or row["window"]["end"], row["window"]["end"])


def _gain(basis: str, now: float | None, then: float | None) -> float:
    """Predicted gain of the plan (fraction; higher is better). Throughput: ``then / now - 1``
    (an unbounded prediction: no gain to claim); remote bytes: the share cut."""
    if now is None or then is None:
        return 0.0
    if basis == "throughput":
        return then / now - 1 if now > 0 else 0.0
    return (now - then) / now if now > 0 else 0.0


def _key(running: Placement, plan: Placement) -> tuple:
    """A move's identity: the running placement and the plan, node per task."""
    return tuple(running.node_of.tolist()), tuple(plan.node_of.tolist())


def _links(cluster: Cluster) -> dict[str, list[float | None]]:
    return {n.name: [n.net_in, n.net_out] for n in cluster.nodes}


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


# ------------------------------------------------------------------------------ reading the journal
def read_journal(path: str | Path) -> list[dict[str, Any]]:
    """The journal's lines; a line that is not one is an ``InputError`` naming it."""
    rows = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no such journal") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(row, dict) or row.get("format") != JOURNAL_FORMAT or not isinstance(row.get("window"), dict):
            raise InputError(f"{path}:{number}: not a line of a live-loop journal ({JOURNAL_FORMAT})")
        rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Windows, decisions by kind, applies (window, moved subtasks, downtime, predicted and the
    mean measured value of the windows after it up to the next apply), and whether the windows
    are complete: consecutive ends one window apart, none twice."""
    ends = [row["window"]["end"] for row in rows]
    width = rows[0]["window"]["seconds"] if rows else 0.0
    gaps = [b for a, b in zip(ends, ends[1:]) if not math.isclose(b - a, width, abs_tol=1e-6)]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.get("decision", "?")] = counts.get(row.get("decision", "?"), 0) + 1
    applies = []
    for k, row in enumerate(rows):
        if row.get("decision") != "apply":
            continue
        after = [r["since_apply"]["measured"] for r in rows[k + 1:]
                 if r.get("since_apply", {}).get("applied_in_window") == row["window"]["end"]
                 and r.get("decision") != "settling" and r["since_apply"]["measured"] is not None]
        before = row["measured"]["throughput"] if row.get("basis") == "throughput" else row["measured"]["remote_bytes_per_s"]
        applies.append({"window": row["window"]["end"], "moved": len(row.get("moved") or []),
                        "downtime_s": row.get("downtime_s"), "basis": row.get("basis"),
                        "measured_before": before, "predicted": row["proposed"]["predicted"],
                        "measured_after": sum(after) / len(after) if after else None, "windows_after": len(after)})
    return {"windows": len(rows), "first_end": ends[0] if ends else None, "last_end": ends[-1] if ends else None,
            "complete": not gaps and len(set(ends)) == len(ends), "gaps": gaps,
            "duplicates": sorted({e for e in ends if ends.count(e) > 1}), "decisions": counts, "applies": applies}
