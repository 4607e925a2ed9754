"""Evaluation: the performance model, comparison reports with pictures, and the papers'
experiments recomputed (see docs/evaluation.md and docs/reproduction.md). No pyspark here."""

from streamsched.evaluation.performance import ModelParams, Prediction, predict, regime

__all__ = ["ModelParams", "Prediction", "predict", "regime"]
