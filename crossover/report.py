"""Tables for people and dicts for programs. Values stay typed until this edge."""

from __future__ import annotations

from typing import Any

from .curves import Prediction


def _num(x: float, digits: int = 4) -> float:
    return float(round(float(x), digits))


def prediction_dict(pred: Prediction) -> dict[str, Any]:
    """The JSON contract of `crossover predict --json` (inputs added by the caller)."""
    c = pred.curves
    tau = pred.tau
    on_tps = c.tokens_per_s_on
    points = []
    for i, b in enumerate(c.batch):
        points.append({
            "batch": int(b) if float(b).is_integer() else float(b),
            "step_ms_off": _num(c.step_off[i] * 1e3),
            "step_ms_on": _num(c.step_on[i] * 1e3),
            "draft_ms": _num(c.draft[i] * 1e3),
            "verify_ms": _num(c.verify[i] * 1e3),
            "tokens_per_s_off": _num(c.tokens_per_s_off[i], 2),
            "tokens_per_s_on": _num(on_tps[i], 2),
            "speedup": _num(pred.speedup[i]),
            "fits_off": bool(pred.fits_off[i]),
            "fits_on": bool(pred.fits_on[i]),
        })
    cb = pred.crossover_batch
    spec = pred.scenario.speculation
    return {
        "crossover_batch": None if cb is None else _num(cb, 3),
        "crossover_within_memory": None if cb is None else bool(cb <= pred.max_batch_on),
        "crossings": [{"batch": _num(x.batch, 3), "direction": x.direction} for x in pred.crossings],
        "regime": pred.regime,
        "max_batch_off": pred.max_batch_off,
        "max_batch_on": pred.max_batch_on,
        "tau": _num(tau, 6),
        "verify_width": _num(spec.verify_width, 6),
        "wasted_positions_per_step": _num(spec.verify_width - tau, 6),
        "points": points,
    }


def prediction_table(pred: Prediction, inputs: dict[str, Any]) -> str:
    """A readable table of the curves and a summary line with the crossover."""
    d = prediction_dict(pred)
    acc = inputs["acceptance"]
    acc_s = ",".join(f"{a:g}" for a in acc) if isinstance(acc, list) else f"{acc:g}"
    acc_label = {"rate": "acceptance", "tau": "tau", "per_position": "acceptance per position"}[inputs["acceptance_kind"]]
    draft = f" ({inputs['draft']})" if inputs["draft"] else ""
    tp_note = " (auto)" if inputs["tp_auto"] else ""
    lines = [
        f"{inputs['model']} on {inputs['tp']} x {inputs['hardware']}{tp_note}, {inputs['weight_dtype']} weights, "
        f"context {inputs['context']:g}",
        f"speculation: {inputs['method']}{draft}, k={inputs['k']}, {acc_label} {acc_s} -> tau {d['tau']:.3f} "
        f"tokens/step, {d['wasted_positions_per_step']:.2f} wasted verify positions/step",
        "",
        f"{'batch':>7} {'step ms off':>12} {'step ms on':>11} {'draft ms':>9} {'tok/s off':>11} "
        f"{'tok/s on':>11} {'speedup':>8}  fits",
    ]
    for p in d["points"]:
        fits = "yes" if p["fits_on"] else ("off only" if p["fits_off"] else "no")
        lines.append(
            f"{p['batch']:>7g} {p['step_ms_off']:>12.2f} {p['step_ms_on']:>11.2f} {p['draft_ms']:>9.2f} "
            f"{p['tokens_per_s_off']:>11.0f} {p['tokens_per_s_on']:>11.0f} {p['speedup']:>8.3f}  {fits}")
    lines.append("")
    lines.append(f"memory limit: batch {d['max_batch_off']} without speculation, {d['max_batch_on']} with it")
    bmax = max(p["batch"] for p in d["points"])
    if d["crossover_batch"] is None:
        side = "faster" if d["regime"] == "always_faster" else "slower"
        lines.append(f"crossover: none in batch 1..{bmax:g}; speculation is {side} throughout ({d['regime']})")
    else:
        first = d["crossings"][0]
        what = "stops paying off" if first["direction"] == "down" else "starts paying off"
        mem = "" if d["crossover_within_memory"] else " (beyond the memory limit with speculation)"
        lines.append(f"crossover: batch {d['crossover_batch']:.1f} - speculation {what} there{mem}")
        for extra in d["crossings"][1:]:
            lines.append(f"           and again at batch {extra['batch']:.1f} ({extra['direction']})")
    return "\n".join(lines)


def spec_listing(specs: list, kind: str) -> str:
    """One line per spec."""
    lines = []
    for s in specs:
        if kind == "hardware":
            lines.append(f"{s.name:<14} {s.memory_gb:>6g} GB {s.memory_bandwidth_gb_s:>7g} GB/s "
                         f"{s.bf16_dense_tflops:>7g} bf16 TFLOP/s  {s.display_name}")
        else:
            kind_s = "MoE" if s.moe else "dense"
            if s.mla:
                kind_s += "+MLA"
            lines.append(f"{s.name:<16} {s.total_params() / 1e9:>8.2f} B params {kind_s:<9} {s.display_name}")
    return "\n".join(lines)


def spec_text(spec) -> str:
    """A spec as readable key: value lines (sources included)."""
    import yaml

    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False).rstrip()
