"""What a continuous-batching engine is allowed to run: sequence, token-budget and KV-cache limits."""

from __future__ import annotations

from dataclasses import dataclass

from ..defaults import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
from ..model import memory
from ..model.scenario import Scenario, draft_memory
from ..errors import CrossoverError
from ..model.ops import model_ops
from ..specs.deployment import Deployment


MAX_NUM_SEQS = 1 << 16  # engines run hundreds to a few thousand sequences at once


@dataclass(frozen=True)
class EngineLimits:
    """Scheduler limits (vLLM names): at most `max_num_seqs` running, `max_num_batched_tokens` per step;
    `spec_max_num_seqs` caps a speculating server's running requests where its engine sets its own
    cap (SGLang's 48) and the user set none."""

    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS  # vLLM's default
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS  # vLLM V1's, online serving on large GPUs
    spec_max_num_seqs: int | None = None

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise CrossoverError("max_num_seqs and max_num_batched_tokens must be >= 1")
        if self.spec_max_num_seqs is not None and self.spec_max_num_seqs < 1:
            raise CrossoverError("spec_max_num_seqs must be >= 1")
        if self.max_num_seqs > MAX_NUM_SEQS:  # per-sequence arrays are sized by it
            raise CrossoverError(f"--max-num-seqs must be <= {MAX_NUM_SEQS} (got {self.max_num_seqs})")


    def seats(self, speculate: bool) -> int:
        """Running requests a server may hold, with or without speculation."""
        if speculate and self.spec_max_num_seqs is not None:
            return min(self.max_num_seqs, self.spec_max_num_seqs)
        return self.max_num_seqs

    @staticmethod
    def of(dep: Deployment, max_num_seqs: int | None = None,
           max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS) -> "EngineLimits":
        """The limits a server of this deployment runs with: `max_num_seqs` as given (both arms), or
        vLLM's default 256 with the engine's own cap on speculating arms (SGLang: 48)."""
        if max_num_seqs is not None:
            return EngineLimits(int(max_num_seqs), int(max_num_batched_tokens))
        return EngineLimits(max_num_batched_tokens=int(max_num_batched_tokens), spec_max_num_seqs=dep.engine.spec_max_running)


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
