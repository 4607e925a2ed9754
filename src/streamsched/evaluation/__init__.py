"""Evaluation, the layer above the schedulers: comparison of schedulers with ranking and verdict,
reports with pictures, calibration of the performance model, and the papers' experiments
recomputed (docs/evaluation.md, docs/reproduction.md). The performance model itself is
:mod:`streamsched.performance`, below the schedulers. No pyspark here."""
