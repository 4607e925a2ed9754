"""The plots of Ghosh et al. [1]_ Figs. 3-7 from simulation results (PNG files).

Fig. 3: sum of makespans per control interval, one line per run (dashed: with rebalance);
Fig. 4: reduction of the sum of makespans by each rebalance strategy relative to none (%);
Fig. 5: planning time per interval (log scale); Fig. 6: migrations per interval;
Fig. 7: mean stabilization time. A figure whose data were not simulated is skipped.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from streamsched.edge.simulation import IntervalResult  # noqa: E402


def _series(results, strategy, rebalance, field):
    rows = sorted((r for r in results if r.strategy == strategy and r.rebalance == rebalance), key=lambda r: r.interval)
    return np.array([r.interval for r in rows]), np.array([getattr(r, field) for r in rows], dtype=float)


def _runs(results):
    return list(dict.fromkeys((r.strategy, r.rebalance) for r in results))


def _violin(ax, data, labels):
    kept = [(d[np.isfinite(d)], label) for d, label in zip(data, labels) if np.isfinite(d).any()]
    if not kept:
        return
    values, names = zip(*kept)
    if all(np.ptp(v) == 0 for v in values):
        ax.boxplot(values)
    else:
        ax.violinplot(values, showmedians=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=45, ha="right", fontsize=8)


def write_figures(results: list[IntervalResult], out: str | Path, title: str = "") -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = _runs(results)
    written: list[Path] = []

    def save(fig, name):
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    labels = [s if r == "none" else f"{s}+{r}" for s, r in runs]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (strategy, rebalance), label in zip(runs, labels):
        x, y = _series(results, strategy, rebalance, "sum_makespan_s")
        ax.plot(x, y, label=label, lw=1.0 if rebalance == "none" else 0.8, ls="-" if rebalance == "none" else "--")
        failed = ~np.isfinite(y)
        if failed.any():
            ax.plot(x[failed], np.zeros(failed.sum()), "x", ms=4, label=f"{label}: failed")
    ax.set(xlabel="control interval", ylabel="sum of makespans (s)", title=f"Fig. 3 {title}".strip())
    ax.legend(fontsize=7, ncol=2)
    save(fig, "fig3_makespan.png")

    rebalanced = [(s, r) for s, r in runs if r != "none" and (s, "none") in runs]
    if rebalanced:
        data, pair_labels = [], []
        for strategy, rebalance in rebalanced:
            _, base = _series(results, strategy, "none", "sum_makespan_s")
            _, with_rb = _series(results, strategy, rebalance, "sum_makespan_s")
            with np.errstate(invalid="ignore", divide="ignore"):
                data.append(100.0 * (base - with_rb) / base)
            pair_labels.append(f"{strategy}+{rebalance}")
        fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(pair_labels)), 4))
        _violin(ax, data, pair_labels)
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set(ylabel="reduction of sum of makespans (%)", title=f"Fig. 4 {title}".strip())
        save(fig, "fig4_rebalance_reduction.png")

    width = max(7.0, 0.55 * len(runs))
    fig, ax = plt.subplots(figsize=(width, 4))
    _violin(ax, [np.log10(np.maximum(_series(results, s, r, "planning_time_s")[1], 1e-6)) for s, r in runs], labels)
    ax.set(ylabel="planning time per interval (log10 s)", title=f"Fig. 5 {title}".strip())
    save(fig, "fig5_planning_time.png")

    fig, ax = plt.subplots(figsize=(width, 4))
    _violin(ax, [_series(results, s, r, "migrations")[1] for s, r in runs], labels)
    ax.set(ylabel="migrations per interval", title=f"Fig. 6 {title}".strip())
    save(fig, "fig6_migrations.png")

    fig, ax = plt.subplots(figsize=(width, 4))
    means = [float(np.mean(_series(results, s, r, "stabilization_s")[1])) for s, r in runs]
    ax.bar(range(len(runs)), means)
    ax.set_xticks(range(len(runs)), labels, rotation=45, ha="right", fontsize=8)
    ax.set(ylabel="mean stabilization time (s)", title=f"Fig. 7 {title}".strip())
    save(fig, "fig7_stabilization.png")
    return written
