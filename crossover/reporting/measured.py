"""Tables and dicts of measured sweeps (`crossover measured`) and calibrations (`crossover calibrate`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..analysis.crossings import EQUAL_RTOL, level_crossings
from ..comparison.compare import PREDICT_RATE_PROMPTS, latency_crossovers, speedups
from ..analysis.crossings import rounded
from ..analysis.bounds import BoundChecks
from . import gpus_said
from .serving import clean, latency_lines, load_fit_lines, other_crossings


def _level_values(table) -> dict[str, list]:
    """Per level by increasing load (no point objects), lists of the load, both arms' throughput,
    the speedup (`compare.speedups`), tau and median TPOT (None where not reported)."""
    loads, off, on, ratio = speedups(table)
    c = table.columns

    def listed(values: np.ndarray) -> list:
        return [None if v != v else v for v in values.tolist()]

    return {"load": loads.tolist(), "off": c.output_throughput[off].tolist(), "on": c.output_throughput[on].tolist(),
            "ratio": ratio.tolist(), "tau": listed(c.acceptance_length[on]),
            "tpot_off": listed(c.metric("median_tpot_ms")[off]), "tpot_on": listed(c.metric("median_tpot_ms")[on])}


def _levels(table) -> tuple[dict[str, list], Any]:
    """`_level_values` and the level crossings of the speedup."""
    lv = _level_values(table)
    return lv, level_crossings(lv["load"], lv["ratio"])


def _impossible_bracket(loads: list[float], cross: float | None, checks) -> list:
    """The bound checks beaten (faster than physics) at the two levels the crossover lies between."""
    if cross is None or not checks:
        return []
    below = max((x for x in loads if x <= cross), default=None)
    above = min((x for x in loads if x >= cross), default=None)
    return BoundChecks.of(checks).beaten(at=[x for x in (below, above) if x is not None], prefill=True)


def measured_dict(table, checks, predicted: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON contract of `crossover measured --json`."""
    lv, lc = _levels(table)
    cross = lc.crossover
    keys = ["level", "off_output_throughput", "on_output_throughput", "speedup", "on_acceptance_length",
            "off_median_tpot_ms", "on_median_tpot_ms"]
    columns = [lv["load"], lv["off"], lv["on"], list(map(clean, lv["ratio"])), lv["tau"], lv["tpot_off"],
               lv["tpot_on"]]
    if predicted is not None:
        keys += ["predicted_off_output_throughput", "predicted_on_output_throughput", "predicted_speedup"]
        columns += [rounded(predicted["off"], 2), rounded(predicted["on"], 2), rounded(predicted["speedup"], 4)]
    points = [dict(zip(keys, row)) for row in zip(*columns)]
    out: dict[str, Any] = {
        "load_axis": table.load_axis,
        "speedup_metric": "mean_e2el_ms off/on" if table.load_axis == "request_rate" else "output_throughput on/off",
        "points": points,
        "crossover": None if cross is None else round(cross, 4),
        "bracketed": cross is not None,
        "crossings": lc.crossings_json(),
        "side": lc.side,
        "latency": latency_crossovers(table),
    }
    if predicted is not None:
        out["predicted_crossover"] = None if predicted["crossover"] is None else round(predicted["crossover"], 4)
    if checks:
        out["crossover_on_impossible_point"] = bool(_impossible_bracket(lv["load"], cross, checks))
        bc = BoundChecks.of(checks)
        # bound / fraction_of_bound / beats_physics: decode only; *_with_prefill: with the sweep's prefill
        # share (null where its lengths are unknown), beaten: impossible unless prefix caching is on
        keys = ("arm", "level", "measured", "bound", "fraction_of_bound", "beats_physics", "in_flight", "source",
                "bound_with_prefill", "fraction_of_bound_with_prefill", "beats_physics_unless_prefix_caching")
        with np.errstate(invalid="ignore"):
            pre_fraction = bc.measured / bc.bound_prefill
        columns = (np.where(bc.on, "on", "off").tolist(), bc.load.tolist(), bc.measured.tolist(),
                   rounded(bc.bound.tolist(), 2), rounded(bc.fraction.tolist(), 4), bc.beats.tolist(),
                   rounded(bc.batch.tolist(), 3), bc.sources, [clean(round(x, 2)) for x in bc.bound_prefill.tolist()],
                   [clean(x) for x in pre_fraction.tolist()], bc.beats_prefill.tolist())
        out["physics"] = [dict(zip(keys, row)) for row in zip(*columns)]
        out["physics_bounds"] = {"decode_only": "pure decode at the prompt length, 100% of peak, no overhead",
                                 "with_prefill": None if bc.lengths is None else {
                                     "prompt_len": bc.lengths[0], "output_len": bc.lengths[1]}}
    return out


def _column(values: list, spec: str) -> list[str]:
    """Each value formatted by `spec` (e.g. "8.3f"), or "-" in its width where None or not finite."""
    dash = "-".rjust(int(spec.split(".")[0]))
    return [format(v, spec) if v is not None and math.isfinite(v) else dash for v in values]


def _ln_column(measured: list, predicted: list) -> list[str]:
    """ln(measured / predicted) per level, or "-" where either is not positive."""
    return [f"{math.log(m / p):+7.3f}" if m > 0 and p > 0 else "      -" for m, p in zip(measured, predicted)]


def measured_table(table, checks, causes, predicted: dict[str, Any] | None = None) -> str:
    """The measured on/off table, the crossover, the model beside it and the physics check."""
    lv, lc = _levels(table)
    cross, side = lc.crossover, lc.side
    axis = table.load_axis
    lines = [f"{'level':>9} ({axis}) | {'off tok/s':>10} {'on tok/s':>10} {'speedup':>8} | {'TPOT p50 off':>12} "
             f"{'on':>8} | {'tau':>5}"]
    pad = " " * (len(axis) + 2)
    taus = [f"{tau:5.2f}" if tau else "    -" for tau in lv["tau"]]
    lines += [f"{load:>9g} {pad} | {off:>10.1f} {on:>10.1f} {ratio} | {tp_off} {tp_on} | {tau}" for
              load, off, on, ratio, tp_off, tp_on, tau in zip(
                  lv["load"], lv["off"], lv["on"], _column(lv["ratio"], "8.3f"), _column(lv["tpot_off"], "12.2f"),
                  _column(lv["tpot_on"], "8.2f"), taus)]
    lines.append("")
    if axis == "request_rate" and not any(r == r for r in lv["ratio"]):
        lines.append("crossover: a request-rate sweep is compared on mean e2e latency (mean_e2el_ms), which the files "
                     "do not report in both arms; its output tok/s only tracks the offered rate")
    elif side == "equal":
        lines.append(f"crossover: none; the arms are equal within noise (speedup within {EQUAL_RTOL:.0%} of 1 at "
                     f"every level)")
    elif cross is None:
        lines.append(f"crossover: not bracketed by the measured levels; speculation stayed "
                     f"{'faster' if side == 'on' else 'slower'}")
    else:
        lines.append(f"crossover: {axis} {cross:.1f} (interpolated between the bracketing levels)")
        bad = _impossible_bracket(lv["load"], cross, checks)
        if bad:
            lines.append("           but it rests on a physically impossible point: " + ", ".join(
                f"{c.arm} at {c.load:g} beats the speed-of-light bound" for c in bad) + " (see the physics check)")
    lines += other_crossings(lc, axis)
    lines += latency_lines(latency_crossovers(table), axis)
    if predicted is not None:
        lines += ["", "predicted by the model (defaults, the files' tau and mean lengths; ln = ln(measured / predicted), "
                      "> 0: measured above the model):",
                  f"{'level':>9} | {'off tok/s':>10} {'ln':>7} | {'on tok/s':>10} {'ln':>7} | {'speedup':>8} {'ln':>7}"]
        lines += [f"{load:>9g} | {po:>10.1f} {ln_off} | {pn:>10.1f} {ln_on} | {ps:>8.3f} {ln_ratio}" for
                  load, po, ln_off, pn, ln_on, ps, ln_ratio in zip(
                      lv["load"], predicted["off"], _ln_column(lv["off"], predicted["off"]), predicted["on"],
                      _ln_column(lv["on"], predicted["on"]), predicted["speedup"],
                      _ln_column(lv["ratio"], predicted["speedup"]))]
        pc = predicted["crossover"]
        lines.append(f"predicted crossover: {axis} {pc:.1f}" if pc is not None else
                     f"predicted crossover: none up to {axis} {predicted['range']:g}")
        if axis == "request_rate":
            lines.append(f"(request rates through the serving simulator, {PREDICT_RATE_PROMPTS} requests per level at "
                         f"the files' mean lengths; speedup = mean e2e latency off/on)")
    if checks:
        lines += [""] + _physics_lines(BoundChecks.of(checks), axis, causes)
    return "\n".join(lines)


def _physics_lines(bc: BoundChecks, axis: str, causes) -> list[str]:
    """The physics check: each point against the decode-only bound and the one with the prefill share."""
    lengths = bc.lengths
    lines = ["physics check (measured output tok/s / speed-of-light bound: 100% of peak bandwidth and FLOP/s, no "
             "overhead):", "  decode only: pure decode at the prompt length" + (
                 f"; with prefill: {lengths[0]:g} prompt tokens prefilled per {lengths[1]:g} output tokens"
                 if lengths else "")]
    rates = axis == "request_rate"
    for c in bc:
        pre = (f" | with prefill {c.bound_prefill:>10.1f} = {c.measured / c.bound_prefill:6.1%}"
               if c.bound_prefill is not None else "")
        flag = ("  BEATS PHYSICS" if c.beats_physics else
                "  BEATS PHYSICS unless prefix caching is on" if c.beats_prefill else "")
        held = f"  (bound at {c.batch:.1f} in flight)" if rates and c.batch else ""
        lines.append(f"  {c.arm:>3} {c.load:>8g}: {c.measured:>10.1f} / decode only {c.bound:>10.1f} tok/s = "
                     f"{c.fraction:6.1%}{pre}{flag}{held}")
    if lengths is None:
        lines.append("  (decode only: the files record no token counts; --prompt-len and --output-len add the bound "
                     "with the prefill share)")
    if bc.impossible.any():
        lines.append("  likely causes: " + "; ".join(causes))
    return lines


def calibration_dict(fit, measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON contract of `crossover calibrate --json` (inputs added by the caller)."""
    out = {
        "parameters": fit.parameters(),
        "fixed": fit.fixed,
        # parameters the sweep cannot identify, held at the scenario's value: name -> {value, reason}
        "fixed_at_default": fit.at_default,
        # parameters the sweep pushes to a bound, held there: name -> {value, reason}
        "at_bound": fit.at_bound,
        "load_axis": fit.load_axis,
        "crossover": None if fit.crossover is None else round(fit.crossover, 4),
        # null ends: no crossover in that share of the bootstrap refits (crossover_never_cross_share)
        "crossover_interval": None if fit.crossover_interval is None else [
            None if not np.isfinite(x) else round(x, 4) for x in fit.crossover_interval],
        "crossover_never_cross_share": fit.never_cross,
        "crossover_searched_up_to": fit.searched,
        "measured_crossover": measured,
        "reproduces": fit.reproduces,
        "disagreements": fit.disagreements(),
        "ln_convention": LN_CONVENTION,
        "residuals": fit.residuals,
    }
    return out


# One sign for every ln error the verbs print: measured over predicted (> 0: measured above the model).
LN_CONVENTION = "ln(measured / predicted)"
_QUANTITY = {"tokens_per_s_off": "off tok/s", "tokens_per_s_on": "on tok/s", "mean_tpot_ms_off": "off TPOT",
             "mean_tpot_ms_on": "on TPOT"}


def _fitted_crossover_lines(fit, measured: dict[str, Any] | None) -> list[str]:
    """The measured crossover, the fitted one with its interval (an open end explained), and whether
    they agree."""
    axis, lines = fit.load_axis, []
    m = measured
    if m is not None:
        m_axis = m["load_axis"]
        if m["crossover"] is not None:
            lines.append(f"crossover, measured: {m_axis} {m['crossover']:.1f} (between the levels {m['between'][0]:g} "
                         f"and {m['between'][1]:g})")
        else:
            side = {"on": "speculation stayed faster", "off": "speculation stayed slower",
                    "equal": "the arms are equal within noise"}.get(m["side"] or "", "no level pair brackets it")
            lines.append(f"crossover, measured: none between the levels ({side})")
    iv, share = fit.crossover_interval, fit.never_cross
    band = ""
    if iv is not None and not np.isfinite(iv[0]):
        band = " (90% bootstrap interval: no crossover; measurement noise and parameter uncertainty)"
    elif iv is not None:
        hi = f"{iv[1]:.1f}" if np.isfinite(iv[1]) else "none"
        band = f" (90% bootstrap interval {iv[0]:.1f} - {hi}; measurement noise and parameter uncertainty)"
    where = f"{axis} {fit.crossover:.1f}" if fit.crossover is not None else \
        f"none up to {axis} {fit.searched:g} (twice the largest level)"
    lines.append(f"crossover, fitted:   {where}{band}")
    if share:
        open_end = iv is not None and np.isfinite(iv[0]) and not np.isfinite(iv[1])
        lines.append(f"  in {share:.0%} of the bootstrap resamples the fitted curves never cross up to {axis} "
                     f"{fit.searched:g}" + (": the interval is open above" if open_end else ""))
    if m is None or m["load_axis"] != axis:
        if m is not None:
            lines.append(f"  (the fit's crossover is in requests in flight, the measured one in {m['load_axis']})")
        return lines
    if m["crossover"] is not None and iv is not None and np.isfinite(iv[0]):
        inside = iv[0] <= m["crossover"] <= iv[1]
        lines.append(f"  the measured crossover lies {'inside' if inside else 'outside'} the fitted interval")
    elif agrees_on_crossing(fit, m) is False:
        lines.append("  the fit and the measurement disagree on whether the sweep crosses between its levels")
    return lines


def agrees_on_crossing(fit, m: dict[str, Any]) -> bool | None:
    """Whether the fit and the measurement agree that the sweep crosses between its levels (None:
    not comparable: the arms are equal within noise, or the axes differ)."""
    if m["load_axis"] != fit.load_axis or m["side"] == "equal":
        return None
    fitted = fit.crossover is not None and fit.crossover <= m["range"][1]
    return fitted == (m["crossover"] is not None)


def _cannot_reproduce(fit) -> list[str]:
    """Why the fit describes no deployment: nothing identified, or the levels it misses."""
    from ..analysis.sweep_fit import RESIDUAL_LIMIT

    if fit.reproduces:
        return []
    bad = fit.disagreements()
    by_level: dict[float, list[str]] = {}
    for d in bad:
        by_level.setdefault(d["level"], []).append(f"{_QUANTITY.get(d['quantity'], d['quantity'])} {d['ln']:+.3f}")
    what = []
    if not fit.names:
        what.append("nothing in it is identifiable (every parameter at a bound or its default)")
    if by_level:
        what.append(f"|ln| > {RESIDUAL_LIMIT:g} at {fit.load_axis} " + "; ".join(
            f"{level:g} ({', '.join(v)})" for level, v in by_level.items()))
    return ["", "the model cannot reproduce this sweep: " + " and ".join(what) + "; its values and crossover "
            "describe no deployment: check the model, TP, dtypes, engine and lengths the sweep ran (--out writes "
            "no file without --force)"]


def calibration_table(fit, inputs: dict[str, Any], measured: dict[str, Any] | None = None) -> str:
    """Fitted values with uncertainties, per-point residuals, the crossover with its interval beside
    the measured one, and whether the model reproduces the sweep."""
    lines = [f"calibrated {inputs['model']} on {gpus_said(inputs)}, {inputs['method']} "
             f"k={inputs['k']} ({fit.load_axis} sweep, {len(fit.residuals)} levels)", "",
             f"{'parameter':<24} {'value':>10} {'stderr':>10}"]
    for name, p in fit.parameters().items():
        note = "  (at its bound: the data push it there)" if p["at_bound"] else ""
        lines.append(f"{name:<24} {p['value']:>10.4g} {p['stderr']:>10.2g}{note}")
    for name, v in fit.fixed.items():
        lines.append(f"{name:<24} {v:>10.4g} {'(fixed)':>10}")
    for name, d in fit.at_bound.items():
        lines.append(f"{name:<24} {d['value']:>10.4g} {'(bound)':>10}  {d['reason']}")
    for name, d in fit.at_default.items():
        lines.append(f"{name:<24} {d['value']:>10.4g} {'(default)':>10}  {d['reason']}")
    by_tput = all("tokens_per_s_off" in r for r in fit.residuals)
    what, key = ("tok/s", "tokens_per_s") if by_tput else ("TPOT ms", "mean_tpot_ms")
    width = 8 if by_tput else 13
    lines += ["", f"per level, ln = {LN_CONVENTION} (> 0: measured above the model):",
              f"{'level' if by_tput else 'in flight':>{width}} | {'off ' + what:>12} {'predicted':>10} {'ln':>7} | "
              f"{'on ' + what:>12} {'predicted':>10} {'ln':>7}"]
    for r in fit.residuals:
        off, on = r[f"{key}_off"], r[f"{key}_on"]
        level = f"{r[fit.load_axis]:g}" if by_tput else f"{r[fit.load_axis]:.1f} / {r['in_flight_on']:.1f}"
        lines.append(f"{level:>{width}} | {off['measured']:>12.1f} {off['predicted']:>10.1f} "
                     f"{off['ln_ratio']:>+7.3f} | {on['measured']:>12.1f} {on['predicted']:>10.1f} {on['ln_ratio']:>+7.3f}")
    tpot = [r for r in fit.residuals if "mean_tpot_ms_off" in r and "mean_tpot_ms_on" in r] if by_tput else []
    if tpot:
        lines += [f"{'':>{width}} | {'off TPOT ms':>12} {'predicted':>10} {'ln':>7} | {'on TPOT ms':>12} "
                  f"{'predicted':>10} {'ln':>7}"]
        for r in tpot:
            off, on = r["mean_tpot_ms_off"], r["mean_tpot_ms_on"]
            lines.append(f"{r[fit.load_axis]:>{width}g} | {off['measured']:>12.2f} {off['predicted']:>10.2f} "
                         f"{off['ln_ratio']:>+7.3f} | {on['measured']:>12.2f} {on['predicted']:>10.2f} {on['ln_ratio']:>+7.3f}")
    if not by_tput:
        lines.append("(a request-rate sweep: each level is fitted at its requests in flight off/on, rate x mean "
                     "e2e latency, on mean TPOT; the crossover is in requests in flight)")
    lines.append("")
    lines += _fitted_crossover_lines(fit, measured)
    lines += _cannot_reproduce(fit)
    return "\n".join(lines)


def measured_text(table, checks, causes, predicted, effects, diagnosis=None) -> str:
    """`crossover measured`'s text: the table and physics check, then the diagnosis: one verdict with
    its evidence (comparison.diagnosis; the engine effects stay in the JSON)."""
    text = measured_table(table, checks, causes, predicted)
    if not diagnosis:
        return text
    return text + "\n\n" + "\n".join(diagnosis_lines(diagnosis, table.load_axis))


def diagnosis_lines(d: dict[str, Any], axis: str) -> list[str]:
    """The verdict, the expectation it rests on, each level against it, the settings re-priced, the load
    fit of a rate sweep and, for an engine verdict, what to report."""
    e = d["engine"]
    sampling = f", {e['sampling']}" if e.get("sampling") else ""
    lines = [f"diagnosis (judged on {d['judged_on']}; engine {e['label']}, from {e['source']}{sampling}):",
             f"  verdict: {d['message']}"]
    x = d.get("expectation") or {}
    if x.get("basis") == "off_arm_fit":
        params = ", ".join(f"{k} {v:.3g}" for k, v in x["parameters"].items()) or "none (too few levels)"
        fit = f" (the off arm within |ln| {x['max_ln_off']:.3f})" if x.get("max_ln_off") is not None else ""
        lines.append(f"  expectation: this engine's host time fitted to the sweep's off arm: {params}{fit}; the on arm "
                     f"priced on it at each level's tau (its crossover: {_num(x['predicted_crossover'])})")
    elif x.get("basis") == "serving_simulator":
        lines.append(f"  expectation: the serving simulator's mean e2e latency per arm, as the ratio off/on (its "
                     f"crossover: {_num(x['predicted_crossover'])})")
    rows = [r for r in d.get("levels", [])]
    if rows and "on_expected" in rows[0]:
        lines.append(f"  {axis:>14} | on tok/s measured   expected      ln | on TPOT measured  expected      ln | "
                     f"shortfall")
        for r in rows:
            if "ln_shortfall" not in r:
                lines.append(f"  {r['level']:>14g} | {r.get('status', '')}")
                continue
            tp = (f"{r['tpot_on_measured']:>16.2f} {r['tpot_on_expected']:>9.2f} {r['ln_tpot_on']:>+7.3f}"
                  if "ln_tpot_on" in r else f"{'-':>16} {'-':>9} {'-':>7}")
            lines.append(f"  {r['level']:>14g} | {r['on_measured']:>17.1f} {r['on_expected']:>10.1f} {r['ln_on']:>+7.3f}"
                         f" | {tp} | {r['ln_shortfall']:>+9.3f}")
    elif rows:
        lines.append(f"  {axis:>14} | e2e ms off measured  expected | on measured  expected | ratio shortfall")
        for r in rows:
            short = f"{r['ln_shortfall']:>+15.3f}" if "ln_shortfall" in r else f"{r.get('status', ''):>15}"
            lines.append(f"  {r['level']:>14g} | {r['e2el_off_measured']:>19.1f} {r['e2el_off_expected']:>9.1f} | "
                         f"{r['e2el_on_measured']:>11.1f} {r['e2el_on_expected']:>9.1f} | {short}")
    if rows:
        what = ("the worse of throughput and TPOT" if "on_expected" in rows[0] else
                "ln of the expected latency ratio off/on over the measured one")
        lines.append(f"  (ln = {LN_CONVENTION}; shortfall: how far the on arm is below its expectation, {what}; "
                     f"beyond {d['tolerance_ln']:g} it is diagnosed)")
    tried = [c for c in d.get("causes", []) if c.get("checked")]
    if tried:
        lines.append("  re-priced with each setting (at the worst level): " + "; ".join(
            f"{c['cause']} {c['on_expected']:.1f} tok/s ({'explains it' if c['explains'] else 'does not explain it'})"
            for c in tried))
    lines += load_fit_lines(d.get("load_fit"))
    for item in d.get("report", []):
        lines.append(f"  report: {item}")
    return lines


def _num(x) -> str:
    return "none" if x is None else f"{x:.1f}"
