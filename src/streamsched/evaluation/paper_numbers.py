"""The papers' own figures, as printed in their text (the plotted curves are images we cannot
read; only numbers the text states are here). Each entry names its source.

Reproduction tables put these beside ours; docs/reproduction.md discusses the differences.
"""

from __future__ import annotations

#: i-scheduler.txt section 5 (Figs. 5, 6) and t3-scheduler.txt section 5 (Fig. 6):
#: (shape, tasks, cluster) -> {scheduler: cost or resolution seconds}.
MICRO_COST = {
    ("diamond", 30, "heterogeneous-10"): {"optimal": 146, "i-scheduler": 148},  # i-scheduler.txt Fig. 5
    ("star", 30, "heterogeneous-10"): {"optimal": 86, "i-scheduler": 90},  # i-scheduler.txt Fig. 6
}
MICRO_TIME_S = {
    ("linear", 32, "heterogeneous-10"): {"optimal": 1114257.0},  # t3-scheduler.txt Fig. 6a (64-core server)
    ("diamond", 32, "homogeneous-10"): {"optimal": 2471.0},  # t3-scheduler.txt section 5
    ("star", 32, "homogeneous-10"): {"optimal": 6.0},
    ("diamond", 32, "heterogeneous-10"): {"optimal": 393.0},
    ("star", 32, "heterogeneous-10"): {"optimal": 7.0},
}
MICRO_CLAIMS = (
    "i-scheduler.txt Figs. 4-6: I-Scheduler matches the optimum on all 72 instances except diamond-30 "
    "and star-30 on the heterogeneous cluster (148 vs 146, 90 vs 86); resolution time below theta = 1 s.",
    "t3-scheduler.txt Fig. 5: T3-Scheduler matches the optimum for linear; near-optimal for diamond and star.",
    "Optimal resolution time grows steeply beyond about 20 tasks (t3-scheduler.txt Fig. 6).",
)

#: Section 6 application throughputs (tuples per 10 s per task, the papers' unit), by cluster.
SECTION6_THROUGHPUT = {
    ("smart-home", "high-low-8-0"): {  # i-scheduler.txt Fig. 12, t3-scheduler.txt Fig. 8a
        "ols": 3700.0, "r-storm": 5200.0, "i-scheduler": 6900.0, "t3": 6600.0},
    ("taxi-routes", "high-low-8-0"): {  # i-scheduler.txt Fig. 16, t3-scheduler.txt Fig. 10a
        "ols": 9800.0, "r-storm": 15500.0, "i-scheduler": 16000.0, "t3": 15700.0},
    ("taxi-routes", "high-low-2-2"): {  # i-scheduler.txt Fig. 17
        "ols": 13000.0, "r-storm": 14800.0, "i-scheduler": 15700.0},
}
#: Nodes used in section 6 (text of i-scheduler.txt 6.2/6.3 and t3-scheduler.txt 6.2/6.3).
SECTION6_NODES = {
    ("smart-home", "high-low-8-0"): {"ols": 8, "r-storm": 4, "i-scheduler": 4, "t3": 4},
    ("taxi-routes", "high-low-8-0"): {"ols": 8, "r-storm": 3, "t3": 3},
}
#: Micro-benchmark throughput gains stated in the text (percent, scheduler over baseline).
SECTION6_MICRO_GAINS = {
    ("io-bound", "diamond-tp"): {("i-scheduler", "r-storm"): 25, ("t3", "r-storm"): 20},
    ("cpu-bound", "diamond-tp"): {("i-scheduler", "r-storm"): 26},
}
SECTION6_CLAIMS = (
    "I/O-intensive (1 high + 2 low nodes): I-Scheduler +25 % over R-Storm on diamond, similar on linear "
    "and star, +8-46 % over OLS (i-scheduler.txt Fig. 10); T3 +20 % over R-Storm on diamond, +7-41 % over OLS.",
    "CPU-intensive (2 high + 4 low): I-Scheduler +10-35 % over OLS, +26 % over R-Storm on diamond "
    "(Fig. 11); T3 +24-33 % over R-Storm and OLS on diamond, +8-12 % over OLS on linear and star.",
    "Smart home, 8 high nodes: I-Scheduler 6900 > R-Storm 5200 > OLS 3700 (Fig. 12); OLS uses 8 nodes, "
    "the others 4. Heterogeneous (2 high + 4 low): same order, lower throughput (Fig. 13).",
    "Taxi routes, 8 high nodes: I-Scheduler 16000, R-Storm 15500, OLS 9800 (Fig. 16); 2 high + 2 low: "
    "15700, 14800, 13000 (Fig. 17).",
)

#: fischer-metis-scheduler.txt Table I: average throughput improvement (percent) over the
#: Default scheduler (id) and, for Metis, over Greedy (ig), over 10-80 node clusters.
FISCHER_THROUGHPUT_GAIN = {
    "parallel": {"metis": 6, "ols": 0},
    "payload": {"metis": 52, "ols": 12},
}
#: V-A1: average network-load reduction against the Default scheduler (percent).
FISCHER_NETWORK_REDUCTION = {"payload": {"metis": 33.75}, "parallel": {"metis": 14.0}}
FISCHER_CLAIMS = (
    "Metis reduces network load in almost all configurations: payload up to 88 % (10 nodes), 33.75 % "
    "on average; parallel 14 % on average (V-A1, Fig. 6).",
    "Throughput improves over Default in all configurations: +52 % payload, +6 % parallel on average (Table I).",
    "The gain grows with tuple size; above 10 KB Metis beats Default and Greedy by more than 4x (V-B1, Fig. 9).",
    "Acking doubles the messages the topology processes, whatever the placement (V-B2, Fig. 11).",
)

#: thesis-top-a3-ban-gr-storm.txt Table 4.2: scenario -> (slots per node, slots required).
THESIS_SCENARIOS = {1: (3, 3), 2: (3, 4), 3: (3, 5), 4: (4, 4), 5: (4, 5), 6: (5, 5)}
#: Thesis section 4.4: best throughput gain over the default scheduler stated per scenario
#: (scheduler, percent) and nodes used where stated (default, proposed).
THESIS_GAINS = {
    "wordcount": {1: ("a3-storm", 8), 2: ("a3-storm", 4), 3: ("top-storm", 5), 4: ("gr-storm", 28),
                  5: ("gr-storm", 24), 6: ("top-storm", 25)},
    "exclamation": {1: ("gr-storm", 2), 2: ("ban-storm", 23), 3: ("a3-storm", 23), 4: ("top-storm", 3),
                    5: ("top-storm", 3), 6: ("a3-storm", 2)},
}
THESIS_NODES = {
    "wordcount": {1: {"even": 5, "proposed": 3}, 3: {"even": 7, "proposed": 4}},
    "exclamation": {3: {"even": 7, "proposed": 4}, 5: {"even": 7, "proposed": 4}},
}
THESIS_CLAIMS = (
    "The proposed schedulers beat default and isolation in all six scenarios for both topologies, "
    "with fewer nodes (section 4.4, Figs. 4.10-4.12 and 4.19-4.21).",
    "Throughput per node (eq. 1.2) is almost double the default scheduler's (Fig. 4.12).",
    "The isolation scheduler performs worst in every scenario (section 4.5).",
)
