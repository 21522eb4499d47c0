"""The commands of a planned two-server sweep (planning/sweep_plan.py): both servers' launch lines,
identical but for the speculation flags (vLLM, SGLang; the flags as `crossover policy` writes them,
analysis/engine_config.py, for k fixed at every batch), and per level and arm the client commands of
vllm bench serve, GuideLLM and AIPerf with the same lengths and seed, each writing its result under a
name `crossover measured` reads back with --on/--off alone (the tools' files carry no speculation
fields, so the folder says the arm).

Every flag is one of the documented options of the release named in CLIENT_RELEASES and
SERVER_RELEASES, as read from its released source into tests/data/client_args.yaml; the tests check
each emitted flag against it. Nothing here runs anything.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.engine_config import engine_configs
from ..analysis.policy import Policy, ranges
from ..model.scenario import Scenario
from ..serving.engine import EngineLimits
from ..specs.sampling import SamplingParams

CLIENTS = ("vllm-bench", "guidellm", "aiperf")
# The releases whose documented flags the commands use (tests/data/client_args.yaml). GuideLLM 0.6 is
# the last with `guidellm benchmark` (0.7 moved to `guidellm run`) and writes the v0.5-v0.6 report
# layout; AIPerf 0.4 writes input_config.loadgen, where `crossover measured` reads the level.
CLIENT_RELEASES = {"vllm-bench": ("vllm", "0.14.1"), "guidellm": ("guidellm", "0.6.1"), "aiperf": ("aiperf", "0.4.0")}
SERVER_RELEASES = {"vllm": ("vllm", "0.14.1"), "sglang": ("sglang", "0.5.11")}
HOST = "127.0.0.1"
# SGLang's --kv-cache-dtype names (engines/sglang.yaml kv_dtypes: nvfp4 from the 0.5.23 choices, fp4_e2m1 = mxfp4 in 0.5.10's)
_SGLANG_KV = {"fp8": "fp8_e4m3", "fp4": "nvfp4", "mxfp4": "fp4_e2m1"}


def fixed_k_policy(sc: Scenario, batch_max: int) -> Policy:
    """The schedule of a server that speculates at the scenario's k at every batch (what the on arm of
    the sweep runs), as a Policy that engine_config.engine_configs writes out."""
    b = np.arange(1, max(int(batch_max), 1) + 1)
    k = max(sc.speculation.k, 1)
    ks = np.full(b.size, k)
    pol = Policy(sc, b, [0, k], np.vstack([np.zeros(b.size), np.ones(b.size)]), k)
    pol.schedule = ranges(b, ks)
    return pol


def model_id(sc: Scenario) -> tuple[str, dict[str, Any] | None]:
    """The target's Hugging Face id, or a placeholder (and its record) where the spec names none."""
    model = sc.deployment.model
    if model.hf_repo:
        return model.hf_repo, None
    value = f"<HF id of {model.name}>"
    return value, {"key": "model", "value": value, "message": f"PLACEHOLDER {value!r}: the model spec names no "
                   f"Hugging Face repository (hf_repo); put the id or local path the servers load"}


def _line(words: list[Any], *tail: str | None) -> str:
    return " ".join([shlex.quote(str(w)) for w in words] + [t for t in tail if t])


def server_lines(sc: Scenario, limits: EngineLimits, seed: int, port: int,
                 draft_model_id: str | None = None) -> dict[str, Any]:
    """vLLM's and SGLang's launch line of each arm, the speculative flags from engine_configs, the
    placeholders left in them and notes on what the lines carry over from the scenario."""
    dep = sc.deployment
    spec = sc.speculation
    draft = spec.draft.name if spec.method == "draft" and spec.draft is not None else None
    cfg = engine_configs(fixed_k_policy(sc, limits.max_num_seqs), draft_model_id or draft, priced=False)
    model, ph = model_id(sc)
    notes: list[str] = []
    quant = []
    if dep.wdtype != dep.model.weight_dtype:
        if dep.wdtype == "fp8":
            quant = ["--quantization", "fp8"]
        else:
            notes.append(f"the plan prices {dep.wdtype} weights: serve a {dep.wdtype} checkpoint of {dep.model.name}")
    kv = [] if dep.kv_dtype in ("bf16", "fp16") else ["--kv-cache-dtype", dep.kv_dtype]
    if dep.kv_dtype not in ("bf16", "fp16", "fp8"):
        notes.append(f"KV cache {dep.kv_dtype}: set the engines' own KV-cache dtype for it")
    graphs = {"off": dep.engine.cuda_graphs, "on": dep.engine.speculating.cuda_graphs}
    cap = dep.engine.settings.get("cuda_graph_max")  # where the user set the capture limit
    if cap and dep.engine.framework not in ("vllm", "sglang"):
        notes.append(f"CUDA graphs up to {cap} {dep.engine.graph_capture_unit}: set {dep.engine.label}'s own limit")
    if "piecewise" in graphs.values():
        notes.append("piecewise CUDA graphs: vLLM's --compilation-config cudagraph_mode PIECEWISE (not written here)")
    if dep.mla_verify_prefill:
        notes.append("vLLM: MLA verify priced through the attention backend's prefill path (0.10; 0.14 outside Hopper: "
                     "CUTLASS MLA on Blackwell, Triton MLA elsewhere), as the server runs by default; "
                     "--attention-backend FLASHINFER_MLA (Blackwell) scores the verify tokens as a decode, another "
                     "configuration to plan (--mla-verify decode)")
    if not dep.engine.chunked_prefill:
        notes.append("chunked prefill off: turn it off on both servers (vLLM --no-enable-chunked-prefill, SGLang "
                     "--chunked-prefill-size -1)")
    out: dict[str, Any] = {"vllm": {}, "sglang": {}}
    for arm in ("off", "on"):
        seats = limits.seats(arm == "on")
        dp = dep.data_parallel  # vLLM's limits per data-parallel rank, SGLang's --max-running-requests the engine's
        vllm = ["vllm", "serve", model, "--tensor-parallel-size", dep.tp, *(["--data-parallel-size", dp] if dp > 1 else []),
                *(["--enable-expert-parallel"] if dep.expert_parallel else []), "--max-num-seqs", seats // dp,
                "--max-num-batched-tokens", limits.max_num_batched_tokens // dp, "--gpu-memory-utilization",
                f"{dep.memory_utilization:g}", "--seed", seed, "--port", port, *quant, *kv]
        if graphs[arm] == "none":
            vllm.append("--enforce-eager")
        elif cap and dep.engine.framework == "vllm":  # the limit given, in the engine's own unit (tokens)
            vllm += ["--max-cudagraph-capture-size", cap]
        overlap = dep.engine.settings.get("async_scheduling")  # as given: off on both; on where vLLM keeps it
        if overlap == "off":
            vllm.append("--no-async-scheduling")
        elif overlap == "on" and (arm == "off" or dep.speculating_engine.overlaps(spec.method)):
            vllm.append("--async-scheduling")
        out["vllm"][arm] = _line(vllm, cfg["vllm"]["static"]["flag"] if arm == "on" else None)
        sgl = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", dep.gpus,
               *(["--dp-size", dp, "--enable-dp-attention"] if dp > 1 else []),
               *(["--ep-size", dep.gpus] if dep.expert_parallel else []),
               "--max-running-requests", seats, "--chunked-prefill-size", limits.max_num_batched_tokens // dp,
               "--mem-fraction-static", f"{dep.memory_utilization:g}", "--random-seed", seed, "--port", port,
               *quant, *(["--kv-cache-dtype", _SGLANG_KV.get(dep.kv_dtype, dep.kv_dtype)] if kv else [])]
        if overlap == "off":  # the overlap scheduler off on both (on: SGLang 0.5.11+ keeps it while speculating)
            sgl.append("--disable-overlap-schedule")
        if graphs[arm] == "none":
            sgl.append("--disable-cuda-graph")
        elif cap and dep.engine.framework == "sglang":  # requests
            sgl += ["--cuda-graph-max-bs", cap]
        flags = cfg["sglang"]["flags"]
        out["sglang"][arm] = None if arm == "on" and flags is None else _line(sgl, flags if arm == "on" else None)
    static = cfg["vllm"]["static"]["versions"]
    out["vllm"]["versions"] = {"min": static["min"], "max": cfg["vllm"]["versions"]["max"]}
    out["sglang"]["versions"] = cfg["sglang"]["versions"]
    if out["sglang"]["on"] is None:
        notes += cfg["sglang"]["notes"][:1]
    notes.append("SGLang: --mem-fraction-static takes the share --gpu-memory-utilization gives vLLM, "
                 "--chunked-prefill-size the per-step token budget (--max-num-batched-tokens)")
    out["placeholders"] = ([ph] if ph else []) + cfg["vllm"]["placeholders"] + [
        p for p in cfg["sglang"]["placeholders"] if p["value"] not in {q["value"] for q in cfg["vllm"]["placeholders"]}]
    out["notes"] = notes
    return out


def level_name(axis: str, value: float) -> str:
    """A level's result name: concurrency-8, request-rate-2.5."""
    return f"concurrency-{int(value)}" if axis == "concurrency" else f"request-rate-{value:g}"


def _load(value: float, axis: str) -> str:
    return str(int(value)) if axis == "concurrency" else f"{value:g}"


def request_sampling(sampling: SamplingParams | None) -> dict[str, Any]:
    """The sampling fields every request carries: temperature always (0 for greedy), so that neither the
    client's default (vllm bench serve stopped sending greedy ones after 0.14) nor the server's
    generation_config.json decides; top-p, top-k and the penalties where set (SamplingParams.in_effect)."""
    return (SamplingParams() if sampling is None else sampling).in_effect()


def client_command(client: str, axis: str, level: dict[str, Any], arm: str, model: str, lengths: tuple[int, int],
                   seed: int, port: int, results_dir: str, sampling: SamplingParams | None = None) -> tuple[str, str]:
    """(command, the result file or folder it writes) of one client at one level and arm; every
    request samples as `sampling` says (greedy when None)."""
    body = request_sampling(sampling)
    p, o = lengths
    name, load = level_name(axis, level["load"]), _load(level["load"], axis)
    folder = f"{results_dir}/{client}/{arm}"
    url = f"http://{HOST}:{port}"
    n, warm = int(level["requests"]), int(level["warmup"])
    if client == "vllm-bench":
        rate = ["--max-concurrency", load, "--request-rate", "inf"] if axis == "concurrency" else [
            "--request-rate", load, "--burstiness", "1"]
        words = ["vllm", "bench", "serve", "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
                 "--model", model, "--dataset-name", "random", "--random-input-len", p, "--random-output-len", o,
                 "--random-range-ratio", "0", "--ignore-eos", "--num-prompts", n - warm, "--num-warmups", warm,
                 "--seed", seed, *rate, *[w for key, v in body.items() for w in (f"--{key.replace('_', '-')}", v)],
                 "--save-result", "--result-dir", folder, "--result-filename", f"{name}.json"]
        return _line(words), f"{folder}/{name}.json"
    if client == "guidellm":
        profile = ["--profile", "concurrent"] if axis == "concurrency" else ["--profile", "poisson"]
        words = ["guidellm", "benchmark", "run", "--target", url, "--model", model, "--processor", model,
                 "--data", f"prompt_tokens={p},output_tokens={o}", *profile, "--rate", load, "--max-requests", n,
                 "--warmup", warm, "--random-seed", seed, "--backend-kwargs", json.dumps({"extras": {"body": body}}),
                 "--output-dir", folder, "--outputs", f"{name}.json", "--disable-console-interactive"]
        return _line(words), f"{folder}/{name}.json"
    rate = ["--concurrency", load] if axis == "concurrency" else ["--request-rate", load,
                                                                   "--request-rate-mode", "poisson"]
    words = ["aiperf", "profile", "--model", model, "--url", url, "--endpoint-type", "completions", "--streaming",
             "--synthetic-input-tokens-mean", p, "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", o,
             "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true", *(f"{k}:{v}" for k, v in body.items()),
             *rate, "--request-count", n - warm,
             "--warmup-request-count", warm, "--random-seed", seed, "--artifact-dir", f"{folder}/{name}"]
    return _line(words), f"{folder}/{name}/profile_export_aiperf.json"


def client_commands(axis: str, levels: list[dict[str, Any]], model: str, lengths: tuple[int, int], seed: int,
                    port: int, results_dir: str, sampling: SamplingParams | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every client's commands: the off arm's levels, then the on arm's (one server at a time)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for client in CLIENTS:
        rows = []
        for arm in ("off", "on"):
            for lv in levels:
                cmd, result = client_command(client, axis, lv, arm, model, lengths, seed, port, results_dir, sampling)
                rows.append({"arm": arm, "load": lv["load"], "command": cmd, "writes": result})
        out[client] = rows
    return out


def _under(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside it (the first sweep's files written where these commands write)."""
    a, b = Path(path).resolve(), Path(folder).resolve()
    return a == b or b in a.parents


def read_back(axis: str, loads: list[float], results_dir: str,
              earlier: dict[str, list[str]] | None = None) -> dict[str, str]:
    """The `crossover measured` command that reads each client's results (its folders say the arm;
    an AIPerf run is one artifact folder per level), with a first sweep's files (`earlier`: on, off,
    files) beside them unless they lie in the folders read already."""
    earlier = earlier or {}
    out = {}
    for client in CLIENTS:
        parts = []
        for arm in ("on", "off", "files"):
            folder = f"{results_dir}/{client}/{arm}"
            paths = [] if arm == "files" else (
                [f"{folder}/{level_name(axis, v)}" for v in loads] if client == "aiperf" else [folder])
            paths += [str(x) for x in earlier.get(arm) or () if arm == "files"
                      or not any(_under(str(x), q) for q in paths)]
            if paths:
                parts.append(f"--{arm} " + " ".join(shlex.quote(x) for x in paths))
        out[client] = "crossover measured " + " ".join(parts)
    return out
