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
           max_num_batched_tokens: int | None = None) -> "EngineLimits":
        """The limits a server of this deployment runs with: each as given, else the engine's default
        on this GPU (default_limits); `max_num_seqs` given sets both arms, else the engine's own cap
        applies to speculating arms (SGLang: 48)."""
        seqs, tokens = default_limits(dep, max_num_batched_tokens)
        # Each data-parallel rank schedules its own batch (vLLM 0.14.1 v1/engine/core.py DPEngineCoreProc; SGLang
        # one scheduler per rank): the engine runs n times each rank's limits. vLLM's --max-num-seqs is a rank's;
        # SGLang divides --max-running-requests (and its speculating default) over the ranks (0.5.5
        # managers/tp_worker.py), so what is given there is the engine's.
        n = dep.data_parallel
        given = n if dep.engine.framework == "vllm" else 1
        if n > 1 and max(seqs * n, (max_num_seqs or 0) * given) > MAX_NUM_SEQS:
            raise CrossoverError(f"{n} data-parallel ranks of {max_num_seqs or seqs} running sequences each exceed "
                                 f"{MAX_NUM_SEQS} in one engine; set a smaller --max-num-seqs or --dp")
        if max_num_seqs is not None:
            return EngineLimits(int(max_num_seqs) * given, tokens * n)
        cap = dep.engine.spec_max_running
        return EngineLimits(seqs * n, tokens * n, spec_max_num_seqs=None if cap is None else cap * given)


# vLLM's threshold for its large-GPU defaults (vllm/engine/arg_utils.py get_batch_defaults: device
# memory >= 70 GiB and no 'a100' in the device name)
LARGE_GPU_BYTES = 70 * 2**30


def large_gpu(dep: Deployment) -> bool:
    """Whether the deployment's GPU takes an engine's large-GPU scheduler defaults (>= 70 GiB, no A100)."""
    hw = dep.hardware
    return hw.memory_gb * 1e9 >= LARGE_GPU_BYTES and "a100" not in hw.name.lower()


def default_limits(dep: Deployment, max_num_batched_tokens: int | None = None) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) the deployment's engine runs with when the user sets
    neither (the token budget where only it is given): its profile's pair, or its large-GPU pair on a
    GPU of >= 70 GiB that is no A100; without chunked prefill the budget holds a whole prompt (at
    least the model's length: vLLM's rule), and the running sequences are at most the budget."""
    eng = dep.engine
    seqs, tokens = eng.large_gpu_limits if eng.large_gpu_limits is not None and large_gpu(dep) else (
        eng.max_num_seqs, eng.max_num_batched_tokens)
    if max_num_batched_tokens is not None:
        return min(seqs, int(max_num_batched_tokens)), int(max_num_batched_tokens)
    longest = dep.model.max_position_embeddings
    if not eng.chunked_prefill and eng.framework == "vllm" and longest is not None:  # (SGLang chunks anyway)
        tokens = max(tokens, int(longest))
    return min(seqs, tokens), tokens


def limits_note(dep: Deployment, given_seqs: bool, given_tokens: bool) -> str:
    """Where a run's scheduler limits come from, for the outputs: given, or the engine's default and why."""
    ranks = f"; each of the {dep.data_parallel} data-parallel ranks its own" if dep.data_parallel > 1 else ""
    if given_seqs and given_tokens:
        return "given" + ranks
    eng = dep.engine
    which = "large-GPU " if eng.large_gpu_limits is not None and large_gpu(dep) else ""
    what = " and ".join(n for n, g in (("max_num_seqs", given_seqs), ("max_num_batched_tokens", given_tokens)) if not g)
    extra = ("; without chunked prefill the budget holds the model's longest prompt"
             if not eng.chunked_prefill and eng.framework == "vllm" else "")
    return (f"{what}: {eng.display_name}'s {which}default on {dep.hardware.name} (engines/{eng.name}.yaml"
            f"{' large_gpu_limits' if which else ' max_num_seqs, max_num_batched_tokens'}){extra}; "
            f"--max-num-seqs / --max-num-batched-tokens set them{ranks}")


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
            f"{dep.model.name} weights do not fit on {dep.gpus} x {dep.hardware.name}; use a larger --tp or fp8 weights")
    return budget / per_token * dep.data_parallel  # each data-parallel rank its own cache


def seated(dep: Deployment, limits: "EngineLimits", k: int) -> Deployment:
    """The deployment as a server with these scheduler limits and k draft tokens (0: the server does not
    speculate) runs it: where the engine's CUDA-graph capture limit follows them (vLLM V0 and V1,
    specs/capture.py for_server), the limit it captures up to."""
    from ..specs.capture import for_server

    seats = limits.seats(k > 0)
    engine = for_server(dep.engine, seats, limits.max_num_batched_tokens, k)
    return dep if engine is dep.engine else dep.model_copy(update={"engine": engine})
