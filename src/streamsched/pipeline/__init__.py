"""The monitoring data pipeline: raw metrics -> validated rows -> windowed rates -> snapshots.

The only package of streamsched that imports pyspark, and only in the modules that run Spark
(:mod:`.sources`, :mod:`.ingest`, :mod:`.watch`, :mod:`.session`). The snapshot store, the
synthetic generator, the re-planning rule and the engine exports are plain Python, so they load
without a JVM. Entry points:

- :func:`streamsched.pipeline.ingest.ingest`: batch ingest of files into a snapshot store;
- :func:`streamsched.pipeline.watch.watch`: Structured Streaming over a directory of arriving files;
- :func:`streamsched.pipeline.generate.generate_metrics`: synthetic monitoring data;
- :func:`streamsched.pipeline.run.run_pipeline`: generate -> ingest -> snapshot -> schedule;
- :mod:`streamsched.pipeline.export`: Storm, Heron and Kubernetes assignments.
"""
