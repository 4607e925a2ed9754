"""The hand-made edge/cloud case shared by the edge tests (edge-cloud-topset.txt section 3).

Two edge devices r0, r1 and one VM r2. Latencies in ms: r0-r1 2, r0-r2 20, r1-r2 25;
bandwidth unbounded except r0-r2 at 1e6 B/s, so a 1000-byte event adds 1 ms there. The diamond
dataflow v0 -> {v1, v2} -> v3 has compute latencies (edge, cloud) v0 (1, .5), v1 (4, 2),
v2 (2, 1), v3 (3, 1) ms and 100 e/s into its one source. Edge batteries: base load 50 mA over
a 36000 s recharge interval (500 mAh).
"""

from __future__ import annotations

import numpy as np

from streamsched.edge.deployment import Deployment
from streamsched.edge.model import CLOUD, EDGE, Dataflow, EdgeSystem

MS = 1e-3


def hand_system(interference=(0.0, 0.0, 0.0), battery=(1e9, 1e9), edge_edge_ms=2.0) -> EdgeSystem:
    latency = np.array([[0, edge_edge_ms, 20], [edge_edge_ms, 0, 25], [20, 25, 0]], dtype=float) * MS
    bandwidth = np.full((3, 3), np.inf)
    bandwidth[0, 2] = bandwidth[2, 0] = 1e6
    return EdgeSystem(
        name="hand", kind=np.array([EDGE, EDGE, CLOUD]), latency_class=np.array([EDGE, EDGE, CLOUD]),
        speed=np.ones(3), interference=np.array(interference, dtype=float),
        battery_mah=np.array([*battery, np.inf], dtype=float), base_load_ma=np.array([50.0, 50.0, 0.0]),
        recharge_s=np.array([36000.0, 36000.0, 0.0]), net_latency=latency, net_bandwidth=bandwidth,
    )


def diamond(energy=1e-4) -> Dataflow:
    return Dataflow(
        name="diamond", parents=((), (0,), (0,), (1, 2)),
        latency=np.array([[1, .5], [4, 2], [2, 1], [3, 1]], dtype=float) * MS,
        selectivity=np.ones(4), event_bytes=np.full(4, 1000.0), energy=np.full(4, energy), input_rate=100.0,
    )


def deployed(system, mapping, dataflow=None) -> Deployment:
    deployment = Deployment(system)
    deployment.deploy(0, dataflow or diamond(), mapping)
    return deployment
