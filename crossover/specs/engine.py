"""Engine profiles: what a serving engine adds around the kernels, pinned to an engine version.

A profile (engines/*.yaml, loaded by name like hardware) carries every per-step cost an engine adds
beyond the forward passes, each with its source: exposed host time per step, speculative
bookkeeping per step and per verifying sequence, the launch cost of each draft pass, how verify is
scored (one multi-query pass, or vLLM V0's batch expansion into k+1 single-query sequences that each
read the KV cache), the CUDA-graph capture limit beyond which a step runs eagerly, and the n-gram
proposer's CPU lookup. `StepModel.price` applies them, in one place. YAML carries milliseconds and
microseconds; the properties give seconds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from .frozen import Spec

Framework = Literal["vllm", "sglang", "trtllm", "hf"]
VerifyLayout = Literal["multi_query", "batch_expansion"]
GraphUnit = Literal["tokens", "sequences", "requests"]
NgramMiss = Literal["bonus_only", "padded"]



class EngineProfile(Spec):
    """One engine at one version (engines/<name>.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    display_name: str
    framework: Framework  # whose measured kernel tables apply (crossover[kernels])
    version: str  # the engine version the values describe
    # Host time per engine step that the GPU waits for (scheduling, input preparation, sampling not
    # hidden by overlap).
    step_overhead_ms: float = Field(ge=0)
    # Extra per speculative step: rejection sampling, proposal bookkeeping, overlap the engine loses.
    spec_step_overhead_ms: float = Field(ge=0)
    # Extra per verifying sequence per step (bookkeeping that scales with the batch).
    spec_per_seq_us: float = Field(ge=0)
    # Launch and host cost of each sequential draft forward.
    draft_pass_overhead_ms: float = Field(ge=0)
    # How verify is scored: one multi-query forward that reads each sequence's KV cache once, or
    # batch expansion (k+1 single-query sequences per request, each reading the KV cache).
    verify_layout: VerifyLayout = "multi_query"
    # CUDA-graph capture limit (0: the engine never captures graphs) and what it counts: target
    # tokens of the step, (expanded) sequences, or requests. A step beyond it runs eagerly.
    graph_capture_limit: int = Field(ge=0)
    graph_capture_unit: GraphUnit = "tokens"
    # Host launch time per layer of an eager forward: the step takes at least layers x this.
    eager_layer_us: float = Field(ge=0)
    # n-gram proposer: CPU lookup per sequence per step on the critical path, and what a sequence
    # without a match verifies (the bonus position only, or k padded positions).
    ngram_lookup_per_seq_us: float = Field(default=0.0, ge=0)
    ngram_miss: NgramMiss = "bonus_only"
    # Host time per sequence of a ragged step (sequences with different query lengths: n-gram misses
    # beside matches, prompt chunks beside decodes) that the engine runs with attention outside the
    # full CUDA graph (vLLM V1's PIECEWISE mode).
    ragged_per_seq_us: float = Field(default=0.0, ge=0)
    # Whether uniform steps (pure decode, or verify at one width) replay a full CUDA graph with the
    # attention captured. False: every step runs its attention outside the graph (vLLM V1's PIECEWISE
    # default before 0.11) and pays ragged_per_seq_us per sequence, with speculation or without.
    full_graphs: bool = True
    # Whether a step prefills prompt chunks beside decodes (chunked prefill). Without it a step with
    # prompts to prefill is a prefill-only step: running sequences wait and nothing speculates.
    chunked_prefill: bool = True
    # The running-request cap the engine sets for itself when speculation is on and the user set
    # none (SGLang: 48); None: the same cap as without speculation.
    spec_max_running: int | None = Field(default=None, ge=1)
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""

    @property
    def step_overhead_s(self) -> float:
        return self.step_overhead_ms / 1e3

    @property
    def spec_step_overhead_s(self) -> float:
        return self.spec_step_overhead_ms / 1e3

    @property
    def spec_per_seq_s(self) -> float:
        return self.spec_per_seq_us / 1e6

    @property
    def draft_pass_overhead_s(self) -> float:
        return self.draft_pass_overhead_ms / 1e3

    @property
    def eager_layer_s(self) -> float:
        return self.eager_layer_us / 1e6

    @property
    def ngram_lookup_per_seq_s(self) -> float:
        return self.ngram_lookup_per_seq_us / 1e6

    @property
    def ragged_per_seq_s(self) -> float:
        return self.ragged_per_seq_us / 1e6

    @property
    def label(self) -> str:
        """How outputs name it: display name and version."""
        return f"{self.display_name} {self.version}"
