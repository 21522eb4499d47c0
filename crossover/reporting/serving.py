"""The serving sweeps' tables and dicts (simulate, and the latency and load-fit lines measured shares)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..analysis.crossings import EQUAL_RTOL
from ..comparison.compare import latency_crossings
from . import gpus_said
from .text import engine_line


def clean(x: float | bool) -> float | bool | None:
    """JSON-safe value: booleans stay booleans, NaN and infinities become null."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    x = float(x)
    return round(x, 4) if math.isfinite(x) else None


def simulation_dict(res) -> dict[str, Any]:
    """The JSON contract of `crossover simulate --json` (inputs added by the caller)."""
    key = res.axis
    levels = []
    for lv, ratio in zip(res.levels, res.ratios):
        levels.append({key: int(lv.value) if key == "concurrency" else float(lv.value),
                       "off": {k: clean(v) for k, v in lv.off.items()},
                       "on": {k: clean(v) for k, v in lv.on.items()}, "speedup": clean(ratio)})
        if lv.policy is not None:
            levels[-1]["policy"] = {k: clean(v) for k, v in lv.policy.items()}
    return {
        "load_axis": key,
        "speedup_metric": "output_throughput on/off" if key == "concurrency" else "mean_e2el_ms off/on",
        "levels": levels,
        f"crossover_{key}": None if res.crossover is None else round(res.crossover, 4),
        f"crossover_{key}_interval": None if res.crossover_interval is None
        else [None if x is None else round(x, 4) for x in res.crossover_interval],
        "crossings": res.level_crossings.crossings_json(),
        "crossover_side": res.side,
        "latency": _simulated_latency(res),
        "load_fit": res.load_fit,
    }


def _simulated_latency(res) -> dict[str, dict[str, Any]]:
    return latency_crossings([lv.value for lv in res.levels], [lv.off for lv in res.levels],
                             [lv.on for lv in res.levels])


def simulation_rows(res) -> list[dict[str, Any]]:
    """One flat row per level and arm, for CSV."""
    rows = []
    for lv in res.levels:
        for arm in ("off", "on"):
            row: dict[str, Any] = {res.axis: lv.value, "arm": arm}
            row.update({k: clean(v) for k, v in getattr(lv, arm).items()})
            rows.append(row)
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return [{k: r.get(k) for k in keys} for r in rows]


def simulation_table(res, inputs: dict[str, Any]) -> str:
    """Side-by-side off / on / ratio per level, and the crossover."""
    axis = res.axis
    label = "conc" if axis == "concurrency" else "req/s"
    lines = [
        f"{inputs['model']} on {gpus_said(inputs)}, workload {inputs['workload']} "
        f"(mean prompt {inputs['prompt_len']:.0f}, output {inputs['output_len']:.0f} tokens), "
        f"{inputs['num_prompts']} requests per level (at least 10 rounds of the clients), seed {inputs['seed']}",
        f"speculation: {inputs['method']}, k={inputs['k']}, tau {inputs['tau']:.3f} tokens/step",
        engine_line(inputs),
        *([f"engine limits: {inputs['max_num_seqs']} running requests, {inputs['max_num_batched_tokens']} tokens per "
           f"step ({inputs['engine_limits']})"] if inputs.get("engine_limits") else []),
        *([f"running requests: at most {inputs['max_num_seqs']} off, {inputs['max_num_seqs_speculating']} on "
           f"({inputs['max_num_seqs_note']})"] if inputs.get("max_num_seqs_speculating") else []),
        "",
        f"{label:>7} | {'output tok/s':^26} | {'TTFT p50 ms':^15} | {'TPOT p50 ms':^15} | {'TPOT p99 ms':^15} "
        f"| {'E2E p99 s':^13}",
        f"{'':>7} | {'off':>8} {'on':>8} {'ratio':>8} | {'off':>7} {'on':>7} | {'off':>7} {'on':>7} | "
        f"{'off':>7} {'on':>7} | {'off':>6} {'on':>6}",
    ]
    for lv, ratio in zip(res.levels, res.ratios):
        f, n = lv.off, lv.on
        lines.append(
            f"{lv.value:>7g} | {_tput(f)} {_tput(n)} {ratio:>8.3f} | "
            f"{f['median_ttft_ms']:>7.1f} {n['median_ttft_ms']:>7.1f} | {f['median_tpot_ms']:>7.2f} "
            f"{n['median_tpot_ms']:>7.2f} | {f['p99_tpot_ms']:>7.2f} {n['p99_tpot_ms']:>7.2f} | "
            f"{f['p99_e2el_ms'] / 1e3:>6.2f} {n['p99_e2el_ms'] / 1e3:>6.2f}")
    if axis == "request_rate":
        lines += _rate_lines(res)
    if res.levels and res.levels[0].policy is not None:
        route = inputs.get("routing") or {}
        how = (f"hysteresis: speculate until the running batch exceeds {route['stop_above']}, resume below "
               f"{route['speculate_below']}" if route.get("rule") == "hysteresis"
               else "the best-k schedule applied step by step")
        lines += ["", f"routing by load ({how}):",
                  f"{label:>7} | {'policy tok/s':>12} {'vs on':>7} {'vs off':>7} | {'mean E2E s':>10} {'vs on':>7} "
                  f"{'vs off':>7}"]
        for lv in res.levels:
            p_, f, n = lv.policy, lv.off, lv.on
            lines.append(f"{lv.value:>7g} | {p_['output_throughput']:>12.0f} "
                         f"{p_['output_throughput'] / n['output_throughput']:>7.3f} "
                         f"{p_['output_throughput'] / f['output_throughput']:>7.3f} | {p_['mean_e2el_ms'] / 1e3:>10.2f} "
                         f"{n['mean_e2el_ms'] / p_['mean_e2el_ms']:>7.3f} {f['mean_e2el_ms'] / p_['mean_e2el_ms']:>7.3f}")
    lines.append("")
    metric = "output throughput on/off" if axis == "concurrency" else "mean end-to-end latency off/on"
    what = "concurrency" if axis == "concurrency" else "request rate"
    lc = res.level_crossings
    if lc.side == "equal":
        lines.append(f"crossover: none in {what} {res.levels[0].value:g}..{res.levels[-1].value:g}; the arms are "
                     f"equal within noise ({metric} within {EQUAL_RTOL:.0%} of 1 at every level)")
    elif res.crossover is None:
        side = "faster" if res.side == "on" else "slower"
        lines.append(f"crossover: not reached in {what} {res.levels[0].value:g}..{res.levels[-1].value:g}; "
                     f"speculation stayed {side} ({metric})")
    else:
        ci = res.crossover_interval
        band = "" if ci is None else (f"; {ci[0]:.1f} to " + (f"{ci[1]:.1f}" if ci[1] is not None else
                                      f"beyond {res.levels[-1].value:g}") + " within the levels' 95% throughput "
                                      "intervals")
        lines.append(f"crossover: {what} {res.crossover:.1f} (interpolated between levels; {metric} = 1{band})")
    lines += other_crossings(lc, what)
    lines += latency_lines(_simulated_latency(res), what)
    lines += [x.strip() for x in load_fit_lines(res.load_fit)]
    return "\n".join(lines)


def _tput(arm: dict[str, Any]) -> str:
    """Output tok/s in 8 columns, a `*` when the arm's queue grew without bound at that level."""
    return f"{arm['output_throughput']:>7.0f}{'*' if arm.get('saturated') else ' '}"


def _rate_lines(res) -> list[str]:
    """Offered and achieved request rates per level, and which arms saturated (request-rate sweeps)."""
    first = res.levels[0]
    cap = {a: getattr(first, a).get("capacity_request_rate") for a in ("off", "on")}
    lines = ["", f"{'req/s':>7} | {'achieved req/s':^16} | saturated     (capacity at the engine's limit: "
                 f"off {cap['off']:.2f}, on {cap['on']:.2f} req/s)",
             f"{'offered':>7} | {'off':>7} {'on':>8} |"]
    for lv in res.levels:
        sat = [a for a in ("off", "on") if getattr(lv, a).get("saturated")]
        lines.append(f"{lv.value:>7g} | {lv.off['achieved_request_rate']:>7.2f} {lv.on['achieved_request_rate']:>8.2f} "
                     f"| {', '.join(sat) if sat else '-'}")
    if any(lv.off.get("saturated") or lv.on.get("saturated") for lv in res.levels):
        lines.append("* saturated: the offered rate exceeds what the server completes with its batch at the engine's "
                     "limit, so the queue grows without bound and latencies grow with --num-prompts")
    return lines


def other_crossings(lc, axis: str) -> list[str]:
    """Lines for the sign changes besides the crossover (noise between levels, or a second crossing)."""
    if len(lc.crossings) < 2:
        return []
    listed = ", ".join(f"{x:.1f} ({d})" for x, d in lc.crossings)
    return [f"           the ratio changes side {len(lc.crossings)} times: at {axis.replace('_', ' ')} {listed}"]


def _where(d: dict[str, Any], axis: str) -> str:
    """A latency metric's crossing as words."""
    what = axis.replace("_", " ")
    if d["bracketed"]:
        more = f" (and {len(d['crossings']) - 1} more sign change(s))" if len(d["crossings"]) > 1 else ""
        return f"crosses at {what} {d['crossover']:.1f}{more}"
    if d["side"] == "equal":
        return f"no crossover; equal within noise (within {EQUAL_RTOL:.0%})"
    return f"not bracketed; {'lower' if d['side'] == 'on' else 'higher'} with speculation throughout"


def load_fit_lines(lf: dict[str, Any] | None) -> list[str]:
    """Kong et al.'s load fit of a rate sweep's two arms (SweepResult.load_fit, measured's), one line."""
    if not lf:
        return []
    off, on = lf["off"], lf["on"]
    be = (f"break-even {lf['qps']:.3g} req/s (r* = {lf['r_star']:.3g})" if lf.get("qps") is not None
          else f"no break-even rate: {lf['why']}")
    ratio = f"{lf['c2_ratio']:.3f}" if lf.get("c2_ratio") is not None else "-"
    return [f"  load fit (Kong et al., L = C1 / (1 - QPS C2)): off C1 {off['c1_ms']:.1f} ms, C2 "
            f"{off['c2_ms_per_request']:.2f} ms/request; on C1 {on['c1_ms']:.1f} ms, C2 "
            f"{on['c2_ms_per_request']:.2f} ms/request; C2(on)/C2(off) {ratio}; {be}"]


def latency_lines(lat: dict[str, dict[str, Any]], axis: str) -> list[str]:
    """The latency crossings as text lines (empty when no metric is in both arms)."""
    if not lat:
        return []
    lines = ["", "latency, off/on per level (> 1: lower with speculation):"]
    for name, d in lat.items():
        lines.append(f"  {name:<15} {' '.join(f'{r:6.3f}' for r in d['ratios'])}   {_where(d, axis)}")
    if any(n.endswith("itl_ms") for n in lat):
        lines.append("  (ITL is the gap between streamed chunks, and a speculative step streams several tokens "
                     "at once: compare TPOT per token)")
    return lines
