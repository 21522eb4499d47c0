"""Scenarios built from plain values: names or specs, the automatic TP, the memory-fit check, the
order of acceptance sources and an applied calibration. The CLI and the Python API both build
their scenarios here (`crossover.scenario`); `api/inputs.py` reports what was resolved.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import TYPE_CHECKING, Any

from ..defaults import (
    AUTO_TP,
    DEFAULT_CONTEXT,
    DEFAULT_DRAFT_VOCAB,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    MIN_SEQUENCES_FOR_AUTO_TP,
)
from ..errors import CrossoverError, InputError, api_boundary
from .build_speculation import acceptance_of, speculation
from .records import ScenarioOptions

# The model stack is imported by the functions that build with it, not for the defaults (the parser)
if TYPE_CHECKING:
    from ..model.scenario import Scenario
    from ..specs import Deployment, Efficiency, Hardware, Model

# The largest fixed per-step overhead accepted: engines spend ~1-2 ms (specs/deployment.py); a second
# per step is already no serving engine, and 1e308 ms would overflow the simulator's clock.
MAX_STEP_OVERHEAD_MS = 1000.0

ENGINES = ("vllm", "vllm-0.10", "vllm-v0", "sglang", "sglang-0.4", "trtllm", "hf")  # the shipped profiles (engines())


def engines() -> tuple[str, ...]:
    """Engine profile names (engines/*.yaml and the user's CROSSOVER_SPEC_PATH)."""
    from ..specs.loader import available

    return tuple(sorted(available("engines")))


def _efficiency(calibrated: dict[str, float], **flags: float | str | None) -> Efficiency:
    """Efficiency with explicit values first, then a calibration's, then the documented defaults."""
    from ..specs import Efficiency
    from ..specs.deployment import MIN_FRACTION

    changes: dict[str, Any] = {}
    for name in ("bandwidth_fraction", "flops_fraction"):
        v = flags[name]
        if v is not None:
            flag = "--" + name.replace("_", "-")
            if not MIN_FRACTION <= float(v) <= 1:  # type: ignore[arg-type]
                raise CrossoverError(f"{name.replace('_', ' ')} ({flag}) must lie in [{MIN_FRACTION:g}, 1] "
                                     f"(got {v}): a fraction of peak the hardware achieves")
            changes[name] = float(v)  # type: ignore[arg-type]
    if flags["step_overhead_ms"] is not None:
        v = float(flags["step_overhead_ms"])  # type: ignore[arg-type]
        if not 0 <= v <= MAX_STEP_OVERHEAD_MS:
            raise CrossoverError(f"step overhead (--step-overhead-ms) must lie in [0, {MAX_STEP_OVERHEAD_MS:g}] ms "
                                 f"(got {v:g}); engines spend ~1-2 ms per step")
        changes["step_overhead_s"] = v / 1e3
    if flags["transition"] is not None:
        changes["transition"] = flags["transition"]
    if calibrated:  # a fit's values, named by calibration.PARAMETERS, in the units SCALE converts to seconds
        from ..analysis.calibration import PARAMETERS
        from ..analysis.sweep_fit import SCALE
    for name, value in calibrated.items():
        field = PARAMETERS[name][0]
        if field != "acceptance" and field not in changes:
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise CrossoverError(f"calibration (--calibration) parameter {name} must be a finite number >= 0 "
                                     f"(got {value!r})")
            changes[field] = value * SCALE.get(name, 1.0)
    return Efficiency(**changes)


def _deployment(model: Model, hardware: Hardware, tp: int | None, peak: float, context: float,
                **common: Any) -> Deployment:
    """The deployment at `tp`, or at the smallest automatic TP that holds enough sequences; a
    model that does not fit is a one-line error."""
    import numpy as np

    from ..model import memory
    from ..specs import Deployment
    from ..specs.parallel import dp_problem, tp_problem

    ep, dp = bool(common.get("expert_parallel", False)), int(common.get("data_parallel", 1))
    if tp is None:
        valid = [t for t in AUTO_TP if tp_problem(model, hardware, t, ep and dp == 1) is None
                 and dp_problem(model, hardware, t, dp, ep) is None]
        for t in valid:
            dep = Deployment(model=model, hardware=hardware, tp=t, **common)
            if memory.max_batch(dep, peak) >= MIN_SEQUENCES_FOR_AUTO_TP:
                return dep
        tried = ", ".join(map(str, valid)) or "none of " + ", ".join(map(str, AUTO_TP))
        raise CrossoverError(
            f"{model.name} does not hold {MIN_SEQUENCES_FOR_AUTO_TP} sequences of {context:g} tokens on "
            f"{hardware.name} at any tp an engine accepts for it ({tried}); set tp (--tp), a smaller context "
            f"(--context) or fp8 weights (--weight-dtype fp8)")
    if isinstance(tp, bool) or not isinstance(tp, (int, float, np.integer, np.floating)) or not math.isfinite(tp) \
            or int(tp) != tp or tp < 1:
        raise CrossoverError(f"tp (--tp) must be an integer >= 1 (got {tp})")
    # (under data-parallel attention the experts split over tp x dp GPUs: dp_problem checks them)
    problem = tp_problem(model, hardware, int(tp), ep and dp == 1) or dp_problem(model, hardware, int(tp), dp, ep)
    if problem is not None:
        raise CrossoverError(problem)
    dep = Deployment(model=model, hardware=hardware, tp=int(tp), **common)
    memory.check_fits(dep, peak)
    return dep


def _on_off(value, said: str, parameter: str) -> bool | None:
    """A setting given as on / off (the CLI) or a bool (the API); None: not given."""
    if isinstance(value, str):
        if value not in ("on", "off"):
            raise InputError(f"{said} is on or off (got {value!r})", parameter=parameter)
        return value == "on"
    return value


@api_boundary
def scenario(model: str | Model = DEFAULT_MODEL, hardware: str | Hardware = DEFAULT_HARDWARE,
             **options: Any) -> Scenario:
    """A validated scenario: model and hardware by name (or spec) and the options of
    `records.ScenarioOptions` (each with its default; an unknown one is an InputError): TP (None: the smallest of 1, 2,
    4, 8 that holds 16 sequences), the speculation method, its acceptance (acceptance, tau or
    per_position; else a calibration's, else the workload's, else 0.7), the context (default 2048,
    or prompt + output / 2 with lengths) and efficiency overrides. With a workload, its mean prompt
    and output lengths (unless given) make the curves carry the prefill share. A separate draft must
    share the target's vocabulary unless `allow_vocab_mismatch`. `engine` names the engine profile
    (engines/*.yaml: vllm = V1 0.11+, vllm-0.10, vllm-v0, sglang, sglang-0.4, trtllm, hf; None: DEFAULT_ENGINE, vllm) whose
    overheads, verify layout and CUDA-graph limits the step model applies; `cost` how a forward is
    priced (roofline or kernels); `distilled` = False keeps the generic efficiency defaults instead
    of the GPU's parameters distilled from measured kernel tables (hardware YAML `distilled:`).

    Refused in one line: a tp no engine accepts for the model (heads, KV heads, MLP widths, experts
    under expert parallelism, GPUs per NVLink box), a context beyond the model's
    max_position_embeddings, and efficiency values that leave a step time non-finite.

    Memoised on its arguments when every one is a plain value and no file is named (library spec
    names, numbers; no calibration, workload or YAML path): a scenario is frozen, and the warnings its
    build gave are given again on every call."""
    key = _memo_key(model, hardware, options)
    if key is None:
        return _build(model, hardware, options)
    sc, caught = _memoised(key)
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=2)
    return sc


_PLAIN = (str, int, float, bool, type(None))


def _memo_key(model: Any, hardware: Any, options: dict[str, Any]) -> tuple | None:
    """The arguments as a hashable key, or None where a call must be built afresh (a spec object, a
    file to read, a value that is no plain number or name)."""
    def plain(v: Any) -> bool:
        if isinstance(v, tuple | list):
            return all(plain(x) for x in v)
        if isinstance(v, str):
            return "/" not in v and "\\" not in v and not v.endswith((".yaml", ".yml", ".json"))
        return isinstance(v, _PLAIN) and not (isinstance(v, float) and v != v)

    if options.get("calibration") is not None or options.get("workload") is not None:
        return None
    items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))
    if not (plain(model) and plain(hardware) and all(plain(v) for _, v in items)):
        return None
    import os

    return (model, hardware, items, os.environ.get("CROSSOVER_SPEC_PATH"))  # names resolve through the spec path


@functools.lru_cache(maxsize=256)
def _memoised(key: tuple) -> tuple[Scenario, tuple]:
    model, hardware, items, _ = key
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sc = _build(model, hardware, {k: (list(v) if isinstance(v, tuple) else v) for k, v in items})
    return sc, tuple(caught)


def _build(model: str | Model, hardware: str | Hardware, options: dict[str, Any]) -> Scenario:
    """crossover.scenario's work, uncached."""
    o = ScenarioOptions.of(options)  # every option with its default, an unknown keyword one line
    (tp, method, k, acceptance, tau, per_position, match_rate, draft, draft_tp, draft_vocab, draft_kv_budget,
     tree, context, prompt_len, output_len, weight_dtype, kv_dtype, expert_parallel, data_parallel, bandwidth_fraction,
     flops_fraction, step_overhead_ms, transition, calibration, workload, allow_vocab_mismatch,
     force_calibration, engine, cost, distilled) = (
        o.tp, o.method, o.k, o.acceptance, o.tau, o.per_position, o.match_rate, o.draft, o.draft_tp,
        o.draft_vocab, o.draft_kv_budget, o.tree, o.context, o.prompt_len, o.output_len, o.weight_dtype,
        o.kv_dtype, o.expert_parallel, o.data_parallel, o.bandwidth_fraction, o.flops_fraction, o.step_overhead_ms,
        o.transition, o.calibration, o.workload, o.allow_vocab_mismatch, o.force_calibration, o.engine, o.cost,
        o.distilled)
    from ..model.scenario import Scenario
    from ..model.kernels.mode import cost_mode as kernel_cost_mode
    from ..specs import load_hardware, load_model
    from ..specs.parallel import tp_problem
    from ..defaults import DEFAULT_ENGINE
    from ..specs.loader import load_engine
    from ..model.step import COST_MODES

    wl, base = workload, None
    if isinstance(workload, str):
        from ..specs.workload import load_workload

        wl, base = load_workload(workload)
    if wl is not None and prompt_len is None and output_len is None:
        prompt_len, output_len = wl.means(base=base)
    if (prompt_len is None) != (output_len is None):
        raise CrossoverError("give prompt and output lengths together (mean tokens per request)")
    target, hw = load_model(model), load_hardware(hardware)  # a name, a path or the spec itself
    _check_moot(target, o)
    if context is None:
        context = DEFAULT_CONTEXT if prompt_len is None else prompt_len + output_len / 2.0  # type: ignore[operator]
    elif not (context >= 0 and math.isfinite(context)):
        raise CrossoverError(f"context (--context) must be a finite number >= 0 tokens (got {context})")
    for name, v in (("prompt length (--prompt-len)", prompt_len), ("output length (--output-len)", output_len)):
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise CrossoverError(f"{name} must be a finite number >= 0 tokens (got {v})")
    peak = context if prompt_len is None else max(context, prompt_len + output_len)  # type: ignore[operator]
    _check_positions(target, context, peak, prompt_len is not None)
    calibrated = {}
    if calibration is not None:
        from ..analysis.calibration import check_transfer, load_calibration, saved_scenario

        calibrated = load_calibration(calibration)
    eff = _efficiency(calibrated, bandwidth_fraction=bandwidth_fraction, flops_fraction=flops_fraction,
                      step_overhead_ms=step_overhead_ms, transition=transition)
    if not distilled:
        eff = eff.model_copy(update={"distilled": False})
    profile = load_engine(DEFAULT_ENGINE if engine is None else engine)
    chunked, overlap = (_on_off(v, flag, name) for v, flag, name in (
        (o.chunked_prefill, "chunked prefill (--chunked-prefill)", "chunked_prefill"),
        (o.async_scheduling, "async scheduling (--async-scheduling)", "async_scheduling")))
    if o.mla_verify not in (None, "decode", "prefill"):
        raise InputError(f"MLA verify (--mla-verify) is decode or prefill (got {o.mla_verify!r})", parameter="mla_verify")
    mla = {None: None, "prefill": "always", "decode": "never"}
    profile = profile.configured(o.cuda_graphs, chunked, o.cuda_graphs_speculating,
                                 _sampling(o.temperature, o.top_p, o.top_k, target.vocab_size,
                                           (o.repetition_penalty, o.frequency_penalty, o.presence_penalty)),
                                 mla[o.mla_verify], o.cuda_graph_max, overlap)
    util = o.gpu_memory_utilization
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not (0 < util <= 1):
        raise InputError(f"GPU memory utilisation (--gpu-memory-utilization) is a share in (0, 1] (got {util!r})",
                         parameter="gpu_memory_utilization")
    if cost not in COST_MODES:
        raise CrossoverError(f"unknown cost mode {cost!r} (--cost); choose from {', '.join(COST_MODES)}")
    if cost == "kernels":  # the tables' package is there (else the install line), before any work
        kernel_cost_mode(profile.framework, hw.name)
    dep = _deployment(target, hw, tp, peak, context, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                      efficiency=eff, expert_parallel=expert_parallel, engine=profile, cost=cost,
                      memory_utilization=float(util), data_parallel=_data_parallel(data_parallel))
    if calibration is not None:  # a fit of another model, hardware or TP applies only when forced
        note = check_transfer(saved_scenario(calibration), target.name, hw.name, dep.tp, force_calibration,
                              data_parallel=dep.data_parallel,
                              source=calibration, transferred=list(calibrated))
        if note:
            warnings.warn(note)
    acc = acceptance_of(acceptance=acceptance, tau=tau, per_position=per_position, match_rate=match_rate,
                        method=method, calibrated=calibrated.get("acceptance"), workload=wl)
    if draft_vocab is None:  # EAGLE-3's default reduced vocabulary, never above the target's own
        draft_vocab = min(DEFAULT_DRAFT_VOCAB, target.vocab_size)
    spec = speculation(target, method=method, k=k, tree=tree, draft=draft, draft_tp=draft_tp,
                       draft_vocab=draft_vocab, draft_kv_budget=draft_kv_budget, acceptance=acc,
                       allow_vocab_mismatch=allow_vocab_mismatch)
    if draft_tp is not None and draft_tp > dep.tp:
        raise InputError(f"draft tp {draft_tp} (--draft-tp) is more GPUs than the target's tp {dep.tp}: the draft runs "
                         f"on the target's GPUs", parameter="draft_tp")
    if draft_tp is not None and spec.method in ("eagle", "eagle3", "mtp", "medusa") and draft_tp not in (1, dep.tp):
        raise InputError(f"draft tp {draft_tp} (--draft-tp) for a {spec.method} head: engines run it at 1 or at the "
                         f"target's tp {dep.tp} (vLLM: vllm/config/speculative.py _verify_and_get_draft_tp, 0.14.1)",
                         parameter="draft_tp")
    if draft_tp is not None and spec.method == "ngram":
        raise InputError("draft tp (--draft-tp) is no setting of n-gram speculation: it runs no draft forward",
                         parameter="draft_tp")
    if spec.method == "draft" and spec.draft is not None and spec.draft is not target:
        given = draft_tp is not None
        problem = tp_problem(spec.draft, hw, int(spec.draft_tp or dep.tp), expert_parallel,
                             label="draft tp", flag="--draft-tp" if given else "the target's --tp; set --draft-tp")
        if problem is not None:
            raise CrossoverError(problem)
    used = tuple((name, value) for name, value, unset in (
        ("context", float(context), o.context is None and prompt_len is None),
        ("k", spec.k, o.k is None and tree is None),
        ("engine", profile.name, engine is None),
        ("draft_vocab", spec.draft_vocab, spec.method == "eagle3" and o.draft_vocab is None)) if unset)
    sc = Scenario(dep, spec, float(context), prompt_len, output_len, tp_auto=tp is None, defaults_used=used)
    _check_finite_steps(sc)
    return sc


def _check_moot(target: Model, o) -> None:
    """A flag that changes nothing for this question is a one-line error, not silently ignored."""
    method = o.method
    if o.expert_parallel and target.moe is None:
        raise InputError(f"expert parallelism (--expert-parallel) splits a MoE model's experts; {target.name} is dense",
                         parameter="expert_parallel")
    if o.force_calibration and o.calibration is None:
        raise InputError("--force-calibration applies a --calibration fit to another deployment: give --calibration",
                         parameter="force_calibration")
    if o.allow_vocab_mismatch and method != "draft":
        raise InputError(f"--allow-vocab-mismatch is for a separate draft model (--method draft); {method} proposes "
                         f"the target's own token ids", parameter="allow_vocab_mismatch")
    if o.draft_vocab is not None:
        if method != "eagle3":
            raise InputError(f"--draft-vocab is EAGLE-3's reduced draft vocabulary; {method} has none",
                             parameter="draft_vocab")
        if not 1 <= o.draft_vocab <= target.vocab_size:
            raise InputError(f"--draft-vocab {o.draft_vocab} is outside 1..{target.vocab_size}: a draft head's "
                             f"vocabulary is a subset of the target's", parameter="draft_vocab")


def _data_parallel(dp) -> int:
    """The data-parallel attention ranks as given (an integer >= 1), else a one-line error."""
    if isinstance(dp, bool) or not isinstance(dp, (int, float)) or not math.isfinite(dp) or int(dp) != dp or dp < 1:
        raise InputError(f"data parallel (--dp) must be an integer >= 1 (got {dp!r})", parameter="data_parallel")
    if dp > MAX_DATA_PARALLEL:
        raise InputError(f"data parallel (--dp) {dp:g} is more ranks than one engine runs (at most {MAX_DATA_PARALLEL}); "
                         "for a fleet of replicas see `crossover plan`", parameter="data_parallel")
    return int(dp)


MAX_DATA_PARALLEL = 64  # the most ranks of one engine crossover takes: a bound on the input, not an engine's


def _sampling(temperature, top_p, top_k, vocab: int, penalties=(None, None, None)):
    """The requests' sampling parameters as given (None: none given, the greedy default), each
    refused in one line where no engine takes it (vLLM's bounds: sampling_params.py, 0.14.1)."""
    from ..specs.sampling import SamplingParams

    if temperature is None and top_p is None and top_k is None and all(v is None for v in penalties):
        return None
    pen = {}
    for name, v in zip(("repetition_penalty", "frequency_penalty", "presence_penalty"), penalties):
        if v is None:
            continue
        rep = name == "repetition_penalty"  # a factor > 0 (1 is off); the others lie in [-2, 2] (0 is off)
        finite = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
        if not finite or (v <= 0 if rep else abs(v) > 2):
            raise InputError(f"{name.replace('_', ' ')} (--{name.replace('_', '-')}) is "
                             f"{'a number > 0 (1 is off)' if rep else 'a number in [-2, 2] (0 is off)'} (got {v!r})",
                             parameter=name)
        pen[name] = float(v)
    for name, flag, v in (("temperature", "--temperature", temperature), ("top_p", "--top-p", top_p)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise InputError(f"{name.replace('_', '-')} ({flag}) is a number (got {v!r})", parameter=name)
    if temperature is not None and temperature < 0:
        raise InputError(f"temperature (--temperature) is >= 0 (got {temperature:g}); 0 is greedy",
                         parameter="temperature")
    if top_p is not None and not 0 < top_p <= 1:
        raise InputError(f"top-p (--top-p) is in (0, 1] (got {top_p:g}); 1 is off", parameter="top_p")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < -1):
        raise InputError(f"top-k (--top-k) is a whole number >= -1 (got {top_k!r}); -1 or 0 is off", parameter="top_k")
    if top_k is not None and (top_k <= 0 or top_k >= vocab):  # off, as vLLM reads it (the whole vocabulary)
        top_k = None
    return SamplingParams(temperature=0.0 if temperature is None else float(temperature),
                          top_p=None if top_p is None else float(top_p), top_k=top_k, **pen)


def _check_positions(model: Model, context: float, peak: float, lengths: bool) -> None:
    """A one-line error for sequences longer than the model's max_position_embeddings (when given):
    vLLM refuses a max_model_len above it, SGLang a context_length above it."""
    limit = model.max_position_embeddings
    if limit is None or peak <= limit:
        return
    what = (f"prompt + output ({peak:g} tokens; --prompt-len, --output-len)" if lengths and peak > context
            else f"context {context:g} (--context)")
    raise CrossoverError(f"{what} exceeds {model.name}'s {limit} positions (max_position_embeddings); "
                         f"engines refuse sequences longer than the model was trained for")


def _check_finite_steps(sc: Scenario) -> None:
    """A one-line error when the efficiency values leave a step time non-finite or non-positive (e.g.
    a denormal bandwidth fraction): priced at batch 1 and at the most sequences memory could hold."""
    import numpy as np

    from ..analysis.curves import evaluate
    from ..model.memory import batch_ceiling
    from ..specs.deployment import MIN_FRACTION

    top = max(1, min(batch_ceiling(sc.deployment), 1 << 20))
    with np.errstate(all="ignore"):
        c = evaluate(sc, np.array([1.0, float(top)]))
        times = np.concatenate([np.ravel(c.step_off), np.ravel(c.step_on)])
    if not np.all(np.isfinite(times)) or not np.all(times > 0):
        raise CrossoverError(
            "these efficiency values give a step time that is not a finite positive number "
            "(--bandwidth-fraction, --flops-fraction, --step-overhead-ms or the calibration's); "
            f"use fractions in [{MIN_FRACTION:g}, 1] and finite overheads")
