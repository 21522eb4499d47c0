"""The collectives of one forward, per GPU: the tensor-parallel all-reduces and, under data-parallel
attention, the MoE layers' gather and reduce-scatter across the ranks (Deployment.data_parallel); for
roofline.compile_ops, which adds them to every forward as seconds per token plus a latency per call."""

from __future__ import annotations

from .ops import Op
from ..specs.deployment import Deployment


def collectives(dep: Deployment, ops: list[Op]) -> tuple[float, float]:
    """(seconds per token of one rank, seconds of latency) of the forward's collectives over `ops` (its
    all-reduce rows and MoE layers) on this deployment's links; (0, 0) where it has none."""
    tp, dp, act = dep.tp, dep.data_parallel, dep.act_bytes
    ar_count = sum(op.count for op in ops if op.kind == "allreduce")
    ar_width = max((op.width for op in ops if op.kind == "allreduce"), default=0.0)
    # Ring all-reduce: 2 (tp-1) steps, each moving 1/tp of the message over a link, plus the
    # call's latency (base + per hop).
    ar_per_token = ar_count * 2.0 * (tp - 1) / tp * ar_width * act / dep.link_bandwidth if tp > 1 else 0.0
    latency = ar_count * dep.allreduce_latency
    # Expert parallelism under tensor-parallel attention keeps the all-reduce: every GPU holds the whole
    # batch's hidden states, runs its own experts on the tokens routed to them and the partial outputs
    # are summed as under TP (vLLM 0.14.1 fused_moe/config.py use_all2all_kernels = dp_size > 1 and
    # use_ep, layer.py reduce_output; SGLang 0.5.5 token_dispatcher/standard.py with moe_a2a_backend
    # "none", the default). Dispatch and combine need data-parallel attention (below).
    host = pcie_host_fraction(dep)
    if host is not None and tp > 2:
        # Past 2 PCIe GPUs there is no peer-to-peer all-reduce (vLLM's custom all-reduce stops at 2):
        # every GPU's ring bytes cross the host's shared PCIe fabric, 2 (tp - 1) x the message at
        # `host` x one link instead of 2 (tp - 1) / tp at the link fraction (roofline.allreduce_seconds).
        ar_per_token *= tp * dep.link_bandwidth / (dep.hardware.interconnect_bytes_s * host)
    moe = [op for op in ops if op.kind == "experts"]
    gathers = sum(op.count for op in moe) if dp > 1 else 0.0
    if gathers:
        # Data-parallel attention: each MoE layer gathers every rank's hidden states onto every GPU and
        # reduce-scatters the experts' outputs back to their ranks; a ring over the dp ranks receives
        # (dp - 1) / dp of the dp x rank tokens each way (vLLM 0.14.1's default all2all_backend
        # "allgather_reducescatter", config/parallel.py, device_communicators/all2all.py AgRsAll2AllManager
        # over the DP group; SGLang 0.5.5 layers/dp_attention.py dp_gather and dp_reduce_scatter_tensor),
        # two calls of dp - 1 ring steps each.
        width = max(op.in_features for op in moe)
        ar_per_token += gathers * 2.0 * (dp - 1) * width * act / dep.link_bandwidth
        latency += gathers * 2.0 * dep.collective_latency(dp, dp - 1)
    return ar_per_token, latency


def pcie_host_fraction(dep: Deployment) -> float | None:
    """The share of one PCIe link that a > 2-GPU all-reduce gets over the host's shared fabric: the
    hardware's kernel-table-distilled `all_reduce.host_fraction` where the GPUs talk over PCIe and the
    deployment takes distilled parameters (Efficiency.distilled), else None (the ring over links)."""
    hw = dep.hardware
    if not (hw.is_pcie and dep.efficiency.distilled and hw.distilled is not None and hw.distilled.all_reduce):
        return None
    return hw.distilled.all_reduce.host_fraction


