"""Engine profiles: what a serving engine adds around the kernels, pinned to an engine version.

A profile (engines/*.yaml, loaded by name like hardware) carries every per-step cost an engine adds
beyond the forward passes, each with its source: exposed host time per step, speculative
bookkeeping per step and per verifying sequence, the launch cost of each draft pass, how verify is
scored (one multi-query pass, or vLLM V0's batch expansion into k+1 single-query sequences that each
read the KV cache), the CUDA-graph capture limit beyond which a step runs eagerly, and the n-gram
proposer's CPU lookup, and the sampler's bytes per vocabulary entry on each sampling path the requests'
temperature, top-p and top-k select. `StepModel.price` applies them, in one place. YAML carries milliseconds and
microseconds; the properties give seconds.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ..defaults import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
from .frozen import Spec
from .sampling import Sampling, SamplingParams

Framework = Literal["vllm", "sglang", "trtllm", "hf"]
VerifyLayout = Literal["multi_query", "batch_expansion"]
GraphUnit = Literal["tokens", "sequences", "requests"]
CudaGraphs = Literal["full", "piecewise", "none"]
# Each engine's name for running without CUDA graphs, for the error and the config lines.
EAGER_FLAG = {"vllm": "--enforce-eager", "sglang": "--disable-cuda-graph", "trtllm": "cuda_graph_config: null",
              "hf": "(never captures)"}
# vLLM V1 keeps async scheduling for these only (VllmConfig.__post_init__, vllm/config/vllm.py 0.14.1 wheel).
ASYNC_SCHEDULING_METHODS = ("eagle", "eagle3", "mtp")
NgramMiss = Literal["bonus_only", "padded"]
# Where an MLA model's verify positions take the attention backend's prefill path (EngineProfile.mla_verify_prefill).
MlaVerifyPrefill = Literal["never", "always", "outside_hopper"]
DraftCatchUp = Literal["none", "first_pass", "extra_pass"]
CaptureRule = Literal["", "vllm-0.6.3", "vllm-0.10.1", "vllm-0.14.1"]


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
    # Host time per verified position per step (B x (k+1) of them): work the engine does for each
    # position it scores, beyond the per-request bookkeeping (vLLM V0 builds one sequence's metadata
    # per position for batch expansion). Grows with batch x verify width.
    spec_per_position_us: float = Field(default=0.0, ge=0)
    # The sampler's memory traffic over the vocabulary, in bytes per vocabulary entry, per sampling
    # path (greedy, random, top_k, top_p): [per sampled position of any step (logits cast to fp32,
    # sampled), per draft position a speculative step verifies (gathered, cast, copied, the path's
    # masks, softmax, argmax / rejection), per verifying request beyond its sampled position (the bonus
    # row's gather and copies)]. Priced at the achieved memory bandwidth of one GPU: it grows as
    # batch x (k+1) x vocab, and a path that sorts the vocabulary (top-p) costs several times greedy's.
    sampling_bytes_per_vocab: dict[Sampling, tuple[float, float, float]] = Field(
        default_factory=lambda: {"greedy": (0.0, 0.0, 0.0)})
    # The penalties' traffic per vocabulary entry [per sampled row, per verified draft row], added to
    # the path's where a request sets a repetition, frequency or presence penalty (bin counts of the
    # prompt and output tokens over the vocabulary, masks, the logits rewritten).
    penalty_bytes_per_vocab: tuple[float, float] = (0.0, 0.0)
    # The requests' sampling parameters in effect (EngineProfile.configured); they pick the path.
    sampling_params: SamplingParams = Field(default_factory=lambda: SamplingParams())
    # How a head-type draft (EAGLE, EAGLE-3, MTP: fed the target's hidden states) takes in the positions
    # the target just verified: in its first draft forward, which then runs over every verified position
    # with logits at one per request (vLLM V1), in an extra forward of its own (SGLang's draft extend),
    # or not at all (the draft forward sees only the last token).
    draft_catch_up: DraftCatchUp = "none"
    # Launch and host cost of each sequential draft forward.
    draft_pass_overhead_ms: float = Field(ge=0)
    # How verify is scored: one multi-query forward that reads each sequence's KV cache once, or
    # batch expansion (k+1 single-query sequences per request, each reading the KV cache).
    verify_layout: VerifyLayout = "multi_query"
    # CUDA-graph capture limit (0: the engine never captures graphs) and what it counts: target
    # tokens of the step, (expanded) sequences, or requests. A step beyond it runs eagerly.
    graph_capture_limit: int = Field(ge=0)
    graph_capture_unit: GraphUnit = "tokens"
    # The graph sizes the engine captures, ascending, in graph_capture_unit (None: every size up to the
    # limit, so no step pads). A step whose key falls between two captured sizes replays the next larger
    # graph: its padding rows run the linear layers and the LM head like real ones (their attention reads
    # no cache). spec_capture_sizes: the speculating server's list where the engine captures another.
    capture_sizes: tuple[int, ...] | None = None
    spec_capture_sizes: tuple[int, ...] | None = None
    # The speculating server's capture limit where the two servers' differ (set from each server's
    # scheduler limits and k, specs/capture.py for_servers; None: graph_capture_limit for both).
    spec_graph_capture_limit: int | None = Field(default=None, ge=0)
    # Where the engine sizes its capture limit from the GPU (specs/capture.py): rows [memory bound in GiB,
    # limit below 4 GPUs of TP, limit at 4 or more], the first row whose bound lies above the GPU's memory.
    graph_capture_by_memory: tuple[tuple[float, int, int], ...] | None = None
    # Where the engine sizes its capture limit from the server's scheduler limits (and k), the engine
    # version whose rule it follows (specs/capture.py for_server: vLLM V0's padded max_num_seqs, V1's
    # min(2 x max_num_seqs, 512) in 0.10, min(2 x max_num_seqs x (1 + k), 512) in 0.14); "": it does not.
    graph_capture_follows: CaptureRule = ""
    # Host launch time per layer of an eager forward: the step takes at least layers x this.
    eager_layer_us: float = Field(ge=0)
    # n-gram proposer: CPU lookup per sequence per step on the critical path, plus per token of the
    # context it searches where the lookup scans each sequence's whole history (vLLM V1's KMP), and
    # what a sequence without a match verifies (the bonus position only, or k padded positions).
    ngram_lookup_per_seq_us: float = Field(default=0.0, ge=0)
    ngram_lookup_per_token_ns: float = Field(default=0.0, ge=0)
    ngram_miss: NgramMiss = "bonus_only"
    # Host time per sequence of a ragged step (sequences with different query lengths: n-gram misses
    # beside matches, prompt chunks beside decodes) that the engine runs with attention outside the
    # full CUDA graph (vLLM V1's PIECEWISE mode).
    ragged_per_seq_us: float = Field(default=0.0, ge=0)
    # Whether uniform steps (pure decode, or verify at one width) replay a full CUDA graph with the
    # attention captured. False: every step runs its attention outside the graph (vLLM V1's PIECEWISE
    # default before 0.11) and pays ragged_per_seq_us per sequence, with speculation or without.
    full_graphs: bool = True
    # Share of the speculating server's uniform verify steps inside its capture limit that find no full
    # graph of their token count and run their attention outside it as a ragged step does (paying
    # ragged_per_seq_us per sequence): vLLM V1 rounds its spec capture sizes to multiples of 1 + k.
    spec_graph_miss: float = Field(default=0.0, ge=0, le=1)
    # Whether a step that carries prompt tokens replays a CUDA graph (vLLM V1's PIECEWISE graphs take
    # prefill and mixed steps). False: the engine captures decode steps only and runs a step with prompt
    # tokens eagerly, so it takes at least its layers' launch time (eager_layer_us), the draft's too.
    prefill_graphs: bool = True
    # Whether a step prefills prompt chunks beside decodes (chunked prefill). Without it a step with
    # prompts to prefill is a prefill-only step: running sequences wait and nothing speculates.
    chunked_prefill: bool = True
    # Where the engine's default MLA attention backend takes one query token per request, so that an MLA
    # model's (DeepSeek's) verify positions run MLA's prefill path: every verifying request's context
    # gathered from the latent cache and up-projected by kv_b_proj at every layer of every step, and the
    # speculating server downgraded to PIECEWISE graphs. "always", "outside_hopper" (every GPU but
    # compute capability 9.x, where vLLM 0.14 runs FlashAttention MLA) or "never" (the backend scores the
    # k+1 query tokens of a request as a decode).
    mla_verify_prefill: MlaVerifyPrefill = "never"
    # Host time per running sequence and per step (scheduling, input preparation, output processing), and
    # whether the engine schedules the next step while the GPU runs this one (vLLM V1's async scheduling,
    # SGLang's and TensorRT-LLM's overlap scheduler), so that the GPU waits only for the excess; a method
    # outside async_methods turns that off when speculating.
    host_per_seq_us: float = Field(default=0.0, ge=0)
    host_per_step_us: float = Field(default=0.0, ge=0)
    async_scheduling: bool = False
    async_methods: tuple[str, ...] = ASYNC_SCHEDULING_METHODS
    async_methods_given: tuple[str, ...] | None = None  # async_methods where the user turns it on (SGLang's spec v2)
    kv_dtypes: tuple[str, ...] | None = None  # the KV-cache dtypes its --kv-cache-dtype stores (None: not checked)
    # The running-request cap the engine sets for itself when speculation is on and the user set
    # none (SGLang: 48); None: the same cap as without speculation.
    spec_max_running: int | None = Field(default=None, ge=1)
    # The scheduler limits the engine picks when the user sets neither: running sequences and tokens
    # per step, and (large_gpu_limits) the pair it picks instead on a GPU of at least 70 GiB that is no
    # A100 (vLLM's get_batch_defaults for its API server). Without chunked prefill a step's budget is
    # at least the model's length (a whole prompt). serving/engine.py default_limits applies them.
    max_num_seqs: int = Field(default=DEFAULT_MAX_NUM_SEQS, ge=1)
    max_num_batched_tokens: int = Field(default=DEFAULT_MAX_NUM_BATCHED_TOKENS, ge=1)
    large_gpu_limits: tuple[int, int] | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""
    # What the user set on the engine's command line (cuda_graphs, chunked_prefill), as given: the
    # profile's fields above already hold its effect (EngineProfile.configured).
    settings: dict[str, str] = Field(default_factory=dict)
    # The speculating server's CUDA-graph mode where the user set it apart from the other's (None: the
    # same): engines take the setting per server, and speculation is where it tends to differ.
    spec_cuda_graphs: CudaGraphs | None = None
    _speculating: "EngineProfile | None" = PrivateAttr(default=None)  # the speculating server's profile

    @model_validator(mode="before")
    @classmethod
    def _greedy_pair(cls, data):
        """A profile written before the sampling paths (sampler_bytes_per_vocab and
        verify_bytes_per_vocab, the greedy path's figures) reads as that greedy row."""
        if isinstance(data, dict) and ("sampler_bytes_per_vocab" in data or "verify_bytes_per_vocab" in data):
            if "sampling_bytes_per_vocab" in data:
                raise ValueError("give sampling_bytes_per_vocab or the older sampler_bytes_per_vocab / "
                                 "verify_bytes_per_vocab pair, not both")
            data = dict(data)
            pair = (data.pop("sampler_bytes_per_vocab", 0.0), data.pop("verify_bytes_per_vocab", 0.0))
            data["sampling_bytes_per_vocab"] = {"greedy": (*pair, 0.0)}
        return data

    @field_validator("sampling_bytes_per_vocab")
    @classmethod
    def _sampling_table(cls, v):
        if "greedy" not in v:
            raise ValueError("sampling_bytes_per_vocab lists the greedy path at least")
        if any(x < 0 for row in v.values() for x in row):
            raise ValueError("sampling_bytes_per_vocab holds bytes >= 0")
        return v

    @property
    def sampling(self) -> Sampling:
        """The sampler's path in effect (greedy, random, top_k, top_p)."""
        return self.sampling_params.path

    @property
    def sampler_bytes_per_vocab(self) -> float:
        """Sampler traffic per vocabulary entry of each sampled position, on the path in effect."""
        return self.sampling_bytes_per_vocab[self.sampling][0] + self._penalties(0)

    @property
    def verify_bytes_per_vocab(self) -> float:
        """Rejection-sampler traffic per vocabulary entry of each verified draft position."""
        return self.sampling_bytes_per_vocab[self.sampling][1] + self._penalties(1)

    def _penalties(self, row: int) -> float:
        return self.penalty_bytes_per_vocab[row] if self.sampling_params.penalized else 0.0

    @property
    def bonus_bytes_per_vocab(self) -> float:
        """Traffic per vocabulary entry of each verifying request's bonus row beyond a sampled row's."""
        return self.sampling_bytes_per_vocab[self.sampling][2]

    @field_validator("capture_sizes", "spec_capture_sizes")
    @classmethod
    def _ascending(cls, v):
        if v is not None and (not v or any(x < 1 for x in v) or list(v) != sorted(set(v))):
            raise ValueError("capture sizes are distinct positive integers in ascending order")
        return v

    def graph_miss(self, speculating: bool) -> float:
        """The share of this server's uniform steps inside its capture limit that miss a full graph and run
        attention outside it (spec_graph_miss for the speculating server's verify steps; 0 without full graphs,
        where every step runs it outside anyway, and for a plain decode)."""
        return self.spec_graph_miss if speculating and self.full_graphs else 0.0

    def capture_limit(self, speculating: bool) -> int:
        """The largest step the (speculating) server replays as a graph: the largest size it captures at
        or below graph_capture_limit where the profile's list reaches that far (the engines drop the
        others); the limit itself above the list (no padding priced there)."""
        sizes = self.captured(speculating) or ()
        kept = [s for s in sizes if s <= self.graph_capture_limit]
        return kept[-1] if kept and self.graph_capture_limit <= sizes[-1] else self.graph_capture_limit

    def captured(self, speculating: bool) -> tuple[int, ...] | None:
        """The graph sizes the (speculating) server captures (None: not listed, no padding priced)."""
        return self.spec_capture_sizes if speculating and self.spec_capture_sizes is not None else self.capture_sizes

    def padded_key(self, key: np.ndarray, speculating: bool) -> np.ndarray:
        """The captured graph size a step of graph key `key` replays (the next captured size at or
        above it; the key itself beyond the largest listed size or where the engine lists none)."""
        sizes = self.captured(speculating)
        if sizes is None:
            return key
        grid = np.asarray(sizes, float)
        i = np.searchsorted(grid, key, side="left")
        return np.where(i < grid.size, grid[np.minimum(i, grid.size - 1)], key)

    @property
    def speculating(self) -> "EngineProfile":
        """This engine as the speculating server runs it (its own CUDA-graph mode where one is set)."""
        if self.spec_cuda_graphs is None and self.spec_graph_capture_limit is None:
            return self
        spec = self.__pydantic_private__.get("_speculating")  # derived once per profile, on first use
        if spec is None:
            limit = self.spec_graph_capture_limit
            spec = self.model_copy(update={"spec_cuda_graphs": None, "spec_graph_capture_limit": None,
                                           **({} if limit is None else {"graph_capture_limit": limit})})
            if self.spec_cuda_graphs is not None:
                spec = spec.configured(self.spec_cuda_graphs)
            self.__pydantic_private__["_speculating"] = spec
        return spec

    def configured(self, cuda_graphs: CudaGraphs | None = None, chunked_prefill: bool | None = None,
                   spec_cuda_graphs: CudaGraphs | None = None,
                   sampling: SamplingParams | None = None,
                   mla_verify_prefill: MlaVerifyPrefill | None = None,
                   cuda_graph_max: int | None = None, async_scheduling: bool | None = None) -> "EngineProfile":
        """This engine as the user configured it (None: the engine's default).

        cuda_graphs: 'full' (uniform decode and verify steps replay a full graph with attention
        captured), 'piecewise' (vLLM V1's PIECEWISE mode: attention runs outside the graph every step
        and pays ragged_per_seq_us per sequence), 'none' (--enforce-eager / --disable-cuda-graph: no
        step is captured, every forward takes at least its layers' launch time; vLLM V0 then scores
        drafts with its multi-query scorer, not batch expansion: vllm/spec_decode/spec_decode_worker.py,
        0.6.3). chunked_prefill: whether prompt chunks ride along with decodes. sampling: the
        requests' temperature, top-p and top-k, which pick the sampler's path (its bytes per
        vocabulary entry: sampling_bytes_per_vocab). mla_verify_prefill: where an MLA model's verify
        positions take the attention backend's prefill path, as the backend the server runs (vLLM's
        --attention-backend) decides it. cuda_graph_max: the largest graph captured, in the engine's graph
        unit (vLLM's --max-cudagraph-capture-size, SGLang's --cuda-graph-max-bs), for both servers.
        async_scheduling: whether the engine schedules the next step while the GPU runs this one, hiding
        its host work under the GPU: vLLM V1's --[no-]async-scheduling, SGLang's and TensorRT-LLM's overlap
        scheduler (off: --disable-overlap-schedule, disable_overlap_scheduler; SGLang on: spec v2 keeps it
        while speculating, as 0.5.11+ do for EAGLE-type and standalone drafts and 0.5.14+ for n-gram)."""
        from ..errors import InputError

        update: dict = {}
        settings = dict(self.settings)
        if cuda_graphs is not None:
            if cuda_graphs not in ("full", "piecewise", "none"):
                raise InputError(f"cuda graphs (--cuda-graphs) is full, piecewise or none (got {cuda_graphs!r})",
                                 parameter="cuda_graphs")
            if cuda_graphs == "piecewise" and not self.vllm_v1:
                raise InputError(f"piecewise CUDA graphs are vLLM V1's mode; {self.label} captures whole "
                                 f"forwards or none (--cuda-graphs full or none)", parameter="cuda_graphs")
            if cuda_graphs == "none":
                update.update(graph_capture_limit=0, full_graphs=False)
                if self.verify_layout == "batch_expansion":
                    update["verify_layout"] = "multi_query"
            elif self.graph_capture_limit == 0:
                raise InputError(f"{self.label} never captures CUDA graphs (its profile's graph_capture_limit "
                                 f"is 0): --cuda-graphs {cuda_graphs} is no setting it has", parameter="cuda_graphs")
            else:
                update["full_graphs"] = cuda_graphs == "full"
            settings["cuda_graphs"] = cuda_graphs
        if chunked_prefill is not None:
            update["chunked_prefill"] = bool(chunked_prefill)
            settings["chunked_prefill"] = "on" if chunked_prefill else "off"
        if sampling is not None:
            path = sampling.path
            if path not in self.sampling_bytes_per_vocab:
                raise InputError(f"the {self.label} profile gives no sampler figures for the {path} path "
                                 f"({sampling.said}); its sampling_bytes_per_vocab lists "
                                 f"{', '.join(self.sampling_bytes_per_vocab)}", parameter="temperature")
            update["sampling_params"] = sampling
            settings["sampling"] = sampling.said
        if mla_verify_prefill is not None:
            if mla_verify_prefill not in get_args(MlaVerifyPrefill):
                raise InputError(f"mla_verify_prefill is never, always or outside_hopper (got {mla_verify_prefill!r})",
                                 parameter="mla_verify_prefill")
            update["mla_verify_prefill"] = mla_verify_prefill
            settings["mla_verify_prefill"] = mla_verify_prefill
        if cuda_graph_max is not None:
            if isinstance(cuda_graph_max, bool) or not isinstance(cuda_graph_max, int) or cuda_graph_max < 1:
                raise InputError(f"the CUDA-graph capture limit (--cuda-graph-max) is a whole number >= 1 "
                                 f"{self.graph_capture_unit} (got {cuda_graph_max!r})", parameter="cuda_graph_max")
            if update.get("graph_capture_limit", self.graph_capture_limit) == 0:
                raise InputError(f"--cuda-graph-max {cuda_graph_max} with no CUDA graphs ({self.label} "
                                 f"{'as configured ' if cuda_graphs else ''}captures none)", parameter="cuda_graph_max")
            update["graph_capture_limit"] = cuda_graph_max
            settings["cuda_graph_max"] = str(cuda_graph_max)
        if async_scheduling is not None:
            if not self.overlap_settable:
                raise InputError(f"async scheduling (--async-scheduling) is vLLM V1's setting (0.10 and later) and "
                                 f"SGLang's and TensorRT-LLM's overlap scheduler; {self.label} has none",
                                 parameter="async_scheduling")
            update["async_scheduling"] = bool(async_scheduling)
            if async_scheduling and self.async_methods_given is not None:
                update["async_methods"] = self.async_methods_given
            settings["async_scheduling"] = "on" if async_scheduling else "off"
        if spec_cuda_graphs is not None:
            self.model_copy(update=update).configured(spec_cuda_graphs)  # refused as for both servers
            update["spec_cuda_graphs"] = spec_cuda_graphs
            settings["cuda_graphs_speculating"] = spec_cuda_graphs
        if not update and settings == self.settings:
            return self
        return self.model_copy(update={**update, "settings": settings})

    def mla_prefills_on(self, hardware) -> bool:
        """Whether an MLA model's verify positions take the prefill path on this GPU (mla_verify_prefill)."""
        if self.mla_verify_prefill == "outside_hopper":
            return hardware.capability_major != 9
        return self.mla_verify_prefill == "always"

    def mla_graphs_never_on(self, hardware) -> bool:
        """Whether an MLA model runs this engine's Triton MLA backend on this GPU, which captures no full
        graphs: vLLM 0.14.1's default outside compute capability 9.x (FlashAttention MLA) and 10.x
        (CUTLASS MLA), on ROCm too (platforms/cuda.py, rocm.py); its MLACommonMetadataBuilder keeps the
        builder default AttentionCGSupport.NEVER, so gpu_model_runner.py's cudagraph-mode resolution
        makes FULL_AND_PIECEWISE PIECEWISE for every step, with speculation or without. A backend given as
        taking the prefill path (--mla-verify prefill) is CUTLASS MLA on 10.x and Triton MLA elsewhere. The
        backends of 0.14.1 (graph_capture_follows); 0.10 runs every step PIECEWISE anyway."""
        if self.graph_capture_follows != "vllm-0.14.1":
            return False
        major = hardware.capability_major if hardware.vendor == "nvidia" else None
        if self.mla_verify_prefill == "always":
            return major != 10
        if self.mla_verify_prefill != "outside_hopper":
            return False
        return major not in (9, 10) if hardware.vendor == "nvidia" else hardware.vendor == "amd"

    @property
    def cuda_graphs(self) -> str:
        """The CUDA-graph mode in effect: full, piecewise or none."""
        if self.graph_capture_limit == 0:
            return "none"
        return "full" if self.full_graphs else "piecewise"

    step_overhead_s = property(lambda self: self.step_overhead_ms / 1e3)
    spec_step_overhead_s = property(lambda self: self.spec_step_overhead_ms / 1e3)
    spec_per_seq_s = property(lambda self: self.spec_per_seq_us / 1e6)
    spec_per_position_s = property(lambda self: self.spec_per_position_us / 1e6)
    draft_pass_overhead_s = property(lambda self: self.draft_pass_overhead_ms / 1e3)
    eager_layer_s = property(lambda self: self.eager_layer_us / 1e6)
    ngram_lookup_per_seq_s = property(lambda self: self.ngram_lookup_per_seq_us / 1e6)
    ngram_lookup_per_token_s = property(lambda self: self.ngram_lookup_per_token_ns / 1e9)
    ragged_per_seq_s = property(lambda self: self.ragged_per_seq_us / 1e6)
    host_per_seq_s = property(lambda self: self.host_per_seq_us * 1e-6)
    host_per_step_s = property(lambda self: self.host_per_step_us * 1e-6)
    # vLLM V1 (0.10 on), whose graphs are keyed on tokens; V0's on (expanded) sequences, eager or not
    vllm_v1 = property(lambda self: self.framework == "vllm" and self.graph_capture_unit == "tokens")
    # an engine with a CPU/GPU-overlap setting (--async-scheduling): vLLM V1's, SGLang's, TensorRT-LLM's
    overlap_settable = property(lambda self: self.vllm_v1 or self.framework in ("sglang", "trtllm"))

    def overlaps(self, method: str | None) -> bool:
        """Whether this server overlaps its host work with the GPU: with async scheduling on, without
        speculation (method None) or with a method that keeps it (async_methods)."""
        return self.async_scheduling and (method is None or method in self.async_methods)

    @property
    def label(self) -> str:
        """How outputs name it: display name and version (the settings in effect are their own fields)."""
        return f"{self.display_name} {self.version}"

