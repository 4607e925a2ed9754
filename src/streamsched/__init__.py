"""streamsched: placement of stream-processing tasks on clusters.

Layers point one way: ``model`` and ``metrics`` <- ``schedulers`` <- ``cli``.
Only ``streamsched.pipeline`` imports pyspark.
"""

__version__ = "0.1.0"
