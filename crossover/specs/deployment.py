"""A deployment: a model on `tp` accelerators with dtypes, and the efficiency and overhead dials. Every default
names its source; `crossover calibrate` fits them to a sweep; pure roofline is `Efficiency.speed_of_light()`."""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import ConfigDict, Field, PositiveInt, PrivateAttr, model_validator

from ..errors import CrossoverError
from ..units import COMPUTE_DTYPE, DTYPE_BYTES
from .capture import on_gpu
from .frozen import Spec
from ..defaults import DEFAULT_ENGINE
from .engine import EngineProfile
from .hardware import Hardware
from .loader import load_engine
from .model import Model

Transition = Literal["smooth", "max", "sum"]

# Fractions of peak used when neither the deployment nor the hardware spec gives one.
# Weight streaming: gpt-fast measured ~1700 of 2039 GB/s (0.83) as the A100-80GB's empirical peak
# and Llama-2-7B bf16 decode at 1397 GB/s (0.69); Nsight on an H100 70B decode shows weight loads
# at 78-84% of peak (github.com/pytorch-labs/gpt-fast README; mikamirai.com/blog/gpu-memory-bandwidth).
DEFAULT_BANDWIDTH_FRACTION = 0.80
# Dense GEMM: the lower end of NVIDIA's best-shape bf16 matmul rates (Maximum Achievable Matmul
# FLOPS: H100 80.3%, B200 77.6%, GB200 72.9% of the dense peak; github.com/stas00/ml-engineering
# compute/accelerator/README.md). AMD parts sit lower (51-63%) and carry their own figure.
DEFAULT_FLOPS_FRACTION = 0.75
# The smallest achieved fraction of peak a deployment may claim: below it a step of a few GB takes
# minutes (and at 1e-320 an infinite time), which no engine measures; what-ifs stay far above it.
MIN_FRACTION = 1e-3


# Efficiency fields whose None means "the engine profile's value" (Deployment has a property of the
# same name giving the value in effect).
ENGINE_OVERHEADS = ("step_overhead_s", "spec_overhead_s", "spec_overhead_per_seq_s", "spec_per_position_s",
                    "draft_step_overhead_s", "eager_layer_s", "ngram_lookup_per_seq_s", "ngram_lookup_per_token_s",
                    "ragged_per_seq_s", "host_per_seq_s", "host_per_step_s", "sampler_bytes_per_vocab", "verify_bytes_per_vocab", "bonus_bytes_per_vocab")


class Efficiency(Spec):
    """Achieved fractions of peak and fixed overheads (seconds). None means 'the hardware's figure'.
    Every value is finite (no inf or NaN), and fractions lie in [MIN_FRACTION, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # Achieved fraction of peak memory bandwidth for weight streaming. None = the hardware's
    # achieved_bandwidth_fraction, else DEFAULT_BANDWIDTH_FRACTION (sources there).
    bandwidth_fraction: float | None = Field(default=None, ge=MIN_FRACTION, le=1)
    # Paged KV-cache reads in decode attention run below weight streaming (Nsight on an H100 70B
    # decode: 42% vs 78-84%, mikamirai.com/blog/gpu-memory-bandwidth; MagicDec's H100 tables,
    # arXiv:2408.11049, ~0.88 at 32K); None = same as bandwidth_fraction.
    kv_bandwidth_fraction: float | None = Field(default=None, ge=MIN_FRACTION, le=1)
    # Dense GEMM reaches the best-shape matmul fraction at most. None = the hardware's
    # achieved_flops_fraction, else DEFAULT_FLOPS_FRACTION (sources there).
    flops_fraction: float | None = Field(default=None, ge=MIN_FRACTION, le=1)
    # Ring collectives reach ~0.80 of the unidirectional link rate: 8x H200 ring all-reduce bus
    # bandwidth 80-82% of 450 GB/s, 8x A100 235 of 300 GB/s (github.com/stas00/ml-engineering
    # network/README.md); H100 NVLink p2p ~380 of 450 GB/s (github.com/NVIDIA/nccl/issues/1264).
    interconnect_fraction: float = Field(default=0.80, ge=MIN_FRACTION, le=1)
    # A small all-reduce costs base + 2 (tp - 1) ring steps x the hardware's hop latency (NCCL's
    # latency model: a per-call base plus per-hop terms). With 2 us per NVLink hop, TP 8 gives
    # ~33 us per all-reduce: MagicDec's 8xH100 decode tables (arXiv:2408.11049) imply ~2.7 ms of
    # fixed time per forward for 64 all-reduces and 32 layers. Derived default, a calibration parameter.
    allreduce_base_latency_s: float = Field(default=5e-6, ge=0)
    # None = the hardware's hop latency (Hardware.allreduce_hop_latency_s); 0 disables it.
    allreduce_hop_latency_s: float | None = Field(default=None, ge=0)
    # Kernel gaps inside a CUDA-graphed forward: ~10 kernels per layer x ~1.5 us each. Derived.
    layer_overhead_s: float = Field(default=15e-6, ge=0)
    # Of layer_overhead_s, the per-call kernel floors a hardware's distilled parameters add (0: none).
    # The kernels cost mode leaves them out: its measured kernel times already hold them.
    kernel_floors_s: float = Field(default=0.0, ge=0)
    # Engine overheads around the kernels (seconds). None = the engine profile's value
    # (engines/*.yaml, each with its source); set here by flags, calibration or speed_of_light.
    step_overhead_s: float | None = Field(default=None, ge=0)
    spec_overhead_s: float | None = Field(default=None, ge=0)
    spec_overhead_per_seq_s: float | None = Field(default=None, ge=0)
    spec_per_position_s: float | None = Field(default=None, ge=0)  # host per verified position
    # The sampler's fp32 traffic per vocabulary entry (per sampled position, per verified draft position,
    # per verifying request's bonus row beyond a sampled one), on the sampling path in effect
    sampler_bytes_per_vocab: float | None = Field(default=None, ge=0)
    verify_bytes_per_vocab: float | None = Field(default=None, ge=0)
    bonus_bytes_per_vocab: float | None = Field(default=None, ge=0)
    draft_step_overhead_s: float | None = Field(default=None, ge=0)
    eager_layer_s: float | None = Field(default=None, ge=0)  # launch floor per layer of an eager forward
    ngram_lookup_per_seq_s: float | None = Field(default=None, ge=0)  # n-gram proposer CPU per sequence
    ngram_lookup_per_token_s: float | None = Field(default=None, ge=0)  # and per context token it searches
    ragged_per_seq_s: float | None = Field(default=None, ge=0)  # per sequence of a ragged (piecewise) step
    host_per_seq_s: float | None = Field(default=None, ge=0)  # the engine's host work per running sequence
    host_per_step_s: float | None = Field(default=None, ge=0)  # and per step, beside it
    # An MLA model's verify tokens through the attention backend's prefill path. None: as the engine's
    # default MLA backend runs them on this GPU (EngineProfile.mla_verify_prefill); the bound: never.
    mla_verify_prefill: bool | None = None
    # Take the hardware's kernel-table-distilled parameters (Hardware.distilled) for the dials not set.
    distilled: bool = True
    # The fields the deployment's GPU's distilled parameters set (Deployment._distilled): not the user's,
    # so the deployment moved to another GPU (Deployment.on_hardware) drops them. Not an input.
    distilled_fields: tuple[str, ...] = Field(default=(), exclude=True, repr=False)
    # How op time moves from memory- to compute-bound; see roofline.combine for why 'smooth'.
    transition: Transition = "smooth"
    transition_p: float = Field(default=1.5, ge=1.0)

    @classmethod
    def speed_of_light(cls) -> "Efficiency":
        """100% of peak, no overheads, a hard max: the physical bound."""
        return cls(
            bandwidth_fraction=1.0, kv_bandwidth_fraction=1.0, flops_fraction=1.0, interconnect_fraction=1.0,
            allreduce_base_latency_s=0.0, allreduce_hop_latency_s=0.0, layer_overhead_s=0.0, step_overhead_s=0.0, spec_overhead_s=0.0,
            draft_step_overhead_s=0.0, spec_overhead_per_seq_s=0.0, eager_layer_s=0.0, ngram_lookup_per_seq_s=0.0,
            ngram_lookup_per_token_s=0.0, ragged_per_seq_s=0.0, host_per_seq_s=0.0, host_per_step_s=0.0, spec_per_position_s=0.0, sampler_bytes_per_vocab=0.0,
            verify_bytes_per_vocab=0.0, bonus_bytes_per_vocab=0.0, mla_verify_prefill=False, transition="max",
        )


@functools.lru_cache(maxsize=1)
def default_engine() -> EngineProfile:
    """The default engine profile (engines/vllm.yaml), read once per process: building a Deployment
    without an engine reads no file. Profiles are frozen, so every Deployment may share it."""
    return load_engine(DEFAULT_ENGINE)


class Deployment(Spec):
    """A model served on `tp` accelerators of one kind."""

    model: Model
    hardware: Hardware
    tp: PositiveInt = 1
    weight_dtype: str | None = None  # None = the model's native dtype
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    memory_utilization: float = Field(default=0.90, gt=0, le=1)  # vLLM's gpu_memory_utilization default
    # Routed experts split whole across the TP group (vLLM --enable-expert-parallel) instead of
    # every expert sharded over it: the step then waits for the GPU holding the most touched experts.
    expert_parallel: bool = False
    # Data parallelism (vLLM --data-parallel-size, SGLang --dp-size with --enable-dp-attention): this many
    # ranks of `tp` GPUs each, every rank with its own scheduler, running batch and KV cache, the load balanced
    # over them. A MoE model's ranks step in lockstep and its MoE layers run over all tp x data_parallel GPUs
    # on every rank's tokens (vLLM 0.14.1 fused_moe/config.py FusedMoEParallelConfig.make flattens TP across
    # DP); a dense model's are replicas.
    data_parallel: PositiveInt = 1
    efficiency: Efficiency = Field(default_factory=Efficiency)
    # What the serving engine adds around the kernels (engines/*.yaml) and how a forward's seconds
    # are found: "roofline" (analytical) or "kernels" (measured tables, crossover[kernels]).
    engine: EngineProfile = Field(default_factory=lambda: default_engine())
    cost: str = "roofline"
    # speculating_engine, derived once per engine (keyed by it: a copy with another engine derives its own)
    _spec_engine: tuple | None = PrivateAttr(default=None)

    @property
    def gpus(self) -> int:
        """GPUs of one engine: its attention ranks' tensor-parallel groups."""
        return self.tp * self.data_parallel

    @property
    def mla_verify_prefill(self) -> bool:
        """Whether the verify positions take MLA's prefill path here: an MLA model on a GPU where the
        engine's default MLA backend takes one query token per request (EngineProfile.mla_verify_prefill)."""
        if self.model.mla is None:
            return False
        said = self.efficiency.mla_verify_prefill
        return self.engine.mla_prefills_on(self.hardware) if said is None else said

    @property
    def speculating_engine(self) -> EngineProfile:
        """The engine as the speculating server runs it on this deployment: its own CUDA-graph mode, and
        PIECEWISE graphs where MLA verify takes the prefill path (vLLM 0.14.1 gpu_model_runner.py: a
        backend that captures single-token decodes only sets cudagraph_mode=PIECEWISE under spec decode)."""
        cached = self._spec_engine
        key = (self.engine, self.hardware, self.model, self.efficiency)
        if cached is not None and all(a is b for a, b in zip(cached[0], key)):
            return cached[1]
        eng = self.engine.speculating
        if self.mla_graph_fallback:
            eng = eng.model_copy(update={"full_graphs": False})
        self._spec_engine = (key, eng)
        return eng

    @property
    def mla_graph_fallback(self) -> bool:
        """vLLM V1 runs the speculating server PIECEWISE where full graphs were set (given or default) and
        the MLA verify takes the prefill path: the backend captures single-token decodes only (0.14.1
        gpu_model_runner.py, with a warning; a given FULL too). The other engines have no piecewise mode."""
        eng = self.engine.speculating
        return bool(self.mla_verify_prefill and eng.vllm_v1 and eng.full_graphs and eng.graph_capture_limit)

    @model_validator(mode="after")
    def _distilled(self) -> "Deployment":
        """The hardware's parameters distilled from measured kernel tables (Hardware.distilled, written
        by validation/distill_kernels.py with their source) stand in for the generic defaults of every
        efficiency dial the deployment does not set itself (Efficiency.distilled = False: off)."""
        eff, dist = self.efficiency, self.hardware.distilled
        if dist is None or not eff.distilled:
            return self
        # Per GPU, as the kernel tables' calls: the query heads and the KV heads it holds (ops.kv_share's
        # replication below one per GPU). MLA attends in its latent space, a KV cache every head shares: no
        # relayout whatever its nominal KV heads (the kernels mode prices its attention without one).
        m = self.model
        heads, kv_heads = m.num_attention_heads / self.tp, max(m.num_key_value_heads / self.tp, 1.0)
        fields = dist.efficiency_fields(eff.layer_overhead_s, gqa=m.mla is None and heads > kv_heads > 1)
        # The transition exponent stays the model's: chosen on the published speedups that isolate the
        # knee (roofline.py); the op-level fit's sharper knee (p ~2) made those worse.
        update = {k: v for k, v in fields.items() if k not in eff.model_fields_set and k != "transition_p"}
        if "layer_overhead_s" in update:
            update["kernel_floors_s"] = update["layer_overhead_s"] - eff.layer_overhead_s
        if update:  # the applied fields count as set, so a copy or re-validation applies nothing twice
            update["distilled_fields"] = tuple(update)
            object.__setattr__(self, "efficiency", eff.model_copy(update=update))
        return self

    def on_hardware(self, hardware: Hardware) -> "Deployment":
        """This deployment on another GPU, validated afresh: the efficiency without the first GPU's
        distilled values (the new one's apply), the engine without the graphs its MLA backend cost there
        (the capture limit follows the new GPU where the engine sizes it so: _graphs_on_gpu)."""
        eff, eng = self.efficiency, self.engine
        if eff.distilled_fields:
            eff = Efficiency(**{k: getattr(eff, k) for k in eff.model_fields_set
                                if k not in eff.distilled_fields and k != "distilled_fields"})
        if self.mla_triton and eng.settings.get("cuda_graphs") != "piecewise":
            eng = eng.model_copy(update={"full_graphs": True})
        return type(self)(**{**dict(self), "hardware": hardware, "efficiency": eff, "engine": eng})

    @model_validator(mode="after")
    def _graphs_on_gpu(self) -> "Deployment":
        """The engine's CUDA-graph capture limit where it sizes it from this GPU and TP size (SGLang)."""
        object.__setattr__(self, "engine", on_gpu(self.engine, self.hardware, self.gpus))
        return self

    @property
    def mla_triton(self) -> bool:
        """An MLA model on a backend with no full graphs here (EngineProfile.mla_graphs_never_on; not the bound)."""
        return (self.model.mla is not None and self.engine.graph_capture_limit > 0
                and self.efficiency.mla_verify_prefill is not False and self.engine.mla_graphs_never_on(self.hardware))

    @model_validator(mode="after")
    def _mla_graphs(self) -> "Deployment":
        if self.mla_triton and self.engine.full_graphs:  # both servers PIECEWISE, speculating or not
            object.__setattr__(self, "engine", self.engine.model_copy(update={"full_graphs": False}))
        return self

    @model_validator(mode="after")
    def _check(self) -> "Deployment":
        for label, dt in (("weight", self.weight_dtype), ("kv", self.kv_dtype), ("activation", self.activation_dtype)):
            if dt is not None and dt not in DTYPE_BYTES:
                raise CrossoverError(f"unknown {label} dtype {dt!r}; expected one of {', '.join(DTYPE_BYTES)}")
        kinds = self.engine.kv_dtypes
        if kinds is not None and self.kv_dtype not in kinds:
            raise CrossoverError(f"{self.engine.label} stores no {self.kv_dtype} KV cache (its --kv-cache-dtype: "
                                 f"{', '.join(kinds)}; engines/{self.engine.name}.yaml kv_dtypes)")
        return self

    @property
    def wdtype(self) -> str:
        """Weight dtype in effect."""
        return self.weight_dtype or self.model.weight_dtype

    @property
    def compute_dtype(self) -> str:
        """Tensor-core rate the GEMMs run at: the weights' own, or bf16 where the chip lacks it (fp8 or
        fp4 weights run weight-only there, dequantised to bf16 as Marlin-style kernels do on Ampere)."""
        return self.hardware.compute_rate_dtype(COMPUTE_DTYPE[self.wdtype])

    @property
    def weight_bytes(self) -> float:
        """Bytes per weight element."""
        return DTYPE_BYTES[self.wdtype]

    @property
    def kv_bytes(self) -> float:
        """Bytes per KV-cache element."""
        return DTYPE_BYTES[self.kv_dtype]

    @property
    def act_bytes(self) -> float:
        """Bytes per activation element."""
        return DTYPE_BYTES[self.activation_dtype]

    @property
    def bandwidth(self) -> float:
        """Achieved weight-streaming bandwidth per GPU, bytes/s."""
        e = self.efficiency.bandwidth_fraction or self.hardware.achieved_bandwidth_fraction or DEFAULT_BANDWIDTH_FRACTION
        return self.hardware.bandwidth_bytes_s * e

    @property
    def kv_bandwidth(self) -> float:
        """Achieved KV-cache read bandwidth per GPU, bytes/s."""
        if self.efficiency.kv_bandwidth_fraction is not None:
            return self.hardware.bandwidth_bytes_s * self.efficiency.kv_bandwidth_fraction
        return self.bandwidth

    @property
    def flops(self) -> float:
        """Achieved dense FLOP/s per GPU at the compute dtype."""
        e = self.efficiency.flops_fraction or self.hardware.achieved_flops_fraction or DEFAULT_FLOPS_FRACTION
        return self.hardware.peak_flops(self.compute_dtype) * e

    @property
    def link_bandwidth(self) -> float:
        """Achieved GPU-to-GPU bandwidth per direction, bytes/s."""
        return self.hardware.interconnect_bytes_s * self.efficiency.interconnect_fraction

    @property
    def allreduce_latency(self) -> float:
        """Seconds of latency of one small all-reduce across the TP group (0 at TP 1): a ring's 2 (tp - 1) hops."""
        return self.collective_latency(self.tp, 2 * (self.tp - 1))

    def collective_latency(self, group: int, hops: int) -> float:
        """Seconds of latency of one small collective call of `hops` ring steps over `group` GPUs (0 for one)."""
        if group == 1:
            return 0.0
        hop = self.efficiency.allreduce_hop_latency_s
        hop = self.hardware.allreduce_hop_latency_s if hop is None else hop
        return self.efficiency.allreduce_base_latency_s + hops * hop

    # ------------------------------------------------------------------ engine overheads in effect

    def _overhead(self, field: str, engine_value: float) -> float:
        v = getattr(self.efficiency, field)
        return engine_value if v is None else v

    @property
    def step_overhead_s(self) -> float:
        """Host time per engine step the GPU waits for (efficiency override, else the engine's)."""
        return self._overhead("step_overhead_s", self.engine.step_overhead_s)

    @property
    def spec_overhead_s(self) -> float:
        """Extra per speculative step."""
        return self._overhead("spec_overhead_s", self.engine.spec_step_overhead_s)

    @property
    def spec_overhead_per_seq_s(self) -> float:
        """Extra per verifying sequence per step."""
        return self._overhead("spec_overhead_per_seq_s", self.engine.spec_per_seq_s)

    @property
    def spec_per_position_s(self) -> float:
        """Host time per verified position per step (batch x verify width of them)."""
        return self._overhead("spec_per_position_s", self.engine.spec_per_position_s)

    @property
    def sampler_bytes_per_vocab(self) -> float:
        """The sampler's fp32 traffic per vocabulary entry of each sampled position."""
        return self._overhead("sampler_bytes_per_vocab", self.engine.sampler_bytes_per_vocab)

    @property
    def verify_bytes_per_vocab(self) -> float:
        """The rejection sampler's traffic per vocabulary entry of each verified draft position."""
        return self._overhead("verify_bytes_per_vocab", self.engine.verify_bytes_per_vocab)

    @property
    def bonus_bytes_per_vocab(self) -> float:
        """The traffic per vocabulary entry of each verifying request's bonus row beyond a sampled row's."""
        return self._overhead("bonus_bytes_per_vocab", self.engine.bonus_bytes_per_vocab)

    @property
    def draft_step_overhead_s(self) -> float:
        """Launch and host cost of each sequential draft forward."""
        return self._overhead("draft_step_overhead_s", self.engine.draft_pass_overhead_s)

    @property
    def eager_layer_s(self) -> float:
        """Host launch time per layer of a forward outside a CUDA graph."""
        return self._overhead("eager_layer_s", self.engine.eager_layer_s)

    @property
    def ngram_lookup_per_seq_s(self) -> float:
        """The n-gram proposer's CPU lookup per sequence per step."""
        return self._overhead("ngram_lookup_per_seq_s", self.engine.ngram_lookup_per_seq_s)

    @property
    def ngram_lookup_per_token_s(self) -> float:
        """The n-gram proposer's CPU lookup per context token of each sequence it searches per step."""
        return self._overhead("ngram_lookup_per_token_s", self.engine.ngram_lookup_per_token_s)

    @property
    def ragged_per_seq_s(self) -> float:
        """Host time per sequence of a ragged step whose attention runs outside the full graph."""
        return self._overhead("ragged_per_seq_s", self.engine.ragged_per_seq_s)

    @property
    def host_per_seq_s(self) -> float:
        """The engine's host work per running sequence per step (hidden up to the GPU's time where it overlaps)."""
        return self._overhead("host_per_seq_s", self.engine.host_per_seq_s)

    @property
    def host_per_step_s(self) -> float:
        """The engine's host work per step beside the per-sequence part (hidden where it overlaps)."""
        return self._overhead("host_per_step_s", self.engine.host_per_step_s)

    def with_efficiency(self, **changes) -> "Deployment":
        """A copy with some efficiency fields changed."""
        return self.model_copy(update={"efficiency": self.efficiency.model_copy(update=changes)})
