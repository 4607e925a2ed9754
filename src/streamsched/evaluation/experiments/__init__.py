"""The papers' experiments, recomputed: grids of (scheduler x workload x cluster x seed) cells.

One module per paper's experiment, each defining ``EXPERIMENT`` (:class:`.cells.Experiment`:
its cells, its summary, any instances of its own), found by :mod:`.registry`; adding a
reproduction is adding one such module. :mod:`.runner` runs the cells (locally, in processes,
or as Spark tasks through :mod:`streamsched.pipeline.sweep`) and writes the rows; each
experiment's summary writes figures and a table with the papers' own numbers beside ours
(``comparison.md``/``.csv``, helpers in :mod:`.tables`).

Experiments (docs/reproduction.md discusses each):

- ``micro-optimum`` (:mod:`.micro_optimum`): cost and resolution time against the optimum on
  the 72 micro-benchmark instances (i-scheduler.txt Figs. 4-9, t3-scheduler.txt Figs. 5-6);
- ``section6`` (:mod:`.section6`): the section 6 workloads on their homogeneous and
  heterogeneous clusters with the model's throughput (i-scheduler.txt Figs. 10-17,
  t3-scheduler.txt Figs. 7-10);
- ``fischer`` (:mod:`.fischer`): 10-80 node sweeps of the Parallel and Payload topologies,
  network load and throughput against the even scheduler, tuple-size sweep and acking
  (fischer-metis-scheduler.txt V, Figs. 6, 9, 11, Table I);
- ``thesis`` (:mod:`.thesis`): the six scenarios of thesis Table 4.2 for WordCount and Exclamation;
- ``edge-cloud`` and ``edge-cloud-large`` (:mod:`.edge_cloud`): the edge paper's control-interval
  simulations (edge-cloud-topset.txt section 5, Figs. 3-7) on its small and large setups, its
  statements beside our numbers.
"""
