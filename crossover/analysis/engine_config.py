"""Engine configuration text: the vLLM, TensorRT-LLM and SGLang settings that apply a k schedule.

Field names and values follow each engine's documented speculative-decoding options (cited in the
notes each config carries); this module only writes text, it computes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from .policy import Policy

_VLLM_METHOD = {"draft": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "ngram": "ngram",
                "mtp": "mtp"}
# TensorRT-LLM's PyTorch backend decoding_type values (docs/source/features/speculative-decoding.md,
# tensorrt_llm/llmapi/llm_args.py): MTP, Eagle3, NGram, DraftTarget, ... Its Eagle3 type loads
# EAGLE-3 heads only ("EAGLE v1/v2 checkpoints are incompatible"), and Medusa belongs to the retired
# TRT backend: for those methods no config is written, and the notes say why.
_TRT_TYPE = {"draft": "DraftTarget", "eagle3": "Eagle3", "ngram": "NGram", "mtp": "MTP"}
_TRT_MISSING = {
    "eagle": "TensorRT-LLM's PyTorch backend has no EAGLE-1 decoding type: its Eagle3 type loads EAGLE-3 heads only "
             "(EAGLE v1/v2 checkpoints are incompatible); train or pick an EAGLE-3 head (--method eagle3), or use "
             "another engine",
    "medusa": "TensorRT-LLM's PyTorch backend has no medusa decoding type (Medusa belongs to the legacy TRT "
              "backend, retired in 2026)",
}
_SGL_ALGO = {"draft": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM", "mtp": "NEXTN"}


def engine_configs(pol: Policy, draft_model: str | None = None) -> dict[str, Any]:
    """vLLM, TensorRT-LLM and SGLang settings that apply the schedule, with where versions differ."""
    spec = pol.scenario.speculation
    sched = pol.schedule
    k_top = max((r["k"] for r in sched), default=0)
    below = pol.speculate_below_batch
    vllm: dict[str, Any] = {"method": _VLLM_METHOD[spec.method], "num_speculative_tokens": max(k_top, 1),
                            "num_speculative_tokens_per_batch_size": [[r["batch_min"], r["batch_max"], r["k"]]
                                                                      for r in sched]}
    if draft_model:
        vllm["model"] = draft_model
    if spec.method == "draft" and spec.draft_tp:
        vllm["draft_tensor_parallel_size"] = spec.draft_tp
    out: dict[str, Any] = {
        "vllm": {
            "speculative_config": vllm,
            "flag": "--speculative-config '" + _json(vllm) + "'",
            "notes": [
                "num_speculative_tokens_per_batch_size is vLLM's Dynamic SD (vllm-project/vllm#32374): ranges are "
                "inclusive, the first starts at 1, k = 0 turns speculation off; not compatible with DP > 1 "
                "(vLLM silently falls back to static k).",
                "disable_by_batch_size is ignored since vLLM v0.10.0 (V0 removed) and was removed by #35060: "
                "use the schedule above instead.",
            ],
        },
    }
    if spec.method in _TRT_TYPE:
        # Newer TensorRT-LLM reads the keys as inclusive upper bounds of batch (bs above the largest
        # key: speculation off) and requires the smallest key to map to max_draft_len.
        trt_sched = {r["batch_max"]: r["k"] for r in sched if r["k"] > 0}
        trt: dict[str, Any] = {"decoding_type": _TRT_TYPE[spec.method], "max_draft_len": max(k_top, 1)}
        if trt_sched:
            trt["draft_len_schedule"] = trt_sched
        if draft_model:
            trt["speculative_model"] = draft_model
        notes = ["draft_len_schedule keys are upper bounds of batch in newer TensorRT-LLM (PR #10860): "
                 "{4: 4, 8: 2, 32: 1} means bs 1-4 -> 4, 5-8 -> 2, 9-32 -> 1, 33+ -> 0; an older Drafter read "
                 "keys as lower bounds: check the installed version."]
        if trt_sched and sched[0]["k"] != max(k_top, 1):
            notes.append("the smallest key must map to max_draft_len: the schedule's first k is below its "
                         "maximum, so set max_draft_len to the first k or accept TensorRT-LLM's validation error")
        out["tensorrt_llm"] = {"speculative_config": trt, "notes": notes}
    else:
        out["tensorrt_llm"] = {"speculative_config": None,
                               "notes": [_TRT_MISSING.get(spec.method,
                                                          f"TensorRT-LLM's PyTorch backend has no {spec.method} "
                                                          "decoding type")]}
    k_first = max(sched[0]["k"], 1) if sched else 1
    if spec.method in _SGL_ALGO:
        flags = [f"--speculative-algorithm {_SGL_ALGO[spec.method]}"]
        if draft_model and spec.method in ("draft", "eagle", "eagle3"):
            flags.append(f"--speculative-draft-model-path {draft_model}")
        if spec.method != "ngram":
            flags += [f"--speculative-num-steps {k_first}", "--speculative-eagle-topk 1",
                      f"--speculative-num-draft-tokens {k_first + 1}"]
        else:  # unset, SGLang verifies its max match window (12) per request, as a BFS tree of breadth <= 10
            flags += [f"--speculative-num-draft-tokens {k_first + 1}", "--speculative-ngram-max-bfs-breadth 1"]
        tiers = sorted({r["k"] for r in sched if r["k"] > 0})
        ngram_note = ([f"NGRAM needs SGLang >= 0.5.5. Every request verifies exactly --speculative-num-draft-tokens "
                       f"positions, matched or not; unset it is the max match window, 12, drafted as a tree of BFS "
                       f"breadth up to 10 (server_args.py): the flags above keep the chain of k = {k_first} drafts that "
                       f"was priced."] if spec.method == "ngram" else [])
        out["sglang"] = {
            "flags": " ".join(flags),
            "notes": ngram_note + [
                "SGLang has no per-batch-size k schedule upstream; --speculative-adaptive (EAGLE, topk 1; "
                f"sgl-project/sglang#21599, #24055) switches among candidate_steps tiers: use {tiers or [1]} as "
                "candidate_steps in --speculative-adaptive-config." if spec.method != "ngram" else
                "SGLang has no per-batch-size k schedule upstream and its adaptive speculation is EAGLE's: "
                f"NGRAM keeps one width; set it for the load served most (k per batch: {tiers or [1]}).",
                "Route by load instead where speculation stops paying: "
                + (f"send traffic above batch {below - 1} to a server without speculation." if below else
                   "it pays over the whole batch range checked."),
                "--cuda-graph-max-bs matters: speculative batches above it run without CUDA graphs.",
            ],
        }
    else:
        out["sglang"] = {"flags": None, "notes": [f"SGLang has no {spec.method} algorithm flag"]}
    if below is None:
        rule = f"speculate (k = {k_first}) at every batch up to {int(pol.batches[-1])}"
    elif below == 1:
        rule = "do not speculate: it never pays in this range"
    else:
        rule = f"speculate below batch {below} (k = {k_first} at batch 1), off from batch {below}"
    out["rule"] = rule
    return out


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
