"""The monitoring data pipeline: raw metrics -> validated rows -> windowed rates -> snapshots.

The only package of streamsched that imports pyspark, and only in the modules that run Spark
(:mod:`.schema`, :mod:`.sources`, :mod:`.ingest`, :mod:`.watch`, :mod:`.session`,
:mod:`.sweep`). It imports no scheduler: placing a snapshot is the caller's (the CLI,
:mod:`streamsched.demo`). Reading native files, the row checks, packing and merging
(:mod:`.native_reader`, :mod:`.row_checks`, :mod:`.blocks`, :mod:`.merge`), the snapshot store, the
synthetic generator, the collectors (:mod:`.collect`, :mod:`.collect_rest`), the re-planning
rule and the engine exports are plain Python, so they load without a JVM. Entry points:

- :func:`streamsched.pipeline.ingest.ingest`: batch ingest of files into a snapshot store;
- :func:`streamsched.pipeline.watch.watch`: Structured Streaming over a directory of arriving files;
- :func:`streamsched.pipeline.generate.generate_metrics`: synthetic monitoring data;

"""
