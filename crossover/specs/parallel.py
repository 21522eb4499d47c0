"""Which parallel layouts an engine accepts for a model on a GPU: tensor parallelism (attention heads, KV heads,
MLP and expert widths, one NVLink / xGMI box) and data parallelism (a MoE model's experts over tp x dp GPUs)."""

from __future__ import annotations

from .hardware import Hardware
from .model import Model


def _tp_reasons(model: Model, hardware: Hardware, tp: int, expert_parallel: bool) -> list[str]:
    reasons = []
    if model.num_attention_heads % tp:
        reasons.append(f"the {model.num_attention_heads} attention heads do not divide by it")
    kv = model.num_key_value_heads
    if model.mla is None and kv % tp and tp % kv:
        reasons.append(f"the {kv} KV heads are neither a multiple nor a divisor of it (to split or replicate them)")
    widths = [("MLP width", model.intermediate_size)] if model.moe is None or model.num_dense_layers else []
    if model.moe is not None:
        moe = model.moe
        if expert_parallel:
            if moe.num_experts % tp:
                reasons.append(f"the {moe.num_experts} experts do not split evenly over it (expert parallel)")
        else:
            widths.append(("expert MLP width", moe.moe_intermediate_size))
        if moe.num_shared_experts and moe.shared_expert_intermediate_size:
            widths.append(("shared-expert MLP width", moe.shared_expert_intermediate_size))
    for label, w in widths:
        if w % tp:
            reasons.append(f"the {label} {w} does not divide by it")
            break
    if tp > hardware.node_size and not hardware.multi_node_interconnect:
        reasons.append(f"one {hardware.name} NVLink/xGMI box holds {hardware.node_size} GPUs and the hardware spec "
                       "names no multi-node link (multi_node_interconnect)")
    return reasons


def dp_problem(model: Model, hardware: Hardware, tp: int, dp: int, expert_parallel: bool = False) -> str | None:
    """Why `dp` data-parallel ranks of `tp` GPUs each are no layout an engine runs for this model
    (Deployment.data_parallel), else None. A dense model's ranks are replicas with the load balanced over
    them (vLLM -dp); a MoE model's experts split over all tp x dp GPUs (whole under expert parallelism, by
    MLP columns else), which one NVLink / xGMI box holds unless the spec names a multi-node link."""
    if dp == 1 or model.moe is None:
        return None
    group, moe, reasons = tp * dp, model.moe, []
    if expert_parallel and moe.num_experts % group:
        reasons.append(f"the {moe.num_experts} experts do not split evenly over {group} GPUs (expert parallel)")
    if not expert_parallel and moe.moe_intermediate_size % group:
        reasons.append(f"the expert MLP width {moe.moe_intermediate_size} does not divide by {group}")
    if group > hardware.node_size and not hardware.multi_node_interconnect:
        reasons.append(f"one {hardware.name} NVLink/xGMI box holds {hardware.node_size} GPUs and the hardware spec "
                       "names no multi-node link (multi_node_interconnect)")
    if not reasons:
        return None
    return f"data parallel {dp} (--dp) at tp {tp} is not one an engine accepts for {model.name}: " + "; ".join(reasons)


def valid_tps(model: Model, hardware: Hardware, expert_parallel: bool = False, limit: int = 64) -> list[int]:
    """Every tp from 1 to `limit` that an engine accepts (see tp_problem)."""
    return [t for t in range(1, limit + 1) if not _tp_reasons(model, hardware, t, expert_parallel)]


def tp_problem(model: Model, hardware: Hardware, tp: int, expert_parallel: bool = False,
               label: str = "tp", flag: str = "--tp") -> str | None:
    """Why an engine would refuse tensor parallelism `tp` for this model on this hardware, else None.

    vLLM, SGLang and TensorRT-LLM shard attention by heads and MLPs by columns: the attention heads
    must divide by tp (vLLM: "Total number of attention heads must be divisible by tensor parallel
    size"), the KV heads must divide by tp or tp by the KV heads (each KV head then replicated;
    vLLM QKVParallelLinear), MLP widths must divide by tp (vLLM's `divide` asserts it), and with
    expert parallelism the routed experts split whole and evenly across the group. A group larger
    than one NVLink / xGMI box (Hardware.node_size) needs the multi-node link the spec names."""
    reasons = _tp_reasons(model, hardware, tp, expert_parallel)
    if not reasons:
        return None
    valid = valid_tps(model, hardware, expert_parallel, limit=max(64, hardware.node_size))
    return (f"{label} {tp} ({flag}) is not one an engine accepts for {model.name} on {hardware.name}: "
            + "; ".join(reasons) + (f"; valid: {', '.join(map(str, valid))}" if valid else ""))
