"""Tables for people and dicts for programs. Values stay typed until this edge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import gpus_said

if TYPE_CHECKING:  # annotations only: the model stack loads with the first prediction
    from ..analysis.curves import Prediction


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
            "batch": int(b) if float(b).is_integer() else float(b), "step_ms_off": _num(c.step_off[i] * 1e3),
            "step_ms_on": _num(c.step_on[i] * 1e3), "draft_ms": _num(c.draft[i] * 1e3),
            "verify_ms": _num(c.verify[i] * 1e3), "tokens_per_s_off": _num(c.tokens_per_s_off[i], 2),
            "tokens_per_s_on": _num(on_tps[i], 2), "speedup": _num(pred.speedup[i]),
            "fits_off": bool(pred.fits_off[i]), "fits_on": bool(pred.fits_on[i])})
    cb = pred.crossover_batch
    spec = pred.scenario.speculation
    at = pred.crossover_at_graph_limit
    return {
        "crossover_batch": None if cb is None else _num(cb, 3),
        "crossover_within_memory": None if cb is None else bool(cb <= pred.max_batch_on),
        "crossover_at_graph_limit": at if at is None else {**at, "batch": _num(at["batch"], 3),
                                                           "width": _num(at["width"], 6)},
        "crossover_at_graph_size": pred.crossover_at_graph_size,
        "crossings": [{"batch": _num(x.batch, 3), "direction": x.direction} for x in pred.crossings],
        "regime": pred.regime,
        "max_batch_off": pred.max_batch_off,
        "max_batch_on": pred.max_batch_on,
        "tau": _num(tau, 6),
        "verify_width": _num(spec.verify_width, 6),
        "wasted_positions_per_step": _num(spec.verify_width - tau, 6),
        "points": points,
    }


def engine_line(inputs: dict[str, Any]) -> str:
    """Which engine profile and cost mode priced the steps (one line)."""
    if "engine_version" not in inputs:
        return ""
    layout = {"batch_expansion": "verify by batch expansion: each of the k+1 positions re-reads the KV cache",
              "multi_query": "one multi-query verify pass"}[inputs["verify_layout"]]
    cost = inputs["cost"] if inputs["cost"] != "kernels" else f"kernels ({inputs['cost_source']})"
    config = ""
    if "cuda_graphs" in inputs:  # the configuration in effect, and whether the user set it or assumed the default
        given = set(inputs.get("engine_settings_given", ()))
        values = {"cuda_graphs": f"CUDA graphs {inputs['cuda_graphs']}"}
        cap = inputs.get("cuda_graph_max")
        if cap and (cap["off"] or cap["on"]):  # the largest graph each server captures
            both = cap["off"] if cap["off"] == cap["on"] or not cap["on"] else f"{cap['off']} (speculating {cap['on']})"
            values["cuda_graph_max"] = f"up to {both} {cap['unit']}"
        values["chunked_prefill"] = f"chunked prefill {'on' if inputs['chunked_prefill'] else 'off'}"
        if (inputs.get("async_scheduling") or {}).get("setting"):  # vLLM V1's, SGLang's, TensorRT-LLM's
            values["async_scheduling"] = f"{inputs['async_scheduling']['name']} {inputs['async_scheduling']['setting']}"
        if "sampling" in inputs:
            values["sampling"] = f"sampling {inputs['sampling']}"
        if inputs.get("mla_verify_prefill"):  # the engine's MLA backend here takes one query token per request
            values["mla_verify_prefill"] = "MLA verify through the attention backend's prefill path" + (
                " (Triton MLA: no full graphs, both servers piecewise)" if inputs.get("mla_triton") else "")
        elif "mla_verify_prefill" in given:
            values["mla_verify_prefill"] = ("MLA verify as a decode" if inputs.get("mla_model", True) else
                                            f"--mla-verify unused ({inputs['model']} has no MLA attention)")
        spec = inputs.get("cuda_graphs_speculating", inputs["cuda_graphs"])
        if spec != inputs["cuda_graphs"] or "cuda_graphs_speculating" in given or inputs.get("mla_graph_fallback"):
            values["cuda_graphs_speculating"] = f"the speculating server's {spec}"
        why = {n: "given" if n in given else "default" for n in values}
        if inputs.get("mla_graph_fallback"):  # vLLM's own downgrade, whatever was set
            why["cuda_graphs_speculating"] = "vLLM's fallback from full graphs: the MLA backend captures one-token decodes only"
        config = "; " + ", ".join(f"{v} ({why[n]})" for n, v in values.items())
    overlap = inputs.get("async_scheduling") or {}
    if overlap.get("off") and not overlap.get("on"):  # CPU/GPU overlap the speculating server loses
        eff = inputs.get("efficiency") or {}
        size = host_size(eff.get("host_per_step_s"), eff.get("host_per_seq_s"), "us per running sequence, a lower bound")
        config += (f"; {overlap.get('name', 'async scheduling')} off with the {inputs['method']} proposer: the host work it hides without "
                   f"speculation{f' ({size})' if size else ''} is on the critical path of every speculative step")
    unsupported = f"\nnote: {inputs['method_unsupported']} (priced as asked, with this profile's costs)" if inputs.get("method_unsupported") else ""
    return f"engine: {inputs['engine_version']} ({layout}{config}); cost: {cost}{unsupported}"


def host_size(per_step_s: float | None, per_seq_s: float | None, per_seq: str = "us per sequence") -> str:
    """The engine's host work as its parts: '0.7 ms per step', '12.7 us per sequence', or both joined by +."""
    return " + ".join(([f"{per_step_s * 1e3:g} ms per step"] if per_step_s else [])
                      + ([f"{per_seq_s * 1e6:g} {per_seq}"] if per_seq_s else []))


def breakdown_table(bd: dict[str, Any]) -> str:
    """Per op of the target forward and per step term, off and on at one batch, with the bound and
    the cost mode that priced each op."""
    lines = [f"breakdown at batch {bd['batch']:g}, context {bd['context']:g} (ms per step)"]
    if "data_parallel" in bd:
        dp = bd["data_parallel"]
        lines.append(f"  data parallel: the busiest of {dp['ranks']} ranks, {dp['busiest_rank_sequences']:g} of the "
                     f"{bd['batch']:g} sequences" + ("; the routed experts over every rank's tokens, and allreduce "
                                                      "with the MoE layers' gather and reduce-scatter" if dp["moe"] else ""))
    if "prompts" in bd:  # the mean step of the prediction's row
        pr = bd["prompts"]
        lines.append(f"  prefill share: each arm's mean step over the steps carrying " + ", ".join(" or ".join(
            f"{s['prompts']:g} ({s['share']:.0%})" for s in pr[arm]) + f" {arm}" for arm in ("off", "on"))
            + f" of the {pr['prompt_len']:g}-token prompts; graph and host: the commoner step")
    if "graphs" in bd:
        lines.append("  CUDA graph: " + "; ".join(f"{arm} {_graph_said(g)}" for arm, g in bd["graphs"].items()))
    if bd.get("host"):
        h = bd["host"]
        said = {True: "hidden under the GPU up to its time (CPU/GPU overlap)", False: "on the critical path"}
        size = host_size(h.get("per_step_us", 0.0) / 1e6, h["per_seq_us"] / 1e6)
        lines.append(f"  host work {size}: " + "; ".join(
            f"{arm} {h[arm]['ms']:.3f} ms {said[h[arm]['overlapped']]}" for arm in ("off", "on")) + " (host_work)")
    lines.append(f"  {'op':<24} {'off':>9} {'on':>9}  {'bound (on)':<10}  priced by")
    for r in bd["ops"]:
        off = "-" if r["off_ms"] is None else f"{r['off_ms']:.3f}"
        lines.append(f"  {r['op']:<24} {off:>9} {r['on_ms']:>9.3f}  {r['bound_on']:<10}  {r['priced_by']}")
    for name, t in bd["terms"].items():
        if name != "target_forward" and (t["off_ms"] or t["on_ms"]):
            lines.append(f"  {'+ ' + name:<24} {t['off_ms']:>9.3f} {t['on_ms']:>9.3f}")
    lines.append(f"  {'= step':<24} {bd['total_off_ms']:>9.3f} {bd['total_on_ms']:>9.3f}")
    return "\n".join(lines)


def _graph_said(g: dict[str, Any]) -> str:
    """One arm's CUDA graph in words: the captured size it replays (padded from its own), or eager."""
    one = g["unit"].rstrip("s")  # a 64-request graph
    if g["replayed"] is None:
        why = "graphs off" if g["limit"] == 0 else f"beyond the {g['limit']:g}-{one} capture limit"
        return f"eager ({g['key']:g} {g['unit']}, {why})"
    miss = (f"; {g['miss']:.0%} of such verify steps miss a full graph and run attention outside it "
            f"(ragged_attention)" if g.get("miss") else "")
    if not g.get("sizes_listed", True):
        return f"captured ({g['key']:g} {g['unit']}; padding to the captured sizes not priced{miss})"
    pad = f", padded from {g['key']:g}" if g["replayed"] > g["key"] else ""
    return f"replays the {g['replayed']:g}-{one} graph{pad}{miss}"


def acceptance_said(inputs: dict[str, Any]) -> str:
    """The acceptance as given, with its name: `acceptance 0.7`, `tau 2.5`, `acceptance per position 0.8,0.6`."""
    acc = inputs["acceptance"]
    acc_s = ",".join(f"{a:g}" for a in acc) if isinstance(acc, list) else f"{acc:g}"
    acc_label = {"rate": "acceptance", "tau": "tau", "per_position": "acceptance per position"}[inputs["acceptance_kind"]]
    return f"{acc_label} {acc_s}"


def prediction_table(pred: Prediction, inputs: dict[str, Any]) -> str:
    """A readable table of the curves and a summary line with the crossover."""
    d = prediction_dict(pred)
    draft = f" ({inputs['draft']})" if inputs["draft"] else ""
    if inputs["method"] == "ngram":  # a share of steps proposes nothing
        draft = f" (match rate {inputs['match_rate']:g}: the crossover moves with it, --match-rate)"
    tp_note = " (auto)" if inputs["tp_auto"] else ""
    mix = ""
    if inputs.get("prompt_len") is not None:
        mix = f" (prompt {inputs['prompt_len']:g} + output {inputs['output_len']:g} tokens: prefill share included)"
    lines = [
        f"{inputs['model']} on {gpus_said(inputs)}{tp_note}, {inputs['weight_dtype']} weights, "
        f"{inputs['kv_dtype']} KV cache, "
        f"context {inputs['context']:g}{mix}",
        f"speculation: {inputs['method']}{draft}, k={inputs['k']}, {acceptance_said(inputs)} -> tau {d['tau']:.3f} "
        f"tokens/step, {d['wasted_positions_per_step']:.2f} wasted verify positions/step",
        engine_line(inputs),
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
    cap = pred.scenario.deployment.engine.spec_max_running
    if cap is not None and bmax > cap:
        lines.append(f"engine cap: {inputs['engine_version']} runs at most {cap} requests with speculation unless the "
                     f"running-request limit is set (SGLang: --max-running-requests); batches above {cap} assume it is")
    what = {"down": "stops paying off", "up": "starts paying off"}
    if not d["crossings"]:
        side = "faster" if d["regime"] == "always_faster" else "slower"
        lines.append(f"crossover: none in batch 1..{bmax:g}; speculation is {side} throughout ({d['regime']})")
    elif d["crossover_batch"] is None:  # only rises through 1: slower at batch 1, faster above
        lines.append(f"crossover: none in batch 1..{bmax:g} where speculation stops paying off; it is slower "
                     f"below batch {d['crossings'][0]['batch']:.1f} and starts paying off there")
    else:
        mem = "" if d["crossover_within_memory"] else " (beyond the memory limit with speculation)"
        lines.append(f"crossover: batch {d['crossover_batch']:.1f} - speculation stops paying off there{mem}")
        g = d["crossover_at_graph_limit"]
        if g is not None:
            step = (f"verify step ({g['width']:g} tokens a request)" if g["server"] == "speculating" else
                    "decode step (one token a request)")
            lines.append(f"           at the {g['server']} server's "
                         f"CUDA-graph limit: above it its {step} outgrows the largest graph ({g['limit']} "
                         f"{g['unit']}) and runs attention outside it; a larger capture limit moves it "
                         f"(--cuda-graph-max: vLLM's --max-cudagraph-capture-size, SGLang's --cuda-graph-max-bs)")
        if (p := d["crossover_at_graph_size"]) is not None:  # a tooth of the padding's sawtooth
            one = p["unit"].rstrip("s")
            lines.append(f"           at a captured graph size: the {p['server']} server's step replays the {p['size']:g}-{one} "
                         f"graph up to it and pads to the {p['next']:g}-{one} one above, which carries the speedup through 1")
    said = d["crossings"][0]["batch"] if d["crossover_batch"] is None and d["crossings"] else d["crossover_batch"]
    for extra in d["crossings"]:
        if extra["batch"] != said:
            lines.append(f"           also at batch {extra['batch']:.1f}: speculation {what[extra['direction']]} there")
    return "\n".join(lines)


def spec_listing(specs: list, kind: str) -> str:
    """One line per spec."""
    from ..model.ops import total_params  # the model stack: loaded by the listing verbs only

    lines = []
    for s in specs:
        if kind == "hardware":
            lines.append(f"{s.name:<14} {s.memory_gb:>6g} GB {s.memory_bandwidth_gb_s:>7g} GB/s "
                         f"{s.bf16_dense_tflops:>7g} bf16 TFLOP/s  {s.display_name}")
        else:
            kind_s = ("MoE" if s.moe else "dense") + ("+MLA" if s.mla else "")
            lines.append(f"{s.name:<16} {total_params(s) / 1e9:>8.2f} B params {kind_s:<9} {s.display_name}")
    return "\n".join(lines)


def spec_text(spec) -> str:
    """A spec as readable key: value lines (sources included)."""
    import yaml

    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False).rstrip()
