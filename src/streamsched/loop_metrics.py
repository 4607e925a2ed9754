"""The re-planning loop's own metrics, exposed over HTTP for Prometheus (``watch
--metrics-port``), with the standard client library (``prometheus-client``).

Names (docs/pipeline.md, "The loop's metrics", has a dashboard's queries):

- ``streamsched_windows_total{topology}``: windows whose snapshot went to the re-planning step;
- ``streamsched_rows_accepted_total``, ``streamsched_rows_quarantined_total{reason}``,
  ``streamsched_rows_dropped_late_total``: the watch's row accounting of this run;
- ``streamsched_decisions_total{topology, outcome, reason}``: ``outcome`` ``taken`` (an
  assignment emitted) or ``refused``; ``reason`` the decision's (``improvement``,
  ``below-threshold``, ``initial``, ``repair``, ...);
- ``streamsched_moved_tasks_total{topology}``: tasks (Flink: subtasks) moved by taken decisions;
- ``streamsched_placement_predicted{topology}``: inter-node traffic (tuples/s) the model gives the
  placement in force after the latest decision; ``streamsched_placement_measured{topology}``: the
  same measured on the engine's running placement in the latest window (when known);
- ``streamsched_apply_downtime_seconds`` and ``streamsched_apply_moved_tasks``: the last
  ``apply``'s downtime and moved subtasks (:meth:`LoopMetrics.record_apply`).

Each :class:`LoopMetrics` has its own registry (no process-wide state).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from streamsched.errors import InputError


class _Rows(Collector):
    """The watch's row counts at scrape time (``counts()``: its ``run_counts``)."""

    def __init__(self, counts: Callable[[], Mapping[str, Any]]) -> None:
        self.counts = counts

    def collect(self):
        counts = self.counts()
        yield CounterMetricFamily("streamsched_rows_accepted", "rows accepted by the watch's checks (this run)",
                                  value=counts["accepted"])
        yield CounterMetricFamily("streamsched_rows_dropped_late", "valid rows late for an emitted window (this run)",
                                  value=counts["dropped_late"])
        quarantined = CounterMetricFamily("streamsched_rows_quarantined", "rows quarantined, by reason (this run)",
                                          labels=["reason"])
        for reason, n in sorted(dict(counts["quarantined"]).items()):
            quarantined.add_metric([reason], n)
        yield quarantined


class LoopMetrics:
    """The loop's metrics in a registry of their own; :meth:`serve` exposes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.windows = Counter("streamsched_windows", "windows re-planned", ["topology"], registry=self.registry)
        self.decisions = Counter("streamsched_decisions", "re-planning decisions, taken (emitted) or refused",
                                 ["topology", "outcome", "reason"], registry=self.registry)
        self.moved = Counter("streamsched_moved_tasks", "tasks moved by taken decisions", ["topology"],
                             registry=self.registry)
        self.predicted = Gauge("streamsched_placement_predicted", "inter-node traffic (tuples/s) predicted for the "
                               "placement in force", ["topology"], registry=self.registry)
        self.measured = Gauge("streamsched_placement_measured", "inter-node traffic (tuples/s) measured on the "
                              "engine's running placement in the latest window", ["topology"], registry=self.registry)
        self.downtime = Gauge("streamsched_apply_downtime_seconds", "downtime of the last apply",
                              registry=self.registry)
        self.apply_moved = Gauge("streamsched_apply_moved_tasks", "subtasks the last apply moved", registry=self.registry)
        self.server = None

    def serve(self, port: int, address: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``address:port`` (0: a free port) in a daemon thread; the port."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InputError(f"--metrics-port: {port!r}; must be a port number 0..65535")
        try:
            self.server, _thread = start_http_server(port, addr=address, registry=self.registry)
        except OSError as exc:
            raise InputError(f"--metrics-port {port}: cannot listen on {address}:{port} ({exc.strerror or exc})") from None
        return int(self.server.server_address[1])

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def watch_rows(self, counts: Callable[[], Mapping[str, Any]]) -> None:
        """Expose the row accounting ``counts()`` returns (a watch's ``run_counts``)."""
        self.registry.register(_Rows(counts))

    def record_decision(self, decision: Any) -> None:
        """One decision of :class:`~streamsched.schedulers.replanning.Replanner` (duck-typed:
        ``topology``, ``trigger``, ``emitted``, ``why``, ``moved``, ``traffic_current``,
        ``traffic_proposed``, ``measured_before``)."""
        topology = decision.topology
        if decision.trigger == "snapshot":
            self.windows.labels(topology).inc()
        self.decisions.labels(topology, "taken" if decision.emitted else "refused", decision.why).inc()
        if decision.emitted:
            self.moved.labels(topology).inc(decision.moved)
        in_force = decision.traffic_proposed if decision.emitted or decision.traffic_current is None \
            else decision.traffic_current
        self.predicted.labels(topology).set(in_force)
        if decision.measured_before is not None:
            self.measured.labels(topology).set(decision.measured_before)

    def record_apply(self, downtime_s: float, moved: int) -> None:
        self.downtime.set(downtime_s)
        self.apply_moved.set(moved)

    def observe(self, replanner: Any) -> "ObservedReplanner":
        return ObservedReplanner(replanner, self)


class ObservedReplanner:
    """A re-planning step (``on_graph``, ``on_cluster``, ``decisions``) whose every new
    decision is recorded in :class:`LoopMetrics`."""

    def __init__(self, replanner: Any, metrics: LoopMetrics) -> None:
        self.replanner, self.metrics = replanner, metrics

    @property
    def decisions(self) -> list:
        return self.replanner.decisions

    def _record(self, call: Callable[[], Any]) -> Any:
        before = len(self.replanner.decisions)
        result = call()
        for decision in self.replanner.decisions[before:]:
            self.metrics.record_decision(decision)
        return result

    def on_graph(self, graph: Any, snapshot: str | None = None) -> Any:
        return self._record(lambda: self.replanner.on_graph(graph, snapshot))

    def on_cluster(self, cluster: Any) -> Any:
        return self._record(lambda: self.replanner.on_cluster(cluster))
