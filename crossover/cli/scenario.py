"""Scenario and speculation flags turned into keyword arguments of the library's builders."""

from __future__ import annotations

import argparse
from typing import Any

from ..api.build_speculation import acceptance_of, speculation
from ..api.build import scenario
from ..api.inputs import inputs
from ..errors import CrossoverError
from ..model.speculation import parse_tree
from .common import number_flag, parse_list, sampling_kwargs, warnings_as_lines


def _int(args: argparse.Namespace, name: str, flag: str, positive: bool = True) -> int | None:
    v = number_flag(args, name, flag, integer=True, positive=positive)
    return None if v is None else int(v)


def speculation_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The speculation flags (method, k, tree, acceptance, draft) as keyword arguments."""
    per_position = getattr(args, "acceptance_per_position", None)
    tree = getattr(args, "tree", None)
    if tree is not None:
        try:
            tree = parse_tree(tree)
        except CrossoverError as exc:
            raise CrossoverError(f"--{exc}") from None
        tree = tree[0] if tree[0] is not None else tree[1]
    return dict(
        method=args.method, k=_int(args, "k", "--k"), tree=tree, draft=args.draft,
        draft_tp=_int(args, "draft_tp", "--draft-tp"), draft_vocab=_int(args, "draft_vocab", "--draft-vocab"),
        draft_kv_budget=_int(args, "draft_kv_budget", "--draft-kv-budget"),
        acceptance=number_flag(args, "acceptance", "--acceptance", positive=False),
        tau=number_flag(args, "tau", "--tau"),
        per_position=parse_list(per_position, "--acceptance-per-position") if per_position is not None else None,
        match_rate=number_flag(args, "match_rate", "--match-rate", positive=False),
        allow_vocab_mismatch=True if getattr(args, "allow_vocab_mismatch", False) else None)


def scenario_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Every scenario flag as a keyword argument of `crossover.scenario`."""
    kw = speculation_kwargs(args)
    context = number_flag(args, "context", "--context", integer=True, positive=False)
    if context is not None and context < 0:
        raise CrossoverError(f"--context must be >= 0 tokens (got {args.context})")
    kw.update(model=args.model, hardware=args.hardware, tp=_int(args, "tp", "--tp"), context=context,
              weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
              expert_parallel=bool(getattr(args, "expert_parallel", False)),
              data_parallel=_int(args, "data_parallel", "--dp") or 1,
              bandwidth_fraction=number_flag(args, "bandwidth_fraction", "--bandwidth-fraction"),
              flops_fraction=number_flag(args, "flops_fraction", "--flops-fraction"),
              step_overhead_ms=number_flag(args, "step_overhead_ms", "--step-overhead-ms", positive=False),
              transition=getattr(args, "transition", None), calibration=getattr(args, "calibration", None),
              force_calibration=bool(getattr(args, "force_calibration", False)),
              engine=getattr(args, "engine", None), cost=getattr(args, "cost", None),
              cuda_graphs=getattr(args, "cuda_graphs", None), chunked_prefill=getattr(args, "chunked_prefill", None),
              async_scheduling=getattr(args, "async_scheduling", None),
              cuda_graphs_speculating=getattr(args, "cuda_graphs_speculating", None),
              cuda_graph_max=_int(args, "cuda_graph_max", "--cuda-graph-max"),
              mla_verify=getattr(args, "mla_verify", None),
              gpu_memory_utilization=number_flag(args, "gpu_memory_utilization", "--gpu-memory-utilization"),
              **sampling_kwargs(args),
              distilled=False if getattr(args, "no_distilled", False) else None)
    return {k: v for k, v in kw.items() if v is not None or k in ("tp",)}


def scenario_from_args(args: argparse.Namespace, prompt_len: float | None = None, output_len: float | None = None,
                       workload=None):
    """The scenario the flags describe and what it resolved to (the `inputs` of --json)."""
    with warnings_as_lines():
        sc = scenario(**scenario_kwargs(args), prompt_len=prompt_len, output_len=output_len, workload=workload)
    return sc, inputs(sc)


def speculation_from_args(args: argparse.Namespace, workload=None, target=None):
    """The speculation flags alone (for verbs that build their own deployments)."""
    kw = speculation_kwargs(args)
    acc = acceptance_of(acceptance=kw.pop("acceptance"), tau=kw.pop("tau"), per_position=kw.pop("per_position"),
                        match_rate=kw.pop("match_rate"), method=kw["method"], workload=workload)
    with warnings_as_lines():
        return speculation(target, acceptance=acc, **{k: v for k, v in kw.items() if v is not None})
