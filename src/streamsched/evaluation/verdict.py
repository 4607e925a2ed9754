"""The verdict of a comparison: which placement to use, what it gains against Storm's ``even``
(the baseline, named in the verdict), and whether placement matters at all within the
performance model's error.

Placements whose predicted throughput lies within the model's error of the best prediction
are a tie (:func:`recommend`): a tie goes to a placement a solver proved optimal, then to the
fastest scheduler. What a solver proved is stated per row (``proof``): a placement without a
proof is never called optimal.

Rows come from :func:`streamsched.evaluation.comparison.rank` (the best first), with the model's predicted
throughput (:func:`streamsched.evaluation.comparison.add_prediction`, preset :data:`PRESET`). The verdict names the best
scheduler and its change against ``even`` in inter-node traffic (i-scheduler.txt eq. 3) and in
predicted throughput. When every placement's prediction lies within the model's stated error of
the others, placement cannot be told apart by the model: the verdict says so and names the
bottleneck instead (a hot task that no placement relieves, docs/evaluation.md M4). A job read
from an engine is judged against its running placement (the row ``current``) instead of
``even``, and without a throughput model where none was fitted on that engine
(:mod:`streamsched.evaluation.engine_models`).

Where the cluster states every node's link capacities, the rows are ranked by the link-capacity
model's predicted throughput (:mod:`streamsched.model.throughput`) and the verdict judges by it
(:data:`LINK_MODEL`), with that model's stated error (:func:`link_model_error`).
"""

from __future__ import annotations

import math
from typing import Any

from streamsched.evaluation.comparison import CURRENT, SORT_KEY, by_throughput, sort_key
from streamsched import performance

#: The model preset the verdict uses: the recommended one (docs/evaluation.md).
PRESET = "default"
#: Relative prediction error assumed when the calibration states none (docs/evaluation.md,
#: "compare: ranking and verdict").
FALLBACK_ERROR = 0.25
BASELINE = "even"
#: The verdict's ``model`` where rows are ranked by the link-capacity model.
LINK_MODEL = "link-capacity"
#: The baseline when present: the row of a job's running placement (``comparison.CURRENT``).
_BASELINE_NAMES = {BASELINE: "even (Storm's default)", CURRENT: "the running placement"}


def model_error(preset: str = PRESET) -> tuple[float, str]:
    """(relative error, where it comes from) of ``preset``'s predictions: the median held-out
    (leave-one-experiment-out) error that the calibration file states for the fitted set behind
    ``preset`` (``default`` and the section 6.1 settings are the file's ``default`` set), else
    :data:`FALLBACK_ERROR`."""
    try:
        document = performance.read_calibration()
        fitted = document["sets"]
        name = preset if preset in fitted else document["default"]
        held = fitted[name].get("held_out_error_pct") or {}
        if held.get("n") and math.isfinite(held["median"]) and held["median"] > 0:
            return held["median"] / 100.0, f"median held-out error of the fitted set {name!r}, {held['n']} cells"
    except (OSError, KeyError, TypeError, ValueError):
        pass
    return FALLBACK_ERROR, "fallback: the calibration states no held-out error"


def fmt(value: float) -> str:
    """A figure for people: thousands separators, no exponent, about four significant digits."""
    if not math.isfinite(value):
        return "unbounded" if value > 0 else "n/a"
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    decimals = max(0, 3 - int(math.floor(math.log10(abs(value)))))
    return f"{value:,.{decimals}f}".rstrip("0").rstrip(".")


def _pct(change: float) -> str:
    return f"{change:+.1f} %"


def _change(new: float, old: float) -> float | None:
    """Relative change in percent; None when ``old`` is zero (no base to compare with)."""
    if not (math.isfinite(new) and math.isfinite(old)) or old == 0:
        return None
    return 100.0 * (new / old - 1.0)


def _throughput(row: dict[str, Any]) -> float | None:
    value = row.get("throughput_tps")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def describe_bottleneck(bottleneck: str) -> str:
    """``executor of task X`` -> ``task X (its one executor thread)``; others unchanged."""
    prefix = "executor of task "
    if bottleneck.startswith(prefix):
        return f"task {bottleneck[len(prefix):]} (its one executor thread is saturated)"
    return bottleneck


def _common_bottleneck(best: dict[str, Any], predicted: list[tuple[dict[str, Any], float]]) -> str:
    """The bottleneck all placements share, else what they have in common, else the best's."""
    found = [str(r.get("bottleneck")) for r, _ in predicted]
    own = str(best.get("bottleneck"))
    if len(set(found)) == 1:
        return describe_bottleneck(found[0])
    if all(b.startswith("executor of task ") for b in found):
        return f"one executor thread in every placement ({own} in {best['scheduler']}; the tasks are loaded alike)"
    return f"{describe_bottleneck(own)} in {best['scheduler']} (the placements differ)"


def verdict(rows: list[dict[str, Any]], error: float | None = None, preset: str | None = PRESET,
            error_source: str | None = None, no_model: str | None = None) -> dict[str, Any]:
    """The verdict on ranked ``rows`` (best first, with predictions): a JSON-ready dict whose
    ``text`` is the one line the compare output ends with.

    The baseline is the row named :data:`CURRENT` (a job's running placement) when there is
    one, else ``even``. ``no_model`` (the reason no fitted model applies, e.g. for Flink) makes
    the verdict one of traffic alone: no prediction is used and the text says why.

    ``placement_matters`` is False when the highest predicted throughput of a valid placement
    exceeds the lowest by no more than ``error`` (relative, as the change against the baseline
    is measured); ``None`` when fewer than two placements have a prediction.
    """
    baseline = CURRENT if any(r.get("scheduler") == CURRENT for r in rows) else BASELINE
    ranked_by = "predicted throughput" if by_throughput(rows) else "inter-node traffic"
    if ranked_by == "predicted throughput":  # the link-capacity model, whatever the calibrated model
        rows = [_link_model_row(r) for r in rows]
        preset, no_model = LINK_MODEL, None
        error, error_source = link_model_error()
    elif no_model is not None:
        rows = [{k: v for k, v in r.items() if k not in ("throughput_tps", "bottleneck")} for r in rows]
        preset, error, error_source = None, 0.0, no_model
    elif error is None:
        error, error_source = model_error(preset)
    placed = [r for r in rows if r.get("rank") is not None]
    out: dict[str, Any] = {"best": None, "baseline": baseline, "sort_key": sort_key(rows), "ranked_by": ranked_by,
                           "model": preset,
                           "model_error_pct": None if no_model else 100.0 * error, "model_error_source": error_source}
    if not placed:
        out.update(placement_matters=None, text="verdict: no scheduler produced a valid placement")
        return out
    recommended, tied = recommend(placed, error)
    best = recommended  # the figures below are the recommended row's
    base = next((r for r in placed if r["scheduler"] == baseline), None)
    predicted = [(r, _throughput(r)) for r in placed if _throughput(r) is not None]
    out["best"] = placed[0]["scheduler"]  # the table's first row
    out["recommended"] = recommended["scheduler"]
    out["tie"] = [r["scheduler"] for r in tied]
    out["proof"] = {r["scheduler"]: _proof(r) for r in placed if _proof(r) is not None}
    out["inter_node_traffic"] = {"best": best["inter_node_traffic"],
                                 baseline: base["inter_node_traffic"] if base else None,
                                 "reduction_pct": None}
    out["throughput_tps"] = {"best": _throughput(best), baseline: _throughput(base) if base else None,
                             "change_pct": None}
    out["bottleneck"] = best.get("bottleneck")
    spread = None
    if len(predicted) >= 2:
        top = max(t for _, t in predicted)
        low = min(t for _, t in predicted)
        spread = 0.0 if top == low else (top / low - 1.0 if low > 0 and math.isfinite(top) else math.inf)
    out["throughput_spread_pct"] = None if spread is None else 100.0 * spread
    out["placement_matters"] = None if spread is None else spread > error
    if base is not None:
        change = _change(best["inter_node_traffic"], base["inter_node_traffic"])
        out["inter_node_traffic"]["reduction_pct"] = None if change is None else -change
        if _throughput(best) is not None and _throughput(base) is not None:
            out["throughput_tps"]["change_pct"] = _change(_throughput(best), _throughput(base))
    out["text"] = _text(out, recommended, base, predicted, error)
    return out


def link_model_error() -> tuple[float, str]:
    """(relative error, where it comes from) of the link-capacity model: no held-out error is
    stated for it yet, so :data:`FALLBACK_ERROR`."""
    return FALLBACK_ERROR, "fallback: the link-capacity model (docs/model.md, T1-T5) states no held-out error yet"


def _link_model_row(row: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``row`` judged by the link-capacity model: its prediction as ``throughput_tps``
    and ``bottleneck``; what a solver proved about another objective (traffic) proves nothing here."""
    value = row.get("predicted_throughput")  # None: nothing demanded, unbounded
    out = {**row, "throughput_tps": (math.inf if value is None else value) if "predicted_throughput" in row else None,
           "bottleneck": row.get("predicted_bottleneck")}
    if row.get("objective") != "throughput":
        for key in ("bound", "gap"):
            out.pop(key, None)
        if out.get("status") == "optimal":
            out["status"] = "optimal (traffic)"
    return out


def proven(row: dict[str, Any]) -> bool:
    """A solver proved this placement optimal (status ``optimal``: its bound meets its cost)."""
    return row.get("status") == "optimal"


def _proof(row: dict[str, Any]) -> str | None:
    """What a solver's row proves: ``proven optimal`` or the gap to its bound; None without a bound."""
    if proven(row):
        return "proven optimal"
    gap = row.get("gap")
    if isinstance(gap, (int, float)) and row.get("bound") is not None:
        return f"not proven: bound {fmt(float(row['bound']))}, gap {100 * gap:.1f} %"
    return None


def recommend(placed: list[dict[str, Any]], error: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the placement to use, the rows tied with the best) among ranked ``placed`` rows.

    Rows whose predicted throughput is within ``error`` of the highest prediction, and the
    lowest-traffic row, are tied when there are two or more: the model cannot tell them apart.
    A tie goes to a proven placement (lowest traffic first), then to the fastest: scheduler wall
    times compared by their order of magnitude (:func:`time_class`), so that the load of the
    machine does not change the answer between two schedulers of like speed; within one order,
    the lowest traffic. Without a tie (or predictions) the lowest-traffic row is the one to use.
    """
    best = placed[0]
    predicted = [r for r in placed if _throughput(r) is not None]
    if best not in predicted or len(predicted) < 2:
        return best, []
    top = max(_throughput(r) for r in predicted)
    tied = [r for r in predicted if _throughput(r) > 0 and top / _throughput(r) - 1.0 <= error]
    if best not in tied or len(tied) < 2:
        return best, []
    return min(tied, key=lambda r: (not proven(r), time_class(r) if not proven(r) else 0.0, placed.index(r))), tied


def time_class(row: dict[str, Any]) -> float:
    """The order of magnitude of a row's scheduler wall time (``floor(log10 s)``; below 10 ms
    all alike, none known last): 0.09 s and 9.6 s differ, 0.02 s and 0.05 s do not."""
    wall = row.get("wall_time_s")
    if not isinstance(wall, (int, float)) or not math.isfinite(wall) or wall < 0:
        return math.inf
    return float(math.floor(math.log10(max(wall, 0.01))))


def _text(v: dict[str, Any], best: dict[str, Any], base: dict[str, Any] | None,
          predicted: list[tuple[dict[str, Any], float]], error: float) -> str:
    """The verdict's line about ``best`` (the recommended row), followed by the tie and proof."""
    line = (_throughput_claim if v["ranked_by"] == "predicted throughput" else _claim)(v, best, base, predicted, error)
    name, band = best["scheduler"], f"±{100 * error:.0f} %"
    others = [t for t in v["tie"] if t != name]
    if others:
        walls = [r.get("wall_time_s") for r, _ in predicted if r["scheduler"] in v["tie"]]
        fastest = best.get("wall_time_s") is not None and all(
            w is None or best["wall_time_s"] <= w for w in walls)
        why = "proven optimal" if proven(best) else (
            f"none is proven optimal, and it was the fastest ({fmt(float(best['wall_time_s']))} s)" if fastest else
            f"none is proven optimal, and it was as fast as any in order of magnitude "
            f"({fmt(float(best['wall_time_s']))} s) with the least traffic" if best.get("wall_time_s") is not None
            else "none is proven optimal")
        line += (f". Tie within the model's error ({band}) with {', '.join(others)}: {name} is "
                 f"recommended because {why}")
    unproven = [f"{s} ({text})" for s, text in v["proof"].items() if text != "proven optimal"]
    if unproven:
        line += f". No optimality claimed for {'; '.join(unproven)}"
    return line + f". Baseline: {_BASELINE_NAMES.get(v['baseline'], v['baseline'])}"


def _claim(v: dict[str, Any], best: dict[str, Any], base: dict[str, Any] | None,
           predicted: list[tuple[dict[str, Any], float]], error: float) -> str:
    name, band = best["scheduler"], f"±{100 * error:.0f} %"
    baseline = v["baseline"]
    traffic = v["inter_node_traffic"]
    said = f"inter-node traffic {fmt(traffic['best'])} tuples/s"
    if base is not None and base is not best:
        reduction = traffic["reduction_pct"]
        said += (f" against {baseline}'s {fmt(traffic[baseline])}"
                 + (f" ({_pct(-reduction)})" if reduction is not None else ""))
    if v["placement_matters"] is False:
        return (f"verdict: placement hardly matters here: every placement's predicted throughput is within "
                f"the model's error ({band}, spread {v['throughput_spread_pct']:.1f} %); the bottleneck is "
                f"{_common_bottleneck(best, predicted)}. Fewest inter-node tuples: {name}, {said}.")
    if base is None:
        return f"verdict: best is {name}: {said}; no {baseline} row to compare with"
    if v["model"] is None and base is not best:
        return f"verdict: best is {name}: {said}; {v['model_error_source']}"
    if base is best:
        return (f"verdict: {_BASELINE_NAMES[baseline]} is best here: {said}; no scheduler cuts less traffic")
    change = v["throughput_tps"]["change_pct"]
    if change is None:
        why = v["model_error_source"] if v["model"] is None else "no predicted throughput to compare"
        return f"verdict: best is {name}: {said}; {why}"
    throughput = (f"predicted throughput {fmt(v['throughput_tps']['best'])} against "
                  f"{fmt(v['throughput_tps'][baseline])} tuples/s ({_pct(change)}, model {v['model']!r}, error {band})")
    if change > 100 * error:
        return f"verdict: use {name}: {said}; {throughput}"
    if change >= -100 * error:
        return (f"verdict: best is {name}: {said}; {throughput}: within the model's error, so no throughput "
                f"gain over {baseline} can be claimed")
    return (f"verdict: {name} cuts traffic but is predicted slower than {baseline}: {said}; {throughput}. "
            f"{name}'s bottleneck is {describe_bottleneck(str(best.get('bottleneck')))} on {_nodes(best)}, "
            f"{baseline}'s is {describe_bottleneck(str(base.get('bottleneck')))} on {_nodes(base)}")


def _throughput_claim(v: dict[str, Any], best: dict[str, Any], base: dict[str, Any] | None,
                      predicted: list[tuple[dict[str, Any], float]], error: float) -> str:
    """The claim of a verdict ranked by the link-capacity model's predicted throughput."""
    name, band, baseline = best["scheduler"], f"±{100 * error:.0f} %", v["baseline"]
    said = (f"predicted throughput {fmt(float(v['throughput_tps']['best']))} records/s at the sources "
            f"(bottleneck: {best.get('bottleneck')})")
    if v["placement_matters"] is False:
        return (f"verdict: placement hardly matters here: every placement's predicted throughput is within "
                f"the model's error ({band}, spread {v['throughput_spread_pct']:.1f} %); the bottleneck is "
                f"{_common_bottleneck(best, predicted)}. Highest prediction: {name}, {said}.")
    if base is None:
        return f"verdict: best is {name}: {said}; no {baseline} row to compare with"
    if base is best:
        return f"verdict: {_BASELINE_NAMES[baseline]} is best here: {said}; no placement is predicted faster"
    change = v["throughput_tps"]["change_pct"]
    against = (f"against {baseline}'s {fmt(float(v['throughput_tps'][baseline]))}"
               + (f" ({_pct(change)}, link-capacity model, error {band})" if change is not None else ""))
    if change is not None and change > 100 * error:
        return f"verdict: use {name}: {said} {against}"
    return (f"verdict: best is {name}: {said} {against}: within the model's error, so no throughput gain "
            f"over {baseline} can be claimed")


def _nodes(row: dict[str, Any]) -> str:
    used = row.get("nodes_used")
    return f"{used} node" + ("" if used == 1 else "s")
