"""What a continuous-batching engine is allowed to run: sequence, token-budget and KV-cache limits."""

from __future__ import annotations

from dataclasses import dataclass

from .. import memory
from ..curves import Scenario, draft_memory
from ..errors import CrossoverError
from ..ops import model_ops
from ..specs.deployment import Deployment


MAX_NUM_SEQS = 1 << 16  # engines run hundreds to a few thousand sequences at once


@dataclass(frozen=True)
class EngineLimits:
    """Scheduler limits (vLLM names): at most `max_num_seqs` running, `max_num_batched_tokens` per step."""

    max_num_seqs: int = 256  # vLLM's default
    max_num_batched_tokens: int = 8192  # vLLM V1's default for online serving on large GPUs

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise CrossoverError("max_num_seqs and max_num_batched_tokens must be >= 1")
        if self.max_num_seqs > MAX_NUM_SEQS:  # per-sequence arrays are sized by it
            raise CrossoverError(f"--max-num-seqs must be <= {MAX_NUM_SEQS} (got {self.max_num_seqs})")


def kv_capacity_tokens(dep: Deployment, sc: Scenario | None = None) -> float:
    """Tokens of KV cache the engine can hold (per sequence position, all layers), draft included."""
    ops = model_ops(dep.model, dep.wdtype, dep.tp)
    budget = memory.kv_budget_bytes(dep, ops)
    per_token = memory.kv_bytes_per_seq_per_gpu(dep, ops, 1.0)
    if sc is not None:
        w, kv_per_seq = draft_memory(sc)
        budget -= w
        # the draft's KV grows with the same positions (a budgeted draft cache is bounded; ignored)
        per_token += kv_per_seq / max(sc.context + sc.speculation.k + 1, 1.0)
    if budget <= 0:
        raise CrossoverError(
            f"{dep.model.name} weights do not fit on {dep.tp} x {dep.hardware.name}; use a larger --tp or fp8 weights")
    return budget / per_token
