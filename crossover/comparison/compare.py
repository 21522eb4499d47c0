"""A measured sweep beside the model: latency crossings per percentile, and the prediction at the
measured levels (the closed form for concurrency or batch sweeps, the serving simulator for
request rates). Used by `measured` and `simulate`; the tables and JSON live in report.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.crossings import level_crossings, rounded

# Latency metrics compared level by level (vLLM names; lower is better); p50 and p99 of what a
# user sees per token and per request, and the mean where only that is reported.
LATENCY_METRICS: tuple[str, ...] = (
    "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms", "median_ttft_ms", "p99_ttft_ms",
    "median_e2el_ms", "p99_e2el_ms", "mean_tpot_ms", "mean_e2el_ms")


def latency_crossovers(table) -> dict[str, dict[str, Any]]:
    """`latency_crossings` of a measured table's levels (on its column arrays: no point objects)."""
    loads, off, on = table.levels()
    cols = table.columns
    out: dict[str, dict[str, Any]] = {}
    for name in LATENCY_METRICS:
        if name not in cols.metrics or not len(loads):
            continue
        a, b = cols.metrics[name][off], cols.metrics[name][on]
        if ((a == 0) | (b == 0) | np.isnan(a) | np.isnan(b)).any():
            continue
        out[name] = _crossing_entry(loads.tolist(), (a / b).tolist())
    return out


def latency_crossings(loads, offs, ons) -> dict[str, dict[str, Any]]:
    """Per latency metric both arms report at every level (metric dicts per level): the ratio off/on
    per level (> 1: lower with speculation), where it crosses 1 between levels, or the side it stayed on."""
    out: dict[str, dict[str, Any]] = {}
    for name in LATENCY_METRICS:
        vals = [(load, off.get(name), on.get(name)) for load, off, on in zip(loads, offs, ons)]
        if not vals or any(not a or not b or a != a or b != b for _, a, b in vals):
            continue
        out[name] = _crossing_entry([v[0] for v in vals], [a / b for _, a, b in vals])
    return out


def _crossing_entry(loads: list[float], ratios: list[float]) -> dict[str, Any]:
    lc = level_crossings(loads, ratios)
    return {"ratios": rounded(ratios, 4),
            "crossover": None if lc.crossover is None else round(lc.crossover, 4),
            "bracketed": lc.bracketed, "crossings": lc.crossings_json(), "side": lc.side}


# Requests simulated per level when a request-rate sweep is predicted beside its measurement.
PREDICT_RATE_PROMPTS = 300


def _predicted_rates(table, sc) -> dict[str, Any] | None:
    """A request-rate sweep through the serving simulator at the files' mean lengths (fixed), on the
    same seeds for both arms; None when the files do not record their token totals."""
    from ..serving.sweep import sweep
    from ..specs.workload import Workload

    if sc.prompt_len is None:
        return None
    wl = Workload(name="measured-means", prompt_len={"dist": "fixed", "value": max(1, round(sc.prompt_len))},
                  output_len={"dist": "fixed", "value": max(1, round(sc.output_len))})
    loads = table.levels()[0].tolist()
    res = sweep(sc, wl, "request_rate", loads, num_prompts=PREDICT_RATE_PROMPTS, seed=0)
    return {"off": [lv.off["output_throughput"] for lv in res.levels],
            "on": [lv.on["output_throughput"] for lv in res.levels],
            "e2el_off": [lv.off["mean_e2el_ms"] for lv in res.levels],
            "e2el_on": [lv.on["mean_e2el_ms"] for lv in res.levels],
            "speedup": [float(x) for x in res.ratios], "crossover": res.crossover, "range": max(loads)}


def predicted_at_levels(table, sc) -> dict[str, Any] | None:
    """The model at the measured levels and its crossover: the closed form with the load as the
    batch (concurrency or batch sweeps; the files' tau and mean lengths are in `sc`), the serving
    simulator for request-rate sweeps (speedup = mean e2e latency off/on, as measured)."""
    if sc is None:
        return None
    if table.load_axis == "request_rate":
        return _predicted_rates(table, sc)
    from ..analysis.curves import evaluate, find_crossings

    loads = table.levels()[0].tolist()
    c = evaluate(sc, loads)
    roots = find_crossings(sc, max(loads) * 2.0)
    return {"off": [float(x) for x in c.tokens_per_s_off], "on": [float(x) for x in c.tokens_per_s_on],
            "speedup": [float(x) for x in c.speedup], "crossover": roots[0].batch if roots else None,
            "range": max(loads) * 2.0}


def speedups(table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(load, off row, on row, speedup) of every level by increasing load, on the table's column
    arrays: the speedup is output throughput on/off (NaN where nothing was delivered without
    speculation), or for request rates mean e2e latency off/on (NaN where an arm does not report it:
    in rate mode output tokens/s tracks the offered load until saturation, so it is no speedup)."""
    loads, off, on = table.levels()
    c = table.columns
    t_off, t_on = c.output_throughput[off], c.output_throughput[on]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(t_off > 0, t_on / t_off, np.nan)  # nothing delivered without speculation: no ratio
        if table.load_axis == "request_rate":  # mean e2e latency off/on where both arms report it
            e_off, e_on = c.metric("mean_e2el_ms")[off], c.metric("mean_e2el_ms")[on]
            both = ~np.isnan(e_off) & (e_off != 0) & ~np.isnan(e_on) & (e_on != 0)
            ratio = np.where(both, e_off / e_on, np.nan)
    return loads, off, on, ratio


def measured_crossover(table) -> dict[str, Any]:
    """Where the measured sweep crosses (`speedups`, interpolated in log load between the bracketing
    levels, analysis.crossings.level_crossings): {load_axis, crossover, between (the two levels), side
    (when it does not cross: on, off or equal), range, speedup_metric}."""
    loads, _, _, ratio = speedups(table)
    lc = level_crossings(loads.tolist(), ratio.tolist())
    between = None
    if lc.crossover is not None:
        x = loads[np.isfinite(ratio)]
        between = [float(x[x <= lc.crossover].max()), float(x[x >= lc.crossover].min())]
    return {"load_axis": table.load_axis, "crossover": None if lc.crossover is None else round(lc.crossover, 4),
            "between": between, "side": lc.side, "range": [float(loads.min()), float(loads.max())],
            "speedup_metric": "mean_e2el_ms off/on" if table.load_axis == "request_rate" else "output_throughput on/off"}
