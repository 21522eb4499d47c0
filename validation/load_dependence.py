"""How the error moves with load (issue 21, item 4): per series, whether the predicted crossover lies in
the same measured interval as the published one, and the signed ln error over the upper half of its
loads (the bias of a model too optimistic at high load shows there: a positive median)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _interval(loads: list[float], ratios: list[float]) -> int | None:
    """Index i of the first interval [loads[i], loads[i+1]] where the ratio passes through 1.0."""
    for i in range(len(loads) - 1):
        if (ratios[i] - 1.0) * (ratios[i + 1] - 1.0) <= 0 and ratios[i] != ratios[i + 1]:
            return i
    return None


def curves(points, key=lambda p: p.group or p.series):
    """(name, points by load, loads) of each measured curve with at least two distinct load levels (a
    series at one context; points with a published and a predicted value)."""
    groups: dict[str, list] = {}
    for p in points:
        if p.published is not None and p.predicted is not None:
            groups.setdefault(key(p), []).append(p)
    for name, pts in groups.items():
        pts = sorted(pts, key=lambda p: p.load)
        loads = [p.load for p in pts]
        if len(set(loads)) >= 2 and len(set(loads)) == len(loads):
            yield name, pts, loads


def series_rows(points, key=lambda p: p.group or p.series) -> list[dict[str, Any]]:
    """Per measured curve with at least two distinct load levels: the crossover interval published and
    predicted, whether they agree (the same interval, or neither crosses and both stay on one side),
    and the median signed ln(predicted / published) over the lower and the upper half of its loads
    (calibration points left out)."""
    out = []
    for name, pts, loads in curves(points, key):
        pub = _interval(loads, [p.published for p in pts])
        pred = _interval(loads, [p.predicted for p in pts])
        if pub is None and pred is None:
            agree = (pts[0].published > 1) == (pts[0].predicted > 1)
        else:
            agree = pub == pred
        judged = [p for p in pts if not p.calibration]
        half = len(judged) // 2
        low, high = judged[:half], judged[half:]

        def med(ps):
            return float(np.median([np.log(p.predicted / p.published) for p in ps])) if ps else float("nan")

        out.append({"curve": name, "levels": f"{loads[0]:g}-{loads[-1]:g}", "n": len(judged),
                    "published_interval": None if pub is None else (loads[pub], loads[pub + 1]),
                    "predicted_interval": None if pred is None else (loads[pred], loads[pred + 1]),
                    "agree": bool(agree), "lower_signed": med(low), "upper_signed": med(high)})
    return out


def _iv(x) -> str:
    return "none" if x is None else f"{x[0]:g}-{x[1]:g}"


def report_lines(rows: list[dict[str, Any]], title: str) -> list[str]:
    """A markdown section: the per-curve table and the medians over every curve."""
    up = [r["upper_signed"] for r in rows if np.isfinite(r["upper_signed"])]
    lo = [r["lower_signed"] for r in rows if np.isfinite(r["lower_signed"])]
    agree = sum(r["agree"] for r in rows)
    lines = ["", f"## {title}", "",
             "Per curve: the measured interval between load levels where the published and the predicted "
             "speedups pass through 1.0 (none: no crossing; then agreement means both stay on the same side), "
             "and the median signed ln(predicted / published) over the lower and the upper half of the "
             "curve's loads (calibration points left out; positive = the model is optimistic). "
             f"**Crossover in the same interval: {agree} of {len(rows)} curves. Median signed error: lower half "
             f"{np.median(lo) if lo else float('nan'):+.3f}, upper half {np.median(up) if up else float('nan'):+.3f}.**",
             "", "| curve | levels | points | published interval | predicted interval | agree | lower half | "
             "upper half |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['curve']} | {r['levels']} | {r['n']} | {_iv(r['published_interval'])} | "
                     f"{_iv(r['predicted_interval'])} | {'yes' if r['agree'] else 'no'} | "
                     f"{r['lower_signed']:+.3f} | {r['upper_signed']:+.3f} |")
    return lines


def kong_lines(points) -> list[str]:
    """Kong et al.'s load model (crossover.analysis.load_fit) fitted to each arm of every rate sweep
    (the points that carry both arms' latencies), published and simulated: C1, C2 and C2(on) / C2(off),
    the quantitative form of 'speculation raises the per-request marginal cost', and the break-even
    rate the fit implies."""
    from crossover.analysis.load_fit import break_even, fit_load

    series: dict[str, list] = {}
    for p in points:
        if p.abs_published_on is not None and p.abs_predicted_on is not None:
            series.setdefault(p.series, []).append((p.load, p.abs_published, p.abs_published_on, p.abs_predicted,
                                                   p.abs_predicted_on))
    lines = ["", "## Rate sweeps: Kong et al.'s load model", "",
             "L(QPS) = C1 / (1 - QPS C2) fitted to each arm's mean latency (arXiv 2605.15051; "
             "`crossover/analysis/load_fit.py`): C1 the zero-load latency, C2 the latency each request in "
             "flight adds. C2(on) / C2(off) above 1 is speculation raising the per-request marginal cost; the "
             "break-even rate is where the fitted curves cross.", "",
             "| sweep | source | C1 off s | C1 on s | C2 off ms/req | C2 on ms/req | C2 on/off | break-even QPS |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in series.items():
        qps = [r[0] for r in rows]
        for label, off_i, on_i in (("published", 1, 2), ("simulated", 3, 4)):
            off, on = fit_load(qps, [r[off_i] for r in rows]), fit_load(qps, [r[on_i] for r in rows])
            if off is None or on is None:
                lines.append(f"| {name} | {label} | - | - | - | - | - | no fit (saturated levels) |")
                continue
            be = break_even(off, on)
            ratio = "-" if be["c2_ratio"] is None else f"{be['c2_ratio']:.2f}"
            q = f"{be['qps']:.1f}" if be["qps"] is not None else "none"
            lines.append(f"| {name} | {label} | {off.c1:.2f} | {on.c1:.2f} | {off.c2 * 1e3:.1f} | {on.c2 * 1e3:.1f} | "
                         f"{ratio} | {q} |")
    return lines
