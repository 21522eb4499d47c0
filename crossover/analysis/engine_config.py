"""Engine configuration text: the vLLM, TensorRT-LLM and SGLang settings that apply a k schedule.

Every config is complete as printed: where the tool cannot know a value (the HF id of an EAGLE head,
Medusa heads or a draft model, unless --draft-model-id gives it) the config carries a placeholder
that fails loudly when the engine loads it, each config's `placeholders` lists them, and its first
notes say so. The names, types and versions follow the engines' released source, as read into
tests/data/engine_args.yaml (vLLM's arg_utils.py and SpeculativeConfig, SGLang's server_args);
tests/test_engine_configs_runnable.py checks every config against them. TensorRT-LLM's keys follow its
documentation and blogs (the LLM API's speculative_config, decoding_type, max_draft_len; its PyPI
package is a stub that cannot be read here). This module computes nothing.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from .policy import Policy

_VLLM_METHOD = {"draft": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "ngram": "ngram",
                "mtp": "mtp"}
# Versions each config runs on, read from the released source (tests/data/engine_args.yaml):
# num_speculative_tokens_per_batch_size is first in 0.24.0's SpeculativeConfig (absent from 0.23.0);
# EngineArgs refuses method draft_model up to 0.14.1 (NotImplementedError), accepts it from 0.15.0;
# SpeculativeMethod lists medusa up to 0.32.0, not in 0.33.0. min/max None = no bound known.
VLLM_DYNAMIC_SINCE = "0.24.0"
VLLM_STATIC_SINCE = "0.11.0"  # the oldest V1 release the vllm engine profile covers (engines/vllm.yaml)
_VLLM_METHOD_SINCE = {"draft": "0.15.0"}
_VLLM_METHOD_UNTIL = {"medusa": "0.32.0"}
# The checkpoint each method loads ("model" in vLLM; none for mtp, which reads the target's own MTP
# layers, and ngram, which has no model).
_CHECKPOINT = {"eagle": "EAGLE head", "eagle3": "EAGLE-3 head", "medusa": "Medusa heads", "draft": "draft model"}

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
_TRT_TITLE = "TensorRT-LLM (YAML for --config)"
_SGL_ALGO = {"draft": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM", "mtp": "NEXTN"}
# First SGLang release whose --speculative-algorithm accepts the name (0.5.1 has EAGLE, EAGLE3, NEXTN).
_SGL_SINCE = {"STANDALONE": "0.5.2", "NGRAM": "0.5.3"}


def unserved(engine, method: str) -> str | None:
    """Why the releases an engine profile covers run no such speculative method, or None where they do:
    TensorRT-LLM's PyTorch backend's decoding types, SGLang's --speculative-algorithm choices and the
    release each arrived in, vLLM V1's draft_model (above). predict prices what was asked and says so
    (inputs.method_unsupported); the configs write none."""
    if engine.framework == "trtllm" and method not in _TRT_TYPE:
        return _trt_missing(method)
    if engine.framework == "sglang":
        if method not in _SGL_ALGO:
            return _sgl_missing(method)
        since = _SGL_SINCE.get(_SGL_ALGO[method])
        top, need = _release(engine.version.split("-")[-1]), _release(since or "0")
        if len(top) < 3 and engine.version.endswith("x"):  # '0.5.x': every 0.5 release
            need = need[:len(top)]
        if since and top < need:
            return f"{_SGL_ALGO[method]} needs SGLang >= {since}; this profile is {engine.version}"
    if engine.name == "vllm" and method == "draft":  # the profile's releases, not the ones after
        return (f"vLLM {VLLM_STATIC_SINCE.rsplit('.', 1)[0]}-0.14 refuse method draft_model (NotImplementedError in "
                f"EngineArgs); {_VLLM_METHOD_SINCE['draft']} on runs it")
    return None


def _trt_missing(method: str) -> str:
    return _TRT_MISSING.get(method, f"TensorRT-LLM's PyTorch backend has no {method} decoding type")


def _sgl_missing(method: str) -> str:
    return f"SGLang has no {method} algorithm flag (--speculative-algorithm takes {', '.join(sorted(set(_SGL_ALGO.values())))})"


def _release(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version ('0.4.4.post3' -> (0, 4, 4); '0.5.x' -> (0, 5))."""
    out = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _checkpoint(pol: Policy, draft_model: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """The id to write for the method's checkpoint, and its placeholder record when none is known.
    A draft named by its crossover name (`--draft llama-3.2-1b`) is written as its HF repository."""
    spec = pol.scenario.speculation
    what = _CHECKPOINT.get(spec.method)
    if what is None:
        return None, None
    draft = spec.draft if spec.method == "draft" else None
    if draft is not None and draft_model in (None, draft.name):
        draft_model = draft.hf_repo or None
    if draft_model:
        return draft_model, None
    target = pol.scenario.deployment.model
    of = f"the draft {draft.name}" if draft is not None else f"{what} for {target.hf_repo or target.name}"
    value = f"<HF id of {of}: set --draft-model-id>" if draft is not None else f"<{of}: set --draft-model-id>"
    return value, {"key": None, "value": value, "set_with": "--draft-model-id",
                   "message": f"PLACEHOLDER {value!r}: the tool does not know which {what} to load; pass "
                              f"--draft-model-id with its Hugging Face id or local path (as printed, the engine "
                              f"fails to load it)"}


def _placed(ph: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
    return [] if ph is None else [{**ph, "key": key}]


def engine_configs(pol: Policy, draft_model: str | None = None, priced: bool = True) -> dict[str, Any]:
    """vLLM, TensorRT-LLM and SGLang settings that apply the schedule, with where versions differ.
    `priced`: the policy's throughputs are the model's (policy.best_k_policy), so the vLLM notes can
    price the schedule as Dynamic SD runs it; False for a schedule written out without them."""
    spec = pol.scenario.speculation
    sched = pol.schedule
    k_top = max((r["k"] for r in sched), default=0)
    below = pol.speculate_below_batch
    off, top = pol.off_ranges, int(pol.batches[-1])
    route = _route(off, top)
    k_first = max(sched[0]["k"], 1) if sched else 1
    ckpt, ph = _checkpoint(pol, draft_model)
    never = off == [(1, top)]  # speculation never pays in the range checked
    extra = (f"--draft-model-id applies to draft, eagle, eagle3 and medusa: {spec.method} loads no separate "
             f"checkpoint, so {draft_model!r} is not written" if draft_model and spec.method not in _CHECKPOINT else None)
    tp = pol.scenario.deployment.tp
    no_draft_tp = (f"this engine takes no draft TP (none among its flags or keys checked): the draft runs at the "
                   f"target's TP {tp}, not the draft TP {spec.draft_tp} that was priced"
                   if spec.draft_tp and spec.draft_tp != tp else None)

    # ---- vLLM: Dynamic SD (>= 0.24) and the one-k config for older releases
    def vllm_cfg(k: int, schedule: list | None) -> dict[str, Any]:
        c: dict[str, Any] = {"method": _VLLM_METHOD[spec.method], "num_speculative_tokens": k}
        if schedule is not None:
            c["num_speculative_tokens_per_batch_size"] = schedule
        if ckpt:
            c["model"] = ckpt
        if spec.draft_tp:  # the draft (or head) TP that was priced: 1 or the target's (vLLM checks)
            c["draft_tensor_parallel_size"] = spec.draft_tp
        return c

    vllm = vllm_cfg(max(k_top, 1), [[r["batch_min"], r["batch_max"], r["k"]] for r in sched])
    static = None if never else vllm_cfg(k_first, None)
    static_since = max(VLLM_STATIC_SINCE, _VLLM_METHOD_SINCE.get(spec.method, VLLM_STATIC_SINCE), key=_vkey)
    until = _VLLM_METHOD_UNTIL.get(spec.method)
    last = sched[-1] if sched else None
    vnotes = [p["message"] for p in _placed(ph, "model")] + ([extra] if extra else []) + [
        f"needs vLLM >= {_short(VLLM_DYNAMIC_SINCE)}: num_speculative_tokens_per_batch_size is vLLM's Dynamic SD "
        "(vllm-project/vllm#32374), first in 0.24's SpeculativeConfig. Ranges are inclusive, the first starts at 1, "
        "k = 0 turns speculation off"
        + (f", batches above {last['batch_max']} keep the last range's k ({last['k']})" if last else "")
        + "; with DP > 1 vLLM falls back to static k = num_speculative_tokens (the maximum) with a warning.",
    ]
    if until:
        vnotes.append(f"vLLM {_short(until)} is the last release with method {_VLLM_METHOD[spec.method]} (0.33 "
                      "removed it from SpeculativeMethod): use vLLM 0.24-0.32 for this config.")
    if static is None:
        vnotes.append(f"vLLM {_short(static_since)}-0.23 have no per-batch k: serve without --speculative-config "
                      "(speculation never pays in the range checked).")
    else:
        vnotes.append(
            f"vLLM {_short(static_since)}-0.23 have no per-batch k (0.11-0.15 silently drop the unknown key and would "
            f"speculate at k = {max(k_top, 1)} at every batch; 0.16-0.23 refuse it): use "
            f"--speculative-config {shlex.quote(_json(static))} (k = {k_first}, batch 1's best)"
            + (f" and {route}" if below else ", which pays over the whole batch range checked."))
    if spec.method == "draft":
        vnotes.append("vLLM 0.11-0.14 refuse method draft_model (NotImplementedError in EngineArgs): draft models "
                      "need vLLM >= 0.15.")
    dynamic = _dynamic_sd(pol) if priced and not never else None
    if dynamic is not None:
        vnotes.append(dynamic["note"])
    vnotes.append("disable_by_batch_size is ignored since vLLM v0.10.0 (V0 removed) and is gone from "
                  "SpeculativeConfig since 0.17 (#35060): use the schedule above instead.")
    vmin = max(VLLM_DYNAMIC_SINCE, _VLLM_METHOD_SINCE.get(spec.method, "0"), key=_vkey)
    out: dict[str, Any] = {
        "vllm": {
            "title": _title("vLLM", vmin, until),
            "speculative_config": vllm,
            "flag": "--speculative-config " + shlex.quote(_json(vllm)),
            "versions": {"min": vmin, "max": until},
            "static": {"speculative_config": static,
                       "flag": None if static is None else "--speculative-config " + shlex.quote(_json(static)),
                       "versions": {"min": static_since, "max": "0.23.0"}},
            "placeholders": _placed(ph, "model"),
            "notes": vnotes,
            "dynamic_sd_piecewise": None if dynamic is None else {k: v for k, v in dynamic.items() if k != "note"},
        },
    }

    # ---- TensorRT-LLM (PyTorch backend)
    if spec.method in _TRT_TYPE:
        # Newer TensorRT-LLM reads the keys as inclusive upper bounds of batch (bs above the largest
        # key: speculation off) and requires the smallest key to map to max_draft_len.
        trt_sched = {r["batch_max"]: r["k"] for r in sched if r["k"] > 0}
        trt: dict[str, Any] = {"decoding_type": _TRT_TYPE[spec.method], "max_draft_len": max(k_top, 1)}
        if trt_sched:
            trt["draft_len_schedule"] = trt_sched
        trt_ph = _placed(ph, "speculative_model")
        if ckpt:
            trt["speculative_model"] = ckpt
        notes = [p["message"] for p in trt_ph] + [n for n in (extra, no_draft_tp) if n] + [
            "draft_len_schedule keys are upper bounds of batch in newer TensorRT-LLM (PR #10860): "
            "{4: 4, 8: 2, 32: 1} means bs 1-4 -> 4, 5-8 -> 2, 9-32 -> 1, 33+ -> 0; an older Drafter read "
            "keys as lower bounds: check the installed version."]
        if trt_sched and sched[0]["k"] != max(k_top, 1):
            notes.append("the smallest key must map to max_draft_len: the schedule's first k is below its "
                         "maximum, so set max_draft_len to the first k or accept TensorRT-LLM's validation error")
        out["tensorrt_llm"] = {"title": _TRT_TITLE, "speculative_config": trt, "placeholders": trt_ph, "notes": notes}
    else:
        out["tensorrt_llm"] = {"title": _TRT_TITLE, "speculative_config": None, "placeholders": [],
                               "notes": [_trt_missing(spec.method)]}

    # ---- SGLang
    if spec.method in _SGL_ALGO:
        algo = _SGL_ALGO[spec.method]
        flags = [f"--speculative-algorithm {algo}"]
        sgl_ph = _placed(ph, "--speculative-draft-model-path")
        if ckpt:
            flags.append(f"--speculative-draft-model-path {shlex.quote(ckpt)}")
        if spec.method != "ngram":
            flags += [f"--speculative-num-steps {k_first}", "--speculative-eagle-topk 1",
                      f"--speculative-num-draft-tokens {k_first + 1}"]
        else:  # unset, SGLang verifies 12 positions per request, as a BFS tree of breadth <= 10
            flags += [f"--speculative-num-draft-tokens {k_first + 1}", "--speculative-ngram-max-bfs-breadth 1"]
        tiers = sorted({r["k"] for r in sched if r["k"] > 0})
        since = _SGL_SINCE.get(algo)
        ngram_note = ([f"NGRAM needs SGLang >= 0.5.3. Every request verifies exactly --speculative-num-draft-tokens "
                       f"positions, matched or not; unset it is 12, drafted as a tree of BFS breadth up to 10 "
                       f"(server_args.py): the flags above keep the chain of k = {k_first} drafts that was priced."]
                      if spec.method == "ngram" else [])
        mtp_note = (["NEXTN reads the target checkpoint's own MTP layers: SGLang sets --speculative-draft-model-path "
                     "to the model path for DeepSeek-V3-style architectures."] if spec.method == "mtp" else [])
        standalone_note = (["STANDALONE needs SGLang >= 0.5.2."] if algo == "STANDALONE" else [])
        out["sglang"] = {
            "title": _title("SGLang", since, None),
            "flags": " ".join(flags),
            "versions": {"min": since, "max": None},
            "placeholders": sgl_ph,
            "notes": [p["message"] for p in sgl_ph] + [n for n in (extra, no_draft_tp) if n]
            + ngram_note + mtp_note + standalone_note + [
                "SGLang has no per-batch-size k schedule upstream; --speculative-adaptive (SGLang >= 0.5.11; EAGLE, "
                f"topk 1; sgl-project/sglang#21599, #24055) switches among candidate_steps tiers: use {tiers or [1]} as "
                "candidate_steps in --speculative-adaptive-config." if spec.method != "ngram" else
                "SGLang has no per-batch-size k schedule upstream and its adaptive speculation is EAGLE's: "
                f"NGRAM keeps one width; set it for the load served most (k per batch: {tiers or [1]}).",
                "Route by load instead where speculation stops paying: "
                + (route if below else "it pays over the whole batch range checked."),
                "--cuda-graph-max-bs (--cuda-graph-max-bs-decode from SGLang 0.5.20) matters: speculative batches "
                "above it run without CUDA graphs.",
            ],
        }
    else:
        out["sglang"] = {"title": "SGLang", "flags": None, "versions": None, "placeholders": [],
                         "notes": [_sgl_missing(spec.method)]}
    if below is None:
        rule = f"speculate (k = {k_first}) at every batch up to {int(pol.batches[-1])}"
    elif never:
        rule = "do not speculate: it never pays in this range"
    elif off == [(below, top)]:
        rule = f"speculate below batch {below} (k = {k_first} at batch 1), off from batch {below}"
    else:  # it pays again above an off range (beyond a CUDA-graph limit)
        rule = (f"speculate except at batches {_ranges_said(off, top)}"
                + (f" (k = {k_first} at batch 1)" if below > 1 else ""))
    out["rule"] = rule
    return out


def _dynamic_sd(pol: Policy) -> dict[str, Any] | None:
    """What the schedule gives on one vLLM server that runs it as Dynamic SD, every step PIECEWISE on
    vLLM's model runner V1 (policy.dynamic_sd_throughput), against a server without speculation on
    full graphs: the mean gain, and where it is slower (route those batches to that server)."""
    import numpy as np

    from .policy import dynamic_sd_throughput, ranges

    tput = dynamic_sd_throughput(pol)
    if tput is None:
        return None
    ratio = tput / pol.tput[0]
    full = pol.gains()["mean_gain_over_always_off"]
    slower = [(r["batch_min"], r["batch_max"]) for r in ranges(pol.batches, (ratio < 1.0).astype(int)) if r["k"] == 1]
    top = int(pol.batches[-1])
    note = ("on vLLM's model runner V1, Dynamic SD runs every step with PIECEWISE CUDA graphs, attention outside "
            "the graph (vllm issue #49548: 59.6 -> 50.0 tok/s single stream): priced so, this schedule on one "
            f"server gains mean {float(np.mean(ratio)):.3f}x over a server without speculation on full graphs "
            f"(not {full:.3f}x)"
            + (f", and is slower than it at batches {_ranges_said(slower, top)}: send those to that server instead."
               if slower else "."))
    return {"mean_gain_over_always_off": float(np.mean(ratio)), "slower_than_off": [list(r) for r in slower],
            "note": note}


def _ranges_said(off: list[tuple[int, int]], last: int) -> str:
    """e.g. '241-512 and 900-1024' ('900 and above' where a range ends at the last batch checked)."""
    said = [f"{lo} and above" if hi == last and lo != hi else f"{lo}-{hi}" if lo != hi else f"{lo}" for lo, hi in off]
    return ", ".join(said[:-1]) + (" and " if len(said) > 1 else "") + said[-1]


def _route(off: list[tuple[int, int]], last: int) -> str:
    """Where to send traffic to a server without speculation (the batches where it does not pay)."""
    if len(off) == 1 and off[0][1] == last:
        return f"send traffic above batch {off[0][0] - 1} to a server without speculation."
    return f"send traffic at batches {_ranges_said(off, last)} to a server without speculation." if off else ""


def _title(engine: str, lo: str | None, hi: str | None) -> str:
    """e.g. 'vLLM >= 0.24', 'vLLM 0.24-0.32'."""
    return engine + (f" {_short(lo)}-{_short(hi)}" if lo and hi else f" >= {_short(lo)}" if lo else "")


def _short(v: str) -> str:
    """0.24.0 -> 0.24."""
    return v[:-2] if v.endswith(".0") else v


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
