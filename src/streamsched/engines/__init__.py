"""What belongs to each stream-processing engine: the plans it accepts and the pure parsers of
what it reports. One module (or package) per engine; no Spark here (the pipeline calls these
parsers inside its tasks), no scheduler.

- :mod:`.storm`: Apache Storm (plans for ``Cluster.assign``; metrics files and UI REST readers);
- :mod:`.flink`: Apache Flink (REST reader: graph, current placement, observed cluster);
- :mod:`.heron`: Apache Heron packing plans;
- :mod:`.kubernetes`: Kubernetes manifests;
- :mod:`.exports`: :func:`~.exports.export`, every plan by format name.
"""
