"""Pair rates per Flink ship strategy: which downstream subtasks each upstream subtask feeds."""

from __future__ import annotations

import numpy as np


def pointwise_pairs(p_up: int, p_down: int) -> tuple[np.ndarray, np.ndarray]:
    """Sender -> receiver pairs of a pointwise (RESCALE) connection, as Flink connects them
    (checked on a live cluster: 2 -> 3 gives {0: 0, 1}, {1: 2}; 3 -> 2 gives {0: 0}, {1, 2: 1}):

    - equal parallelism: ``i -> i``;
    - fan-out (``p_up < p_down``): receiver ``j`` is fed by sender ``floor(j * p_up / p_down)``;
    - fan-in (``p_up > p_down``): receiver ``j`` is fed by senders
      ``floor(j * p_up / p_down) .. floor((j + 1) * p_up / p_down) - 1``.
    """
    if p_up == p_down:
        s = np.arange(p_up)
        return s, s.copy()
    if p_up < p_down:
        d = np.arange(p_down)
        return d * p_up // p_down, d
    senders, receivers = [], []
    for j in range(p_down):
        lo, hi = j * p_up // p_down, (j + 1) * p_up // p_down
        senders.extend(range(lo, hi))
        receivers.extend([j] * (hi - lo))
    return np.asarray(senders, dtype=np.int64), np.asarray(receivers, dtype=np.int64)


def pair_weights(strategy: str, p_up: int, p_down: int, received: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``(sender, receiver, weight, exact)``: the pairs one job edge connects; a pair's record
    rate is the sender's records out x ``weight``.

    - FORWARD: ``i -> i`` (equal parallelism; otherwise Flink would not allow it, and the
      pointwise pairs are used);
    - REBALANCE, SHUFFLE: ``1 / p_down`` to every receiver (round robin: exact up to one record);
    - RESCALE: the pointwise pairs of :func:`pointwise_pairs`, a sender's records split evenly
      over its receivers (round robin within the group);
    - HASH, CUSTOM (and any other strategy): receiver ``j`` gets its share of the records the
      receivers got, ``received[j] / sum(received)``, from every sender (exact per receiver;
      the split over senders assumes that every sender sees the same key distribution);
    - BROADCAST: ``1`` to every receiver (exact);
    - GLOBAL: ``1`` to receiver 0 (exact).
    """
    if strategy == "FORWARD" and p_up == p_down or strategy == "GLOBAL":
        s = np.arange(p_up)
        d = s.copy() if strategy == "FORWARD" else np.zeros(p_up, dtype=np.int64)
        return s, d, np.ones(p_up), True
    if strategy in ("RESCALE", "FORWARD"):
        s, d = pointwise_pairs(p_up, p_down)
        fan = np.bincount(s, minlength=p_up).astype(np.float64)
        return s, d, 1.0 / fan[s], True
    s = np.repeat(np.arange(p_up), p_down)
    d = np.tile(np.arange(p_down), p_up)
    if strategy in ("REBALANCE", "SHUFFLE"):
        return s, d, np.full(s.size, 1.0 / p_down), True
    if strategy == "BROADCAST":
        return s, d, np.ones(s.size), True
    received = np.asarray(received, dtype=np.float64)
    total = received.sum()
    share = received / total if total > 0 else np.full(p_down, 1.0 / p_down)
    return s, d, share[d], False
