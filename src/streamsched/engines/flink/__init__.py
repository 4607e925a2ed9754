"""Apache Flink: the subtask-level task graph, the current placement and the observed cluster of
one running job, from the JobManager's REST API (live) or from saved REST JSON
(docs/engines.md, "Flink").

What is read (field names as Flink 2.3 writes them; checked against a live cluster):

- ``/jobs/:jid``: name, state, ``duration``, ``vertices[]`` (``id``, ``name``, ``parallelism``)
  in Flink's topological order;
- ``/jobs/:jid/plan``: ``plan.nodes[].inputs[]`` (``id`` of the upstream vertex,
  ``ship_strategy``: FORWARD, REBALANCE, RESCALE, HASH, BROADCAST, also GLOBAL, SHUFFLE, CUSTOM);
- ``/jobs/:jid/vertices/:vid``: ``subtasks[]`` with ``subtask``, ``attempt``, ``status``,
  ``taskmanager-id`` and ``endpoint`` (``host:dataPort``; older Flink: ``host``);
- ``/jobs/:jid/vertices/:vid/subtasks/:i/metrics?get=...``: ``[{"id", "value"}]``, values as
  strings (``"NaN"`` for an unmeasured busy time): the counters :data:`COUNTERS` and the meters
  and gauges :data:`METERS`;
- ``/taskmanagers``: ``id``, ``path`` (the RPC address, whose host is the TaskManager's host),
  ``slotsNumber``, ``hardware.cpuCores``, ``totalResource.cpuCores``,
  ``memoryConfiguration.totalProcessMemory``;
- ``/overview`` (optional): ``flink-version``; ``/jobmanager/config`` (live only):
  ``metrics.fetcher.update-interval``; ``/taskmanagers/:id/metrics`` (live only): the
  TaskManager's ``Status.JVM`` CPU time and heap, the sign of its fresh answer.

**Rates.** The JobManager answers metric requests from a cache that it refreshes at most every
``metrics.fetcher.update-interval`` (default 10 s), and only when a request comes in; each
TaskManager's answer to a fetch lands in it on its own, sometimes late. A live capture
(:func:`capture_live`, :func:`take_snapshot`) therefore waits, per TaskManager, for a fresh
answer (its own JVM metrics move), reads the metrics of the job's subtasks on it and checks
that no newer answer came meanwhile. Two snapshots ``window_s`` apart give each TaskManager's
rates as counter differences over its own window, measured by its own clock (busy + idle +
back-pressured milliseconds of its tasks) where Flink gives one, else by the polls. One
snapshot gives Flink's meters (``...PerSecond``), which are 60 s moving averages: a job younger
than about 65 s is understated (a warning says so).

**Saved layout** (:func:`save_capture`, :func:`load_capture`): a directory with
``capture.json`` (``{"format": "streamsched.flink-rest/1", "url", "job_id", "snapshots":
[{"dir": "0", "time": <unix s>}, ...]}``) and one sub-directory per snapshot holding every
response under its REST path plus ``.json``: ``overview.json``, ``taskmanagers.json``,
``jobs/<jid>.json``, ``jobs/<jid>/plan.json``, ``jobs/<jid>/vertices/<vid>.json``,
``jobs/<jid>/vertices/<vid>/subtasks/<i>/metrics.json``. A directory without ``capture.json``
is one snapshot in that layout (for example saved with ``curl``), taken at the job's ``now``.

:func:`read_capture` builds the graph (one task per subtask; task id = the subtask's position
in the vertices' order, ``offset(vertex) + subtask index``; operator = job vertex name), the
placement (node = TaskManager, or its host with ``node_by="host"``) and the cluster. Pair rates
per ship strategy are documented in :func:`pair_weights`. Pure Python: ``urllib`` and ``json``.
"""

from streamsched.engines.flink.capture import load_capture, save_capture
from streamsched.engines.flink.documents import (
    ALIASES, COUNTERS, FORMAT, METER_OF, METERS, METRIC_NAMES, NODE_BY, SHIP_STRATEGIES, Capture,
    FlinkReading, JobState, Snapshot, SubtaskInfo, TaskManagerInfo, VertexInfo, parse_metrics,
    parse_snapshot, parse_taskmanagers,
)
from streamsched.engines.flink.estimate import read_capture
from streamsched.engines.flink.rest import FlinkRest, capture_live, fetch_interval, read, running_job, take_snapshot
from streamsched.engines.flink.traffic import pair_weights, pointwise_pairs

__all__ = [
    "ALIASES", "COUNTERS", "FORMAT", "METER_OF", "METERS", "METRIC_NAMES", "NODE_BY", "SHIP_STRATEGIES",
    "Capture", "FlinkReading", "FlinkRest", "JobState", "Snapshot", "SubtaskInfo", "TaskManagerInfo",
    "VertexInfo", "capture_live", "fetch_interval", "load_capture", "parse_metrics", "parse_snapshot",
    "parse_taskmanagers", "pair_weights", "pointwise_pairs", "read", "read_capture", "running_job",
    "save_capture", "take_snapshot",
]
