"""One verdict per measured sweep, with its evidence, from a documented decision procedure (issue 22
item 4; the guide: docs/guide/measured-and-calibrate.md, "Diagnosis").

1. Impossible points. A point beyond a speed-of-light bound (analysis.bounds: decode only, or with
   the sweep's prefill share, the second unless prefix caching is on) is no measurement of this
   deployment: verdict `impossible`, "an impossible point: the data are wrong, fix them first"; no
   level with one is diagnosed further.
2. The expectation. Concurrency and batch sweeps, judged on throughput and TPOT: the engine's host
   time per step (and with three levels or more its achieved bandwidth) fitted to the sweep's own off
   arm (analysis.sweep_fit.fit_off_arm), the on arm priced on that baseline at each level's tau:
   what this engine should have done with speculation. Request-rate sweeps, judged on latency (their
   output tokens/s tracks the offered load until saturation): the serving simulator's mean e2e
   latency of each arm, compared as the ratio off/on, so that the off arm's own mismatch cancels; the
   Kong et al. load fit of each arm beside it (analysis.load_fit).
3. The shortfall at each level, ln: the on arm below its expectation, the worse of its throughput
   (-ln(measured / expected)) and its mean TPOT (ln(measured / expected)) where reported; rate
   sweeps: ln(expected latency ratio / measured latency ratio).
4. Every level within TOLERANCE: `physics`, "above your crossover (physics): measured crossover X,
   predicted Y, the on arm within Z% of what this engine can do" (or, where the sweep never slows
   down, speculation pays as this engine allows).
5. Some level below the expectation beyond TOLERANCE: the causes that can apply to the engine that
   ran and its configuration (CAUSES, in that order); each that can be re-priced re-prices the on
   arm with that setting, and the one that brings the worst level closest, within TOLERANCE, is the
   verdict `configuration`, "the on arm is W% below the expectation and the setting that explains it
   is ..."; else the first that applies and cannot be re-priced (`configuration`, unchecked); else
   `engine`, "the engine does worse than its own profile allows: likely a regression or a bug",
   with what to report.
6. Else some level above it beyond TOLERANCE: `model`: the engine does better than the model
   expects there (calibrate the sweep before reading its crossover).
A rate sweep whose files lack mean_e2el_ms, or that has no prediction beside it: `inconclusive`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .compare import measured_crossover
from .engine_effects import ASYNC_OFF_SAID, ASYNC_OFF_WHY, MLA_PREFILL_SAID, async_lost, ran_engine

if TYPE_CHECKING:
    from ..measurements import MeasuredTable
    from ..model.scenario import Scenario

# ln: ~14% either way, the model's spread against measured engines at a level (engine_effects uses
# the same for "deeper than the model allows")
TOLERANCE = 0.15
# The causes, in the order they are tried: (name, what applies, the setting a user changes)
CAUSES = ("spec_running_cap", "piecewise_graphs", "cuda_graphs_none", "batch_expansion", "mla_verify_prefill",
          "mla_verify_decode", "async_scheduling_off")


def _pct(ln: float, above: bool = False) -> str:
    """A shortfall (or, `above`, an excess) in ln as the percentage it is of the expectation."""
    return f"{(math.expm1(abs(ln)) if above else -math.expm1(-abs(ln))) * 100:.0f}%"


def _shown(x: float | None, spec: str = ".1f") -> str:
    return "none" if x is None else format(x, spec)


def diagnose(table: MeasuredTable, sc: Scenario | None, checks, predicted: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sweep's verdict and its evidence (the module's procedure); None without a model."""
    if sc is None:
        return None
    from ..analysis.bounds import BoundChecks

    bc = BoundChecks.of(checks) if checks is not None and len(checks) else None
    bad = bc.impossible if bc is not None else np.zeros(0, bool)
    bad_levels = sorted(set(bc.load[bad].tolist())) if bc is not None else []
    body = _rates(table, sc, predicted, bad_levels) if table.load_axis == "request_rate" else \
        _concurrency(table, sc, bad_levels)
    out: dict[str, Any] = {"engine": ran_engine(table, sc), "tolerance_ln": TOLERANCE, **body}
    if bad_levels:  # the verdict; what the other levels would say is no diagnosis of a sweep with wrong data
        for key in ("causes", "report"):
            out.pop(key, None)
        pts = [bc[i] for i in np.flatnonzero(bad).tolist()]
        said = "; ".join(f"{c.arm} at {c.load:g}: {c.measured:.1f} tok/s above " + (
            f"the decode-only bound {c.bound:.1f}" if c.beats_physics else
            f"the bound with the prefill share {c.bound_prefill:.1f} (unless prefix caching is on)") for c in pts[:4])
        out.update(verdict="impossible", message=f"an impossible point: the data are wrong, fix them first ({said}"
                   f"{' ...' if len(pts) > 4 else ''}); no further diagnosis at {table.load_axis} "
                   f"{', '.join(f'{x:g}' for x in bad_levels)}",
                   impossible=[{"arm": c.arm, "level": c.load, "measured": c.measured, "bound": c.bound,
                                "bound_with_prefill": c.bound_prefill, "decode_only": c.beats_physics} for c in pts])
    return out


def _observations(table: MeasuredTable):
    from ..analysis.sweep_fit import Observation

    def tpot(p) -> float | None:
        v = p.metrics.get("mean_tpot_ms")
        return float(v) if v and math.isfinite(v) and v > 0 else None

    return [Observation(load, off.output_throughput, on.output_throughput, tpot(off), tpot(on),
                        f"{off.source} | {on.source}", tau_on=on.acceptance_length or None)
            for load, off, on in table.pairs()]


def _concurrency(table: MeasuredTable, sc: Scenario, bad_levels: list[float]) -> dict[str, Any]:
    from ..analysis.sweep_fit import first_crossing, fit_off_arm, predict

    obs = _observations(table)
    keep = [o.load not in bad_levels and o.tput_off > 0 and o.tput_on > 0 and math.isfinite(o.tput_off)
            and math.isfinite(o.tput_on) for o in obs]
    usable = [o for o, k in zip(obs, keep) if k]
    base, fitted = fit_off_arm(sc, usable)
    off, on, _, tp_on = predict(base, obs) if obs else (np.zeros(0),) * 4
    levels = []
    for i, o in enumerate(obs):
        row: dict[str, Any] = {"level": o.load, "on_measured": o.tput_on, "on_expected": float(on[i]),
                               "off_measured": o.tput_off, "off_expected": float(off[i])}
        if not keep[i]:
            row["status"] = "impossible" if o.load in bad_levels else "no throughput"
            levels.append(row)
            continue
        row["ln_on"] = math.log(o.tput_on / on[i])
        row["ln_off"] = math.log(o.tput_off / off[i])
        short = -row["ln_on"]
        if o.tpot_on:
            row.update(tpot_on_measured=o.tpot_on, tpot_on_expected=float(tp_on[i]),
                       ln_tpot_on=math.log(o.tpot_on / tp_on[i]))
            short = max(short, row["ln_tpot_on"])
        row["ln_shortfall"] = short
        levels.append(row)
    b_max = 2.0 * max((o.load for o in obs), default=1.0)
    cross = first_crossing(base, usable, b_max, grid=96, refine=True) if usable else math.inf
    out: dict[str, Any] = {
        "judged_on": "output throughput and mean TPOT of the on arm against this engine's expectation",
        "expectation": {"basis": "off_arm_fit", **fitted,
                        "predicted_crossover": cross if math.isfinite(cross) else None, "searched_up_to": b_max},
        "levels": levels, "measured_crossover": measured_crossover(table)["crossover"],
    }
    judged = [r for r in levels if "ln_shortfall" in r]
    if not judged:
        return {**out, "verdict": "inconclusive", "message": "no level to diagnose: every level has an impossible point "
                "or an arm that delivered nothing"}
    return {**out, **_verdict(table, sc, obs, judged, out)}


def _verdict(table, sc, obs, judged: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    axis = table.load_axis
    worst = max(judged, key=lambda r: r["ln_shortfall"])
    best = min(judged, key=lambda r: r["ln_shortfall"])
    x, y = out["measured_crossover"], out["expectation"].get("predicted_crossover")
    within = max(abs(r["ln_shortfall"]) for r in judged)
    slowed = any(r["on_measured"] < r["off_measured"] for r in judged)
    off_worst = max(judged, key=lambda r: abs(r["ln_off"]))
    if abs(off_worst["ln_off"]) > TOLERANCE:  # no baseline: the expectation of the on arm rests on nothing
        return {"verdict": "model", "message": f"the model cannot reproduce this sweep's off arm (ln "
                f"{off_worst['ln_off']:+.3f} at {axis} {off_worst['level']:g} with this engine's host time fitted to "
                f"it), so it has no expectation of the on arm: check the model, TP, dtypes and the lengths "
                f"(--prompt-len / --output-len) the sweep ran"}
    usable = [o for o in obs if o.load in {r["level"] for r in judged}]
    if worst["ln_shortfall"] > TOLERANCE:
        return _below(table, sc, worst, _causes(table, sc, usable, worst), out)
    if best["ln_shortfall"] < -TOLERANCE:
        causes = _causes(table, sc, usable, best)
        found = _explaining(causes)
        if found:
            c, also = found
            return {"verdict": "configuration", "causes": causes, "message": f"configuration: the on arm is "
                    f"{_pct(best['ln_shortfall'], True)} above the expectation at {axis} {best['level']:g} and the "
                    f"setting that explains it is {c['setting']} (re-priced with it: {c['on_expected']:.1f} tok/s "
                    f"there, measured {best['on_measured']:.1f}{also})"}
        return {"verdict": "model", "causes": causes, "message": f"the on arm does better than the model expects: "
                f"{_pct(best['ln_shortfall'], True)} above its expectation at {axis} {best['level']:g}; the model "
                "misses something this engine does there (acceptance at that load above the files' tau, a cheaper "
                "draft or verify): calibrate the sweep before reading its crossover"}
    head = ("above your crossover (physics)" if slowed else
            "speculation pays at every measured level, as this engine allows (physics)")
    where = (f"measured crossover {_shown(x)}" if x is not None or slowed else "no measured crossover")
    pred = f"predicted {_shown(y)}"
    if y is None and slowed:  # the expectation stays just above 1: say how close
        last = max(judged, key=lambda r: r["level"])
        pred = (f"predicted none up to {axis} {out['expectation']['searched_up_to']:g} (expected speedup "
                f"{last['on_expected'] / last['off_expected']:.3f} at {last['level']:g}, measured "
                f"{last['on_measured'] / last['off_measured']:.3f})")
    return {"verdict": "physics", "message": f"{head}: {where}, {pred}, the on arm within "
            f"{_pct(within, True)} of what this engine can do"}


def _causes(table, sc: Scenario, usable, worst: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cause of CAUSES that can apply to the engine that ran, each re-priced where it can be: the
    scenario with that setting, this engine's host time fitted again to the off arm on it, the on arm
    priced at every judged level; it explains the sweep when every level is then within TOLERANCE."""
    from dataclasses import replace

    from ..analysis.sweep_fit import fit_off_arm, predict
    from ..specs.engine import EAGER_FLAG
    from ..specs.loader import load_engine

    ran = ran_engine(table, sc)["framework"]
    engine, spec = sc.deployment.engine, sc.speculation
    w = next(j for j, o in enumerate(usable) if o.load == worst["level"])
    out: list[dict[str, Any]] = []

    def priced(name: str, setting: str, s: Scenario | None = None, cap: float | None = None, why: str = "") -> None:
        entry: dict[str, Any] = {"cause": name, "setting": setting}
        if s is None:
            entry.update(checked=False, explains=None, why=why)
            out.append(entry)
            return
        base, _ = fit_off_arm(s, usable)
        at = [replace(o, load=min(o.load, cap) if cap else o.load, load_on=None) for o in usable]
        _, on, _, tp_on = predict(base, at)
        short = [max(-math.log(o.tput_on / on[j]), math.log(o.tpot_on / tp_on[j]) if o.tpot_on else -math.inf)
                 for j, o in enumerate(usable)]
        entry.update(checked=True, on_expected=float(on[w]), ln_shortfall=short[w], ln_worst_after=max(short, key=abs),
                     explains=max(abs(x) for x in short) <= TOLERANCE)
        out.append(entry)

    cap = engine.spec_max_running
    if ran == "sglang" and cap and max(o.load for o in usable) > cap:
        priced("spec_running_cap", f"SGLang's cap of {cap} running requests with speculation on (server_args.py; "
               f"--max-running-requests sets another): above it the speculative arm queues", sc, cap=float(cap))
    if ran == "vllm" and engine.vllm_v1 and engine.full_graphs:
        priced("piecewise_graphs", "PIECEWISE CUDA graphs (compilation_config cudagraph_mode; vLLM before 0.11 "
               "captures PIECEWISE only): attention outside the graph every step, paid per sequence, which "
               "speculation pays over fewer steps", sc.with_engine(engine.configured(cuda_graphs="piecewise")))
    if engine.graph_capture_limit:
        priced("cuda_graphs_none", f"CUDA graphs disabled ({EAGER_FLAG.get(ran, 'eager mode')}): every forward pays "
               "its layers' launch time", sc.with_engine(engine.configured(cuda_graphs="none")))
    if ran == "vllm" and engine.verify_layout == "multi_query":
        priced("batch_expansion", "vLLM V0's batch-expansion scorer (vLLM before 0.10, or VLLM_USE_V1=0): k + 1 "
               "single-query sequences per request, each re-reading its KV cache", sc.with_engine(load_engine("vllm-v0")))
    if ran == "vllm" and sc.deployment.model.mla is not None:  # the MLA backend's verify path, either way
        if not sc.deployment.mla_verify_prefill:
            priced("mla_verify_prefill", MLA_PREFILL_SAID, sc.with_engine(engine.configured(mla_verify_prefill="always")))
        else:
            priced("mla_verify_decode", "an MLA attention backend that scores the verify tokens as a decode "
                   "(--attention-backend FLASHINFER_MLA or FLASHMLA), not the prefill path the profile prices here",
                   sc.with_engine(engine.configured(mla_verify_prefill="never")))
    if ran == "vllm" and async_lost(engine, spec.method):
        priced("async_scheduling_off", ASYNC_OFF_SAID.format(spec.method),
               why=ASYNC_OFF_WHY)
    return out


def _explaining(causes: list[dict[str, Any]]) -> tuple[dict[str, Any], str] | None:
    """The cause that explains the sweep best (the first of equals, CAUSES order) and the settings
    the model cannot tell from it (the same prices within 1e-6 in ln)."""
    explaining = [c for c in causes if c.get("explains")]
    if not explaining:
        return None
    c = min(explaining, key=lambda c: abs(c["ln_worst_after"]))
    same = [d["setting"].split(" (")[0] for d in explaining if d is not c
            and abs(d["ln_worst_after"] - c["ln_worst_after"]) < 1e-6]
    return c, (f"; or, priced the same here, {' or '.join(same)}" if same else "")


def _below(table, sc: Scenario, worst: dict[str, Any], causes: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    axis, w = table.load_axis, _pct(worst["ln_shortfall"])
    at = f"{axis} {worst['level']:g}"
    found = _explaining(causes)
    if found:
        c, also = found
        return {"verdict": "configuration", "causes": causes, "message": f"configuration: the on arm is {w} below the "
                f"expectation at {at} and the setting that explains it is {c['setting']} (re-priced with it: "
                f"{c['on_expected']:.1f} tok/s there, measured {worst['on_measured']:.1f}{also})"}
    unchecked = [c for c in causes if not c["checked"]]
    if unchecked:
        c = unchecked[0]
        return {"verdict": "configuration", "causes": causes, "message": f"configuration: the on arm is {w} below the "
                f"expectation at {at} and the setting that can explain it is {c['setting']} (not re-priced: {c['why']})"}
    ran = ran_engine(table, sc)
    spec = sc.speculation
    below = [r for r in out["levels"] if r.get("ln_shortfall", 0) > TOLERANCE]
    fitted = out.get("expectation", {})
    report = [f"engine: {ran['label']} ({ran['source']}); {spec.method} k={spec.k}"
              + (f", draft {spec.draft}" if getattr(spec, "draft", None) else ""),
              "levels below this engine's expectation: " + "; ".join(
                  f"{axis} {r['level']:g}: on {r['on_measured']:.1f} tok/s vs {r['on_expected']:.1f} expected"
                  + (f", TPOT {r['tpot_on_measured']:.2f} vs {r['tpot_on_expected']:.2f} ms" if "ln_tpot_on" in r else "")
                  for r in below)]
    if fitted.get("max_ln_off") is not None:
        params = ", ".join(f"{k} {v:.3g}" for k, v in fitted["parameters"].items())
        report.append(f"the off arm fits this engine's profile within |ln| {fitted['max_ln_off']:.3f} ({params})")
    tried = [c for c in causes if c["checked"]]
    if tried:
        report.append("settings re-priced that do not explain it: " + "; ".join(
            f"{c['cause']} ({c['on_expected']:.1f} tok/s)" for c in tried))
    report.append("attach: the server's launch command (--speculative-config), its startup log and this output")
    return {"verdict": "engine", "causes": causes, "report": report, "message": f"the engine does worse than its "
            f"own profile allows: likely a regression or a bug; the on arm is {w} below the expectation at {at} "
            f"and no setting that can apply to {ran['label']} explains it (what to report below)"}


def _rates(table: MeasuredTable, sc: Scenario, predicted: dict[str, Any] | None, bad_levels: list[float]) -> dict[str, Any]:
    from ..analysis.load_fit import break_even, fit_load

    loads, off_rows, on_rows = table.levels()
    e = table.columns.metric("mean_e2el_ms")
    e_off, e_on = e[off_rows], e[on_rows]
    out: dict[str, Any] = {"judged_on": "mean e2e latency off/on against the serving simulator's (a rate sweep's "
                           "output tokens/s tracks the offered load until saturation)"}
    ok = np.isfinite(e_off) & np.isfinite(e_on) & (e_off > 0) & (e_on > 0)
    if not ok.all():
        return {**out, "verdict": "inconclusive", "message": "a request-rate sweep is judged on latency: the files "
                "report no mean_e2el_ms at every level of both arms"}
    use = ~np.isin(loads, np.asarray(bad_levels, float))
    fits = {arm: fit_load(loads[use], lat[use] / 1e3) for arm, lat in (("off", e_off), ("on", e_on))}
    if fits["off"] is not None and fits["on"] is not None:
        out["load_fit"] = {"off": fits["off"].to_dict(), "on": fits["on"].to_dict(), **break_even(fits["off"], fits["on"])}
    out["measured_crossover"] = measured_crossover(table)["crossover"]
    if predicted is None or "e2el_off" not in predicted:
        return {**out, "verdict": "inconclusive", "message": "no prediction beside this request-rate sweep (its files "
                "record no token totals): only the measured latencies and their load fit"}
    p_off, p_on = np.asarray(predicted["e2el_off"], float), np.asarray(predicted["e2el_on"], float)
    levels = []
    for i, load in enumerate(loads.tolist()):
        row: dict[str, Any] = {"level": load, "e2el_off_measured": float(e_off[i]), "e2el_on_measured": float(e_on[i]),
                               "e2el_off_expected": float(p_off[i]), "e2el_on_expected": float(p_on[i])}
        if not use[i]:
            row["status"] = "impossible"
        else:
            row.update(ln_e2el_on=math.log(e_on[i] / p_on[i]), ln_e2el_off=math.log(e_off[i] / p_off[i]),
                       ln_shortfall=math.log((p_off[i] / p_on[i]) / (e_off[i] / e_on[i])))
        levels.append(row)
    out.update(levels=levels, expectation={"basis": "serving_simulator", "predicted_crossover": predicted["crossover"]})
    judged = [r for r in levels if "ln_shortfall" in r]
    if not judged:
        return {**out, "verdict": "inconclusive", "message": "no level to diagnose: every level has an impossible point"}
    worst, best = max(judged, key=lambda r: r["ln_shortfall"]), min(judged, key=lambda r: r["ln_shortfall"])
    at = lambda r: f"request_rate {r['level']:g}"  # noqa: E731
    if worst["ln_shortfall"] > TOLERANCE:
        causes = _rate_causes(table, sc, worst)
        c = next((c for c in causes), None)
        if c is not None:
            return {**out, "verdict": "configuration", "causes": causes, "message": f"configuration: the on arm's "
                    f"latency ratio is {_pct(worst['ln_shortfall'])} below the expectation at {at(worst)} and the "
                    f"setting that can explain it is {c['setting']} (not re-priced: {c['why']})"}
        return {**out, "verdict": "engine", "causes": causes, "message": f"the engine does worse than its own profile "
                f"allows: likely a regression or a bug; the on arm's latency ratio is {_pct(worst['ln_shortfall'])} "
                f"below the expectation at {at(worst)}"}
    if best["ln_shortfall"] < -TOLERANCE:
        return {**out, "verdict": "model", "message": f"the on arm does better than the model expects: its latency "
                f"ratio is {_pct(best['ln_shortfall'], True)} above the expectation at {at(best)}: calibrate the sweep"}
    slowed = any(r["e2el_on_measured"] > r["e2el_off_measured"] for r in judged)
    within = max(abs(r["ln_shortfall"]) for r in judged)
    x, y = out["measured_crossover"], predicted["crossover"]
    head = "above your crossover (physics)" if slowed else "speculation pays at every measured rate (physics)"
    return {**out, "verdict": "physics", "message": f"{head}: measured crossover {_shown(x)}, predicted {_shown(y)}, "
            f"the latency ratio within {_pct(within, True)} of what this engine can do"}


def _rate_causes(table, sc: Scenario, worst: dict[str, Any]) -> list[dict[str, Any]]:
    """The structural causes of a rate sweep's shortfall for the engine that ran (the simulator is not re-run)."""
    ran = ran_engine(table, sc)["framework"]
    engine, out = sc.deployment.engine, []
    in_flight = worst["level"] * worst["e2el_on_measured"] / 1e3  # Little's law
    cap = engine.spec_max_running
    if ran == "sglang" and cap and in_flight > cap:
        out.append({"cause": "spec_running_cap", "checked": False, "explains": None, "setting": f"SGLang's cap of "
                    f"{cap} running requests with speculation on (--max-running-requests): {in_flight:.0f} in flight",
                    "why": "the queue beyond it is no step cost"})
    if ran == "vllm" and async_lost(engine, sc.speculation.method):
        out.append({"cause": "async_scheduling_off", "checked": False, "explains": None,
                    "setting": ASYNC_OFF_SAID.format(sc.speculation.method),
                    "why": ASYNC_OFF_WHY})
    return out
