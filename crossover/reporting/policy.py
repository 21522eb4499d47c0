"""`crossover policy`'s text and JSON: the best-k schedule, its gains, the engine configs, and the
draft trees and adaptive verification by load."""

from __future__ import annotations

from typing import Any

from . import gpus_said
from .text import acceptance_said


def policy_dict(pol, configs: dict[str, Any]) -> dict[str, Any]:
    """The JSON contract of `crossover policy --json` (inputs added by the caller)."""
    return {
        "schedule": pol.schedule,
        "speculate_below_batch": pol.speculate_below_batch,
        "off_ranges": [list(r) for r in pol.off_ranges],
        "engine_configs": {k: configs[k] for k in ("vllm", "sglang", "tensorrt_llm")},
        "rule": configs["rule"],
        "gains": {k: round(v, 4) for k, v in pol.gains().items()},
        "throughput": {
            "batch": [int(b) for b in pol.batches],
            "schedule": [round(float(x), 2) for x in pol.best_tput],
            "always_on": [round(float(x), 2) for x in pol.tput[pol.ks.index(pol.configured_k)]],
            "always_off": [round(float(x), 2) for x in pol.tput[0]],
        },
    }


def policy_table(pol, configs: dict[str, Any], inputs: dict[str, Any]) -> str:
    """The schedule, its gains, and the engine configs."""
    lines = [f"{inputs['model']} on {gpus_said(inputs)}, {inputs['method']}, "
             f"{acceptance_said(inputs)}, context {inputs['context']:g}; k = 0..{inputs['k_max']}, batch 1.."
             f"{inputs['batch_max']}", "", f"{'batch range':>15}  {'best k':>6}  {'tok/s at range start':>20}"]
    for r in pol.schedule:
        i = r["batch_min"] - 1
        lines.append(f"{r['batch_min']:>7}-{r['batch_max']:<7}  {r['k']:>6}  {pol.best_tput[i]:>20.0f}")
    g = pol.gains()
    lines += ["", f"rule: {configs['rule']}",
              f"gain over always-on (k={pol.configured_k}): mean {g['mean_gain_over_always_on']:.3f}x, "
              f"max {g['max_gain_over_always_on']:.3f}x; over always-off: mean {g['mean_gain_over_always_off']:.3f}x, "
              f"max {g['max_gain_over_always_off']:.3f}x", ""]
    trt = configs["tensorrt_llm"]
    trt_body = []
    if trt["speculative_config"]:
        import yaml

        trt_body = yaml.safe_dump({"speculative_config": trt["speculative_config"]}, sort_keys=False).rstrip().splitlines()
    for c, body in ((configs["vllm"], [configs["vllm"]["flag"]]), (trt, trt_body),
                    (configs["sglang"], [configs["sglang"]["flags"] or "(none)"])):
        loud = [p["message"] for p in c["placeholders"]]  # first: the config fails to load until they are set
        lines += [c["title"] + ":", *("  " + ln for ln in body), *("  !! " + m for m in loud),
                  *("  note: " + n for n in c["notes"] if n not in loud)]
    return "\n".join(lines)


def policy_extras_dict(adaptive: dict[str, Any] | None, trees: dict[str, Any] | None):
    """policy's adaptive-verification and draft-tree sections as --json writes them (rounded here:
    the API keeps every number as computed)."""
    if adaptive is not None:
        r2 = lambda xs: [round(float(x), 2) for x in xs]
        adaptive = {**adaptive, "tokens_per_s": r2(adaptive["tokens_per_s"]),
                    "verified_drafts_per_seq": [round(float(x), 3) for x in adaptive["verified_drafts_per_seq"]],
                    "best_fixed_tokens_per_s": r2(adaptive["best_fixed_tokens_per_s"]),
                    "off_tokens_per_s": r2(adaptive["off_tokens_per_s"])}
    if trees is not None:
        trees = {**trees, "schedule": [{**r, "tau": round(r["tau"], 4), "tokens_per_s": round(float(r["tokens_per_s"]), 2),
                                        "best_chain_tokens_per_s": round(float(r["best_chain_tokens_per_s"]), 2)}
                                       for r in trees["schedule"]]}
    return adaptive, trees


def policy_text(pol, configs: dict[str, Any], inputs: dict[str, Any], adaptive: dict[str, Any] | None = None,
                trees: dict[str, Any] | None = None) -> str:
    """`crossover policy`'s text: the schedule and configs, then the draft trees and adaptive
    verification by load (their rounded --json values)."""
    lines = [policy_table(pol, configs, inputs)]
    if trees:
        t = trees
        lines += ["", f"draft trees by load (the likeliest tree of each size up to {t['max_nodes']} nodes, depth "
                      f"<= {t['max_depth']}; at each range's first batch):",
                  f"{'batches':>11} {'nodes':>6} {'depth':>6} {'topk':>5} {'tau':>6} {'tok/s':>9} "
                  f"{'best chain k':>13} {'tok/s':>9} {'gain':>6}"]
        for r in t["schedule"]:
            rng = f"{r['batch_min']}-{r['batch_max']}"
            gain = r["tokens_per_s"] / r["best_chain_tokens_per_s"]
            lines.append(f"{rng:>11} {r['nodes']:>6} {r['depth']:>6} {r['topk']:>5} {r['tau']:>6.2f} "
                         f"{r['tokens_per_s']:>9.0f} {r['best_chain_k']:>13} {r['best_chain_tokens_per_s']:>9.0f} "
                         f"{gain:>6.3f}")
        lines.append("  SGLang: --speculative-num-steps DEPTH --speculative-eagle-topk TOPK "
                     "--speculative-num-draft-tokens NODES+1; vLLM: speculative_config.speculative_token_tree = "
                     "the node paths (--json)")
    if adaptive:
        a = adaptive
        lines += ["", "adaptive verification (confidence-scheduled, load budget) vs the best fixed k:",
                  f"{'batch':>7} {'adaptive tok/s':>15} {'drafts/seq':>11} {'best fixed k':>13} {'tok/s':>10} "
                  f"{'gain':>7} {'vs off':>7}"]
        for i, bt in enumerate(a["batch"]):
            ad, f, o = a["tokens_per_s"][i], a["best_fixed_tokens_per_s"][i], a["off_tokens_per_s"][i]
            lines.append(f"{bt:>7} {ad:>15.0f} {a['verified_drafts_per_seq'][i]:>11.2f} "
                         f"{a['best_fixed_k'][i]:>13} {f:>10.0f} {ad / f:>7.3f} {ad / o:>7.3f}")
    return "\n".join(lines)
