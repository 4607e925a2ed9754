"""``edge-cloud-large``: :mod:`.edge_cloud` on the paper's large setup (960 Pi + 40 VM, 400
intervals; the GAs take about a second per interval here, so the whole grid takes an hour)."""

from __future__ import annotations

from streamsched.evaluation.experiments.cells import Experiment
from streamsched.evaluation.experiments.edge_cloud import STRATEGY_OF, list_cells, run_simulation, summarise_for

EXPERIMENT = Experiment(
    "edge-cloud-large", "edge paper section 5, large setup (960 Pi + 40 VM): TopSet, GAs, rebalancing, Figs. 3-7",
    tuple(STRATEGY_OF), list_cells("large"), summarise_for("large"), run=run_simulation)
