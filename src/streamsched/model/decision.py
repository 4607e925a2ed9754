"""One re-planning decision, as the watch's report, its journal and its metrics read it: made by
:class:`streamsched.schedulers.replanning.Replanner` (assignments written) and by
:class:`streamsched.pipeline.live_loop.LiveLoop` (plans applied to a live Flink job)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Decision:
    """What the loop did with one snapshot or cluster change."""

    topology: str
    trigger: str                  # "snapshot" or "cluster"
    emitted: bool
    why: str                      # initial, improvement, repair, below-threshold, cluster-change, new-tasks, ...
    #: Inter-node traffic of the running placement and of the proposed one: tuples/s for the
    #: replanner, bytes/s between TaskManagers for the live loop (here and in the measured pair).
    traffic_current: float | None
    traffic_proposed: float
    improvement_pct: float | None
    moved: int
    snapshot: str | None = None
    assignment: str | None = None  # the assignment or plan file written
    #: Inter-node traffic of this window's measured rates on the placement the engine ran
    #: during it (None when the engine's placement is unknown), and the same of the next
    #: window: the traffic measured before and after the decision.
    measured_before: float | None = None
    measured_after: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
