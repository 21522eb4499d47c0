"""Engine effects behind a measured sweep the model does not explain: where a measured slowdown is
deeper than the model allows, or speculation measured winning where the model says it loses, the
engine behaviour that can cause it, each checked against the model where it can be (another
engine profile re-predicts the levels): only causes that can apply to the engine that ran
(`ran_engine`), and no level with a point that beats physics. Used by `measured` (api/sweeps.py) and
its diagnosis (comparison/diagnosis.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..model.scenario import Scenario
    from ..measurements import MeasuredTable


# The setting that raises the CUDA-graph capture limit, per engine
CAPTURE_FLAG = {"vllm": "--max-cudagraph-capture-size", "sglang": "--cuda-graph-max-bs",
                "trtllm": "cuda_graph_config max_batch_size"}
# A measured speedup below 1 and this far (ln) below the model's is deeper than the model allows; one
# above 1 this far above a predicted loss is larger than the model allows.
DEEPER_THAN_MODEL = 0.15


def _widest_gap(ratios: np.ndarray, predicted: list, below: bool) -> tuple[float, int] | None:
    """(ln(measured / predicted), level index) of the widest gap on one side: measured < 1 and below
    the prediction (`below`), or measured > 1 where the model predicts < 1 (speculation measured winning
    where the model says it loses); the first level of equal ones; None when no level is on that side
    by more than DEEPER_THAN_MODEL."""
    predicted_speedup = np.array(predicted, float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        side = (ratios < 1.0) if below else (ratios > 1.0) & (predicted_speedup < 1.0)
        rows = np.flatnonzero(np.isfinite(ratios) & (ratios > 0) & side & (predicted_speedup > 0))
        gaps = ratios[rows] / predicted_speedup[rows]  # measured / predicted, the same divisions as one by one
    if not len(rows):
        return None
    # ln is monotone: the widest gap lies among the ratios within rounding of the extreme one, the only
    # ones whose ln is taken here; sign orders the gaps so that the widest is the largest either way
    sign = -1.0 if below else 1.0
    extreme = gaps.min() if below else gaps.max()
    near = rows[sign * gaps >= sign * extreme * (1 - sign * 1e-12)].tolist()
    widest, first = max((sign * math.log(float(ratios[i]) / predicted[i]), -i) for i in near)
    return (sign * widest, -first) if widest > DEEPER_THAN_MODEL else None


def ran_engine(table: MeasuredTable, sc: Scenario) -> dict[str, str]:
    """The engine that ran the sweep: {framework, label, source}. SGLang bench_serving files carry the
    server's own info (server_info): SGLang. Other files name the benchmark, not the server (vllm bench
    serve drives any OpenAI endpoint): the engine profile the sweep is priced with (--engine, default
    vllm). Only causes that can apply to this engine are named."""
    engine = sc.deployment.engine
    # the files do not record the requests' sampling: as given, else the greedy default, said so
    sampling = (f"requests {engine.settings['sampling']} (given)" if "sampling" in engine.settings
                else "requests greedy (assumed: the files do not say; --temperature, --top-p)")
    if table.columns.formats == {"sglang"}:
        return {"framework": "sglang", "label": engine.label if engine.framework == "sglang" else "SGLang",
                "source": "the files (SGLang bench_serving server_info)", "sampling": sampling}
    return {"framework": engine.framework, "label": engine.label, "source": f"the engine profile {engine.name}",
            "sampling": sampling}


def _predicted_with(table: MeasuredTable, sc: Scenario, engine: str) -> dict[str, Any] | None:
    """The model at the measured levels with another engine profile (predicted_at_levels)."""
    from .compare import predicted_at_levels
    from ..specs.loader import load_engine

    return predicted_at_levels(table, sc.with_engine(load_engine(engine)))


# What the model says of requests that sampled with a top-p it was not told of
SORTING_SAID = ("requests that sample with a top-p, which the model was not told (--temperature, --top-p): vLLM's "
                "rejection sampler then sorts the vocabulary of every verified row; clients that send no temperature "
                "(GuideLLM, AIPerf, vllm bench serve after 0.14) get the server's defaults, the model's "
                "generation_config.json")


ASYNC_OFF_SAID = ("the {} proposer turns vLLM V1's async scheduling off (the default from 0.14; vllm/config/vllm.py "
                  "keeps it for EAGLE, EAGLE-3 and MTP drafts only): the scheduler's host time is on the critical "
                  "path of every speculative step and hidden under the GPU without speculation")


# why that cause stays unchecked: the prediction prices the scheduler's part of the host work it exposes
ASYNC_OFF_WHY = ("the prediction prices the scheduler's share of that host time (the profile's host_per_seq_us, a "
                 "lower bound); the input preparation and output processing beyond it have no measurement to re-price")


def async_lost(engine, method: str) -> bool:
    """Whether the speculative arm runs without the async scheduling the other arm has: a profile that
    schedules asynchronously (vLLM V1 from 0.14) and a method outside its async_methods. vLLM's only: the
    cause's text is its (SGLang's lost overlap scheduler is priced in full, host_per_step_us)."""
    return engine.vllm_v1 and engine.overlaps(None) and not engine.speculating.overlaps(method)


MLA_PREFILL_SAID = ("an MLA attention backend that takes one query token per request (every MLA backend of vLLM 0.10; "
                    "0.14's defaults outside Hopper, CUTLASS MLA on Blackwell and Triton MLA elsewhere): each verify "
                    "request's context gathered from the latent cache and up-projected by kv_b_proj at every layer, "
                    "with PIECEWISE graphs (--attention-backend FLASHINFER_MLA or FLASHMLA scores the verify tokens "
                    "as a decode)")


def sorting_applies(table: MeasuredTable, sc: Scenario) -> bool:
    """Whether requests sampled with a top-p can be behind the sweep: vLLM ran it, the model priced it
    greedy by default (no sampling given) and the profile prices the sort."""
    engine = sc.deployment.engine
    return (ran_engine(table, sc)["framework"] == "vllm" and engine.sampling == "greedy"
            and "sampling" not in engine.settings and "top_p" in engine.sampling_bytes_per_vocab)


def with_sorting(sc: Scenario) -> Scenario:
    """The scenario with requests that sample with a top-p (vLLM's sort path: the bytes depend on
    neither the top-p's value nor the temperature's)."""
    from ..specs.sampling import SamplingParams

    return sc.with_engine(sc.deployment.engine.configured(sampling=SamplingParams(temperature=1.0, top_p=0.9)))


def engine_effects(table: MeasuredTable, sc: Scenario, predicted: dict[str, Any] | None,
                   exclude=()) -> dict[str, Any] | None:
    """Where the measured slowdown is deepest beyond the model's (speedup < 1, ln(measured /
    predicted) < -0.15), or else where a measured speedup most exceeds a predicted loss (measured > 1,
    predicted < 1, ln > 0.15), the engine effects that can cause it, each checked against the model
    where it can be (the vllm-v0 or vllm-0.10 profile re-predicts the levels; graph limits and batch
    caps from the deployment's engine profile); `exclude`: levels left out (a point there beats physics)."""
    if predicted is None:
        return None
    from .compare import speedups

    loads, _, _, ratios = speedups(table)  # per level, from the column arrays (no point objects)
    if len(exclude):  # levels with an impossible point: no diagnosis there
        ratios = np.where(np.isin(loads, np.asarray(list(exclude), float)), np.nan, ratios)
    found = _widest_gap(ratios, predicted["speedup"], below=True)
    if found is None:
        above = _widest_gap(ratios, predicted["speedup"], below=False)
        return None if above is None else _larger_than_model(table, sc, loads, ratios, predicted, above[1])
    i = found[1]
    load, ratio, ps = float(loads[i]), float(ratios[i]), predicted["speedup"][i]
    spec, engine = sc.speculation, sc.deployment.engine
    vllm = ran_engine(table, sc)["framework"] == "vllm"  # only causes of the engine that ran
    causes: list[dict[str, str]] = []
    if vllm and engine.verify_layout != "batch_expansion":
        p0 = _predicted_with(table, sc, "vllm-v0")
        check0 = f"--engine vllm-v0 predicts {p0['speedup'][i]:.3f} there" if p0 else ""
        causes.append({"effect": "vLLM V0 scored drafts by batch expansion, k+1 single-query sequences that each "
                                 "re-read the KV cache (vLLM before 0.10, or V0 forced)", "check": check0})
    width = spec.verify_width
    key = load if engine.graph_capture_unit == "requests" else load * width
    unit = engine.graph_capture_unit
    limit = sc.deployment.speculating_engine.capture_limit(True)  # the speculating server's largest graph
    if limit and key > limit:
        flag = CAPTURE_FLAG.get(ran_engine(table, sc)["framework"], "the engine's CUDA-graph capture setting")
        causes.append({"effect": f"verify steps of {key:.0f} {unit} run without CUDA graphs beyond {engine.label}'s "
                                 f"capture limit of {limit} {unit} ({flag}; --cuda-graph-max here)", "check": ""})
    elif vllm and engine.graph_capture_limit:
        causes.append({"effect": "verify batch sizes that miss a captured CUDA-graph size run attention eagerly "
                                 "(capture sizes rounded to multiples of 1 + k, vllm PR #53407): check the captured "
                                 "sizes in the engine log", "check": ""})
    if sorting_applies(table, sc):
        from .compare import predicted_at_levels

        pt = predicted_at_levels(table, with_sorting(sc))
        causes.append({"effect": SORTING_SAID,
                       "check": f"with a top-p (any value) the model predicts {pt['speedup'][i]:.3f} there" if pt else ""})
    if vllm and async_lost(engine, spec.method):
        causes.append({"effect": ASYNC_OFF_SAID.format(spec.method), "check": ""})
    if vllm and sc.deployment.model.mla is not None and not sc.deployment.mla_verify_prefill:
        from .compare import predicted_at_levels

        pm = predicted_at_levels(table, sc.with_engine(engine.configured(mla_verify_prefill="always")))
        causes.append({"effect": MLA_PREFILL_SAID,
                       "check": f"with it the model predicts {pm['speedup'][i]:.3f} there" if pm else ""})
    if vllm and spec.method == "ngram" and engine.verify_layout == "multi_query":
        causes.append({"effect": "a CPU n-gram proposer's ragged batches (matches beside misses) run PIECEWISE "
                                 "graphs", "check": ""})
    cap = engine.spec_max_running
    if ran_engine(table, sc)["framework"] == "sglang" and cap and load > cap:
        causes.append({"effect": f"SGLang caps running requests at {cap} when speculation is on (server_args.py): "
                                 "above it the speculative arm queues (--max-running-requests sets another)",
                       "check": ""})
    if table.load_axis == "request_rate":
        causes.append({"effect": "the speculative arm saturating first: past its capacity its queue grows and the "
                                 "latency ratio measures queueing, not step cost (see the achieved request rates)",
                       "check": ""})
    return {"level": load, "direction": "below", "measured_speedup": round(ratio, 4), "predicted_speedup": round(ps, 4),
            "engine": engine.label, "causes": causes}


def _larger_than_model(table: MeasuredTable, sc: Scenario, loads, ratios, predicted: dict[str, Any],
                       i: int) -> dict[str, Any]:
    """engine_effects for a measured speedup larger than the model allows at level `i`: host time both
    arms pay per step or per sequence, which speculation, taking fewer steps per token, pays less often."""
    spec, engine = sc.speculation, sc.deployment.engine
    causes: list[dict[str, str]] = []
    if ran_engine(table, sc)["framework"] == "vllm" and engine.vllm_v1 and engine.full_graphs:
        p10 = _predicted_with(table, sc, "vllm-0.10")
        causes.append({"effect": "vLLM V1 before 0.11 captured PIECEWISE CUDA graphs only: every step, plain decode "
                                 "too, runs attention outside the graph at a host cost per sequence that speculation, "
                                 "with fewer steps per token, pays less often",
                       "check": f"--engine vllm-0.10 predicts {p10['speedup'][i]:.3f} there" if p10 else ""})
    causes.append({"effect": "host time per step beyond the profile's (scheduling and output processing that the "
                             "engine does not overlap): both arms pay it per step, and speculation over fewer steps",
                   "check": f"{engine.label} charges {engine.step_overhead_ms:g} ms per step"})
    causes.append({"effect": "acceptance at this load above the files' mean (the model takes one tau for every "
                             "level): per-level acceptance lengths in the files, or --engine-metrics, pin it",
                   "check": f"tau {spec.tau:.2f} assumed"})
    return {"level": float(loads[i]), "direction": "above", "measured_speedup": round(float(ratios[i]), 4),
            "predicted_speedup": round(predicted["speedup"][i], 4), "engine": engine.label, "causes": causes}
