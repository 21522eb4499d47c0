"""What a scenario resolved to, as the CLI's `--json` reports it under `inputs` (and the engine line
and the reports read): every input, given or assumed, with each server's engine settings in effect."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model.scenario import Scenario
    from ..specs import Deployment


def inputs(sc: Scenario) -> dict[str, Any]:
    """What a scenario resolved to, as the CLI's `--json` reports it under `inputs`."""
    from ..analysis.engine_config import unserved

    dep, spec = sc.deployment, sc.speculation
    acc, k = spec.acceptance, spec.k
    return {
        "model": dep.model.name, "hardware": dep.hardware.name, "tp": dep.tp, "tp_auto": sc.tp_auto, "data_parallel": dep.data_parallel,
        "weight_dtype": dep.wdtype, "kv_dtype": dep.kv_dtype,
        "context": int(sc.context) if sc.context == int(sc.context) else sc.context,
        "prompt_len": sc.prompt_len, "output_len": sc.output_len, "method": spec.method,
        "draft": spec.draft.name if spec.draft else None, "draft_kv_budget": spec.draft_kv_budget, "k": k,
        "acceptance_kind": acc.kind,
        "acceptance": acc.value if acc.kind != "per_position" else list(acc.value),  # type: ignore[arg-type]
        "match_rate": acc.match_rate, "alpha_equivalent": round(acc.alpha(k), 6), "tau": round(spec.tau, 6),
        "tree": list(spec.tree) if spec.tree else None,
        "tree_paths": [list(p) for p in spec.tree_paths] if spec.tree_paths else None,
        "verify_width": spec.verify_width,
        "engine": dep.engine.name, "engine_version": dep.engine.label, "verify_layout": dep.engine.verify_layout,
        # why the engine's releases run no such method (priced anyway, said): analysis/engine_config.py
        "method_unsupported": unserved(dep.engine, spec.method),
        "cuda_graphs": dep.engine.cuda_graphs, "cuda_graphs_speculating": dep.speculating_engine.cuda_graphs,
        # the largest step each server replays as a graph (0: none), in the engine's graph unit
        "cuda_graph_max": {"off": dep.engine.capture_limit(False), "on": dep.speculating_engine.capture_limit(True),
                           "unit": dep.engine.graph_capture_unit},
        "chunked_prefill": dep.engine.chunked_prefill, "mla_verify_prefill": dep.mla_verify_prefill,
        "mla_model": dep.model.mla is not None,
        "mla_triton": dep.mla_triton, "mla_graph_fallback": dep.mla_graph_fallback,
        # each server's CPU/GPU overlap (vLLM V1's async scheduling, SGLang's and TensorRT-LLM's overlap
        # scheduler): lost with speculation by the proposers outside the engine's async_methods, whose
        # host work is then exposed
        "async_scheduling": {"off": dep.engine.overlaps(None), "on": dep.speculating_engine.overlaps(spec.method),
                             "name": "async scheduling" if dep.engine.framework == "vllm" else "the overlap scheduler",
                             "setting": ("on" if dep.engine.async_scheduling else "off")
                             if dep.engine.overlap_settable else None},
        "gpu_memory_utilization": dep.memory_utilization,
        "sampling": dep.engine.settings.get("sampling", "greedy"), "sampling_path": dep.engine.sampling,
        "engine_settings_given": sorted(dep.engine.settings),
        "cost": dep.cost, "cost_source": _cost_source(dep),
        "distilled_from": dep.hardware.distilled.source if dep.hardware.distilled and dep.efficiency.distilled else None,
        "efficiency": _efficiency_in_effect(dep),
    }


def _cost_source(dep: Deployment) -> str:
    """Where a forward's seconds come from: the measured tables (package, version, framework and
    table versions) or the analytical roofline."""
    from ..model.kernels.mode import cost_mode as kernel_cost_mode

    if dep.cost == "kernels":
        return kernel_cost_mode(dep.engine.framework, dep.hardware.name).source
    return "analytical roofline (op bytes and FLOPs over achieved bandwidth and FLOP/s)"


def _efficiency_in_effect(dep: Deployment) -> dict[str, Any]:
    """The efficiency dials with the engine profile's overheads filled in where no override is set."""
    from ..specs.deployment import ENGINE_OVERHEADS

    out = dep.efficiency.model_dump()
    for name in ENGINE_OVERHEADS:
        out[name] = getattr(dep, name)
    hw = dep.hardware  # the fractions in effect: set, distilled, the GPU's measured one or the default
    out.update(bandwidth_fraction=dep.bandwidth / hw.bandwidth_bytes_s, kv_bandwidth_fraction=dep.kv_bandwidth / hw.bandwidth_bytes_s,
               flops_fraction=dep.flops / hw.peak_flops(dep.compute_dtype))
    # where the distilled values in effect come from (None: none applied, e.g. a GPU without kernel tables)
    out["distilled_source"] = hw.distilled.source if dep.efficiency.distilled_fields else None
    return out
