"""Apache Storm, what it reports and what it applies (docs/engines.md, "Storm").

- :mod:`.plan`: Storm's task ids and executors as Nimbus computes them, and the plan a custom
  ``IScheduler`` applies with ``Cluster.assign(WorkerSlot(supervisorId, port), topologyId, executors)``;
- :mod:`.ui_rest`: the UI REST API (live or saved responses) -> a graph with one task per
  executor (loads in cores), the current placement and the observed cluster;
- :mod:`.metrics_log`, :mod:`.metrics_csv`, :mod:`.metrics_traffic`: metrics files
  (``LoggingMetricsConsumer``, the CSV metrics reporter) -> task traffic and loads.
"""
