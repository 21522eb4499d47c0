"""Scenario and speculation flags resolved into library objects (with the resolved inputs)."""

from __future__ import annotations

import argparse

from ..errors import CrossoverError
from .common import (
    DEFAULT_ACCEPTANCE,
    DEFAULT_CONTEXT,
    DEFAULT_K,
    MIN_SEQUENCES_FOR_AUTO_TP,
    _fraction,
    _number,
    parse_list,
    parse_tree,
)


def speculation_from_args(args: argparse.Namespace, workload_acceptance=None,
                          calibrated: dict[str, float] | None = None, target=None):
    """The speculation flags (method, k, tree, acceptance, draft) as a Speculation."""
    from ..specs import load_model
    from ..speculation import Acceptance, Speculation

    calibrated = calibrated or {}
    k = int(_number(args.k, "--k", integer=True, positive=False))
    if k < 1:
        raise CrossoverError(f"--k must be >= 1 (got {args.k}); speculation off is the baseline itself")
    tree, paths = parse_tree(args.tree) if getattr(args, "tree", None) else (None, None)
    depth = len(tree) if tree is not None else (max(len(p) for p in paths) if paths is not None else None)
    if depth is not None:
        if args.k != str(DEFAULT_K) and int(args.k) != depth:
            raise CrossoverError(f"--k {args.k} disagrees with --tree {args.tree} (depth {depth}); drop --k")
        k = depth
    wa = workload_acceptance
    if args.match_rate is not None:
        match = _number(args.match_rate, "--match-rate", positive=False)
    elif wa is not None and wa.ngram_match_rate is not None and args.method == "ngram":
        match = wa.ngram_match_rate
    else:
        match = 1.0
    if args.tau is not None:
        acc = Acceptance.mean_length(_number(args.tau, "--tau"), match)
    elif args.acceptance_per_position is not None:
        rates = parse_list(args.acceptance_per_position, "--acceptance-per-position")
        acc = Acceptance.per_position(rates, match)
    elif args.acceptance is not None:
        acc = Acceptance.rate(_number(args.acceptance, "--acceptance", positive=False), match)
    elif "acceptance" in calibrated:
        acc = Acceptance.rate(calibrated["acceptance"], match)
    elif wa is not None and wa.tau is not None:
        acc = Acceptance.mean_length(wa.tau, match)
    elif wa is not None and wa.per_position is not None:
        acc = Acceptance.per_position(wa.per_position, match)
    elif wa is not None and wa.rate is not None:
        acc = Acceptance.rate(wa.rate, match)
    else:
        acc = Acceptance.rate(DEFAULT_ACCEPTANCE, match)
    if args.draft == "self":  # self-speculation: the target drafts for itself, usually with a KV budget
        if target is None:
            raise CrossoverError("--draft self needs the target model (--model)")
        draft = target
    else:
        draft = load_model(args.draft) if args.draft else None
    draft_tp = int(_number(args.draft_tp, "--draft-tp", integer=True)) if args.draft_tp is not None else None
    budget = getattr(args, "draft_kv_budget", None)
    budget = int(_number(budget, "--draft-kv-budget", integer=True)) if budget is not None else None
    spec = Speculation(args.method, k, acc, draft=draft, draft_tp=draft_tp,
                       draft_vocab=int(_number(args.draft_vocab, "--draft-vocab", integer=True)), tree=tree,
                       tree_paths=paths, draft_kv_budget=budget)
    if acc.kind == "tau" and spec.tau > k + 1:
        raise CrossoverError(f"--tau {acc.value:g} exceeds k+1 = {k + 1}")
    return spec


def scenario_from_args(args: argparse.Namespace, prompt_len: float | None = None, output_len: float | None = None,
                       workload_acceptance=None):
    """Resolve the scenario flags into a curves.Scenario plus a dict of resolved inputs.

    With mean prompt and output lengths the scenario carries the prefill share, and the context
    defaults to prompt + output / 2 (the mean KV length over a request's decode).
    """
    from .. import memory
    from ..curves import Scenario
    from ..specs import Deployment, Efficiency, load_hardware, load_model

    model = load_model(args.model)
    hardware = load_hardware(args.hardware)
    if args.context is not None:
        context = _number(args.context, "--context", integer=True, positive=False)
        if context < 0:
            raise CrossoverError(f"--context must be >= 0 tokens (got {args.context})")
    elif prompt_len is not None:
        context = prompt_len + output_len / 2.0  # type: ignore[operator]
    else:
        context = DEFAULT_CONTEXT
    peak = context if prompt_len is None else max(context, prompt_len + output_len)  # type: ignore[operator]
    eff_changes = {}
    if args.bandwidth_fraction is not None:
        eff_changes["bandwidth_fraction"] = _fraction(args.bandwidth_fraction, "--bandwidth-fraction")
    if args.flops_fraction is not None:
        eff_changes["flops_fraction"] = _fraction(args.flops_fraction, "--flops-fraction")
    if args.step_overhead_ms is not None:
        eff_changes["step_overhead_s"] = _number(args.step_overhead_ms, "--step-overhead-ms", positive=False) / 1e3
        if eff_changes["step_overhead_s"] < 0:
            raise CrossoverError("--step-overhead-ms must be >= 0")
    if args.transition:
        eff_changes["transition"] = args.transition
    calibrated: dict[str, float] = {}
    if getattr(args, "calibration", None):
        from ..calibration import PARAMETERS, load_calibration

        calibrated = load_calibration(args.calibration)
        for name, value in calibrated.items():
            field = PARAMETERS[name][0]
            if field != "acceptance" and field not in eff_changes:
                eff_changes[field] = value / 1e3 if name.endswith("_ms") else value
    efficiency = Efficiency(**eff_changes)
    common = dict(model=model, hardware=hardware, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                  efficiency=efficiency, expert_parallel=bool(getattr(args, "expert_parallel", False)))
    tp_auto = args.tp is None
    if tp_auto:
        for tp in (1, 2, 4, 8):
            dep = Deployment(tp=tp, **common)
            if memory.max_batch(dep, peak) >= MIN_SEQUENCES_FOR_AUTO_TP:
                break
        else:
            raise CrossoverError(
                f"{model.name} does not hold {MIN_SEQUENCES_FOR_AUTO_TP} sequences of {context:g} tokens on 8 x "
                f"{hardware.name}; set --tp, a smaller --context or --weight-dtype fp8")
    else:
        tp = int(_number(args.tp, "--tp", integer=True))
        dep = Deployment(tp=tp, **common)
        if memory.max_batch(dep, peak) < 1:
            need = memory.weight_bytes_per_gpu(dep) / 1e9
            raise CrossoverError(
                f"{model.name} does not fit on {tp} x {hardware.name}: {need:.1f} GB of weights per GPU plus one "
                f"sequence of {context:g} tokens exceed {hardware.memory_gb:g} GB x {dep.memory_utilization:g}; "
                f"use a larger --tp, a smaller --context or --weight-dtype fp8")
    spec = speculation_from_args(args, workload_acceptance, calibrated, target=model)
    k, tree, acc, draft = spec.k, spec.tree, spec.acceptance, spec.draft
    sc = Scenario(dep, spec, float(context), prompt_len, output_len)
    resolved = {
        "model": model.name, "hardware": hardware.name, "tp": tp, "tp_auto": tp_auto,
        "weight_dtype": dep.wdtype, "kv_dtype": dep.kv_dtype, "context": context, "prompt_len": prompt_len,
        "output_len": output_len, "method": spec.method,
        "draft": draft.name if draft else None, "draft_kv_budget": spec.draft_kv_budget, "k": k,
        "acceptance_kind": acc.kind,
        "acceptance": acc.value if acc.kind != "per_position" else list(acc.value),  # type: ignore[arg-type]
        "match_rate": acc.match_rate, "alpha_equivalent": round(acc.alpha(k), 6), "tau": round(spec.tau, 6),
        "tree": list(tree) if tree else None,
        "tree_paths": [list(p) for p in spec.tree_paths] if spec.tree_paths else None,
        "verify_width": spec.verify_width,
        "efficiency": dep.efficiency.model_dump(),
    }
    return sc, resolved
