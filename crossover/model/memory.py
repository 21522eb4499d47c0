"""Memory capacity: weights, KV cache per sequence, and the largest batch that fits."""

from __future__ import annotations

import math
from functools import lru_cache

from ..errors import CrossoverError, DoesNotFitError
from .ops import Op, embedding_params, kv_share, model_ops
from ..specs.deployment import Deployment
from ..units import DTYPE_BYTES, GB

# Activations, CUDA graphs and allocator slack that an engine keeps outside the KV pool. vLLM
# measures it with a profiling forward at start-up and gives the KV pool what is left of
# gpu_memory_utilization (Worker.determine_available_memory, vllm/v1/worker/gpu_worker.py);
# ~1-3 GB per GPU on 7B-70B models. Derived default.
RESERVE_BYTES_PER_GPU = 1.5 * GB


def op_weight_bytes(ops: list[Op], tp: int, expert_group: int | None = None) -> float:
    """Weight bytes one GPU holds for these ops, each at its own dtype (sharded ops split over tp, the
    routed experts over `expert_group` GPUs: tp, or tp x the data-parallel ranks)."""
    total = 0.0
    for op in ops:
        if op.kind == "gemm":
            total += op.count * op.params * DTYPE_BYTES[op.dtype] / (tp if op.sharded else 1)
        elif op.kind == "experts":
            total += op.count * op.num_experts * op.params * DTYPE_BYTES[op.dtype] / (expert_group or tp)
    return total


def weight_bytes_per_gpu(dep: Deployment, ops: list[Op] | None = None) -> float:
    """Weight bytes one GPU holds (streamed ops plus the input embedding)."""
    ops = model_ops(dep.model, dep.wdtype, dep.tp) if ops is None else ops
    total = op_weight_bytes(ops, dep.tp, dep.gpus)
    m = dep.model
    if not m.tie_word_embeddings:
        total += embedding_params(m) * DTYPE_BYTES["bf16"] / dep.tp
    return total


def kv_bytes_per_seq_per_gpu(dep: Deployment, ops: list[Op], length: float) -> float:
    """KV-cache bytes one sequence of `length` tokens holds on one GPU (GQA replication, windows)."""
    total = 0.0
    for op in ops:
        if op.kind != "attention":
            continue
        held = min(length, op.window) if op.window is not None else length
        total += op.count * held * op.kv_elems * kv_share(op, dep.tp) * dep.kv_bytes
    return total


def kv_budget_bytes(dep: Deployment, ops: list[Op] | None = None) -> float:
    """Bytes per GPU left for the KV cache: the usable memory less the reserve and the weights."""
    usable = dep.hardware.memory_bytes * dep.memory_utilization - RESERVE_BYTES_PER_GPU
    return usable - weight_bytes_per_gpu(dep, ops)


def max_batch(dep: Deployment, context: float, extra_weights_per_gpu: float = 0.0,
              extra_kv_per_seq_per_gpu: float = 0.0, slack_tokens: float = 0.0) -> int:
    """Largest batch whose KV cache (at `context` + slack tokens) fits beside the weights; 0 if none.
    Data-parallel ranks (Deployment.data_parallel) each hold their own sequences: that many times one's."""
    ops = model_ops(dep.model, dep.wdtype, dep.tp)
    budget = kv_budget_bytes(dep, ops) - extra_weights_per_gpu
    per_seq = kv_bytes_per_seq_per_gpu(dep, ops, context + slack_tokens) + extra_kv_per_seq_per_gpu
    if budget <= 0:
        return 0
    # (a denormal per-sequence size would make the quotient overflow: no batch exceeds 2^30 anyway)
    return int(math.floor(min(budget / per_seq, 1 << 30))) * dep.data_parallel if per_seq > 0 else 1 << 30


@lru_cache(maxsize=256)
def batch_ceiling(dep: Deployment) -> int:
    """The most sequences the KV cache could ever hold: one token each beside the weights (0 if the
    weights alone do not fit). A batch above it is no load any engine could run. Memoised per
    deployment (immutable)."""
    return max_batch(dep, 1.0)


def check_batches(batches, max_batch: int, flag: str = "--batch") -> list[int]:
    """`batches` as integers, or a one-line error: each a positive whole number of sequences no
    larger than `max_batch` (batch_ceiling: what the KV cache could ever hold)."""
    out = []
    for b in batches:
        try:
            v = float(b)
        except (TypeError, ValueError):
            raise CrossoverError(f"batch {b!r} ({flag}) must be a whole number of sequences") from None
        if not math.isfinite(v) or v < 1 or v != int(v):
            raise CrossoverError(f"batch {b!r} ({flag}) must be a whole number of sequences >= 1")
        if v > max_batch:
            raise CrossoverError(
                f"batch {v:g} ({flag}) exceeds {max_batch}, the most sequences the KV cache could ever hold "
                f"(one token each beside the weights)")
        out.append(int(v))
    if not out:
        raise CrossoverError(f"no batch given ({flag}); give e.g. 1,8,64")
    return out


def check_fits(dep: Deployment, held: float) -> None:
    """A one-line error when not even one sequence of `held` tokens fits beside the weights."""
    if max_batch(dep, held) < 1:
        need = weight_bytes_per_gpu(dep) / GB
        raise DoesNotFitError(
            f"{dep.model.name} does not fit on {dep.gpus} x {dep.hardware.name}: {need:.1f} GB of weights per GPU plus "
            f"one sequence of {held:g} tokens exceed {dep.hardware.memory_gb:g} GB x {dep.memory_utilization:g}; "
            f"use a larger tp (--tp), a smaller context (--context) or fp8 weights (--weight-dtype fp8)")
