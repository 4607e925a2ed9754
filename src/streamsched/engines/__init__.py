"""What belongs to each stream-processing engine: the plans it accepts and the pure parsers of
what it reports. One module (or package) per engine; no Spark here (the pipeline calls these
parsers inside its tasks), no scheduler.

- :mod:`.storm`: Apache Storm (plans for ``Cluster.assign``; metrics files and UI REST readers);
- :mod:`.flink`: Apache Flink (REST reader: graph, current placement, observed cluster);
- :mod:`.heron`: Apache Heron packing plans;
- :mod:`.kubernetes`: Kubernetes manifests;
- :mod:`.exports`: :func:`~.exports.export`, every plan by format name.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np

from streamsched.errors import InputError

#: Largest number a reader takes from an engine, 2^63: Storm's and Flink's counters are Java
#: longs (``Long.MAX_VALUE`` = 2^63 - 1), and the rates, latencies and gauges read stay below it
#: too. A number above it (or not finite) is bad input naming its field (numpy's sums of larger
#: ones overflow: 1e308 + 1e308).
MAX_COUNT = 2.0**63


@contextmanager
def arithmetic(where: str) -> Iterator[None]:
    """numpy's floating-point errors inside (overflow, invalid, divide by zero) as one
    ``InputError`` naming ``where`` instead of a RuntimeWarning on stderr: for numbers each
    within :data:`MAX_COUNT` that combine out of range (counts over a window of 1e-300 s)."""
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        try:
            yield
        except FloatingPointError as exc:
            raise InputError(f"{where}: the numbers read combine out of range ({exc})") from None
