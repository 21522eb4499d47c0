"""Accelerator specs: YAML in human units (GB, GB/s, TFLOP/s), SI base units inside."""

from __future__ import annotations

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from ..errors import CrossoverError
from ..units import GB, TFLOPS
from .frozen import Spec

_RATE_KEYS = {
    "bf16": "bf16_dense_tflops",
    "fp8": "fp8_dense_tflops",
    "int8": "int8_dense_tops",
    "fp4": "fp4_dense_tflops",
}

# Seconds per ring step of a small all-reduce when a hardware spec gives none. NCCL's latency
# model (src/graph/tuning.cc, github.com/NVIDIA/nccl) adds a per-hop latency that is higher over
# PCIe than over NVLink; with peer-to-peer over a PCIe switch and host-side proxy work a step costs
# several times an NVLink step. Derived defaults; a YAML may set its own with a source.
NVLINK_HOP_LATENCY_S = 2e-6
PCIE_HOP_LATENCY_S = 8e-6
# GPUs one NVLink / Infinity Fabric (xGMI) box holds when a spec gives no `gpus_per_node`: HGX and
# DGX H100/H200/B200 boards and AMD MI300X/MI325X/MI355X platforms carry 8 GPUs on one switchless
# or NVSwitch fabric; a tensor-parallel group larger than that crosses the node boundary.
DEFAULT_GPUS_PER_NODE = 8


class DistilledOp(Spec):
    """Op-level roofline parameters of one op class, fitted to measured kernel tables by
    validation/distill_kernels.py (the formulas: crossover.roofline's op-level section, e.g.
    gemm_seconds; errors in validation/kernels.md). Every fraction lies in (0, 1]; times and sizes
    are non-negative. The step model reads a few of them (Distilled.efficiency_fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    floor_us: float | None = Field(default=None, ge=0)  # fixed time per kernel call
    bandwidth_fraction: float | None = Field(default=None, gt=0, le=1)
    flops_fraction: float | None = Field(default=None, gt=0, le=1)
    transition_p: float | None = Field(default=None, ge=1)
    # Operands that stay in L2 between the table's timed repeats stream at this multiple of DRAM's rate.
    l2_bandwidth_ratio: float | None = Field(default=None, ge=1)
    weights_l2_share: float | None = Field(default=None, gt=0, le=1)  # GEMM: of L2, where weights stay between repeats
    tiles_half: float | None = Field(default=None, ge=0)  # GEMM: output tiles below which fewer SMs work
    split_k_us: float | None = Field(default=None, ge=0)  # GEMM: split-K's reduction kernel (few tiles, long k)
    output_fraction: float | None = Field(default=None, gt=0, le=1)  # fp8 GEMM: the epilogue's output writes
    sm_bandwidth_gb_s: float | None = Field(default=None, gt=0)  # fp8 GEMM: what one CTA streams per second
    quantise_bandwidth_fraction: float | None = Field(default=None, gt=0, le=1)  # fp8 GEMM: activation quantisation
    quantise_row_ns: float | None = Field(default=None, ge=0)  # fp8 GEMM: the quantisation's time per token row
    head_dim_half: float | None = Field(default=None, ge=0)  # context attention: head size at half FLOP efficiency
    head_dim_max: float | None = Field(default=None, gt=0)  # context attention: above it efficiency falls as 1/hd
    critical_rows: float | None = Field(default=None, gt=0)  # context attention: query rows of the longest CTA
    cta_us: float | None = Field(default=None, ge=0)  # context attention: fixed cost per CTA (query tile x head)
    kv_len_extra: float | None = Field(default=None, ge=0)  # decode attention: per-sequence work as KV tokens
    kv_block_us: float | None = Field(default=None, ge=0)  # decode attention: per 128-token KV block on one SM
    split_kv_us: float | None = Field(default=None, ge=0)  # decode attention: split-KV's combine pass
    gqa_copy_us: float | None = Field(default=None, ge=0)  # decode attention: GQA query relayout (batch > 1)
    expert_width_full: float | None = Field(default=None, gt=0)  # MoE: per-expert width below which tiles run part-empty
    base_us: float | None = Field(default=None, ge=0)  # all-reduce: per call
    hop_us: float | None = Field(default=None, ge=0)  # all-reduce: per ring step
    link_fraction: float | None = Field(default=None, gt=0, le=1)  # all-reduce: of the link's peak
    host_fraction: float | None = Field(default=None, gt=0, le=1)  # PCIe all-reduce of > 2 GPUs: the shared host path


class Distilled(Spec):
    """Parameters distilled from measured kernel tables, per op class, with their source, and the
    chip facts the op-level formulas read beside the datasheet peaks (L2 size, SM count, the tensor
    cores' smallest tile M), recorded with theirs."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    source: str
    l2_mib: float | None = Field(default=None, gt=0)
    sms: PositiveInt | None = None
    min_tile_rows: PositiveInt | None = None
    facts_source: str = ""
    gemm_bf16: DistilledOp | None = None
    gemm_fp8: DistilledOp | None = None
    decode_attention: DistilledOp | None = None
    context_attention: DistilledOp | None = None
    moe_bf16: DistilledOp | None = None
    all_reduce: DistilledOp | None = None

    def efficiency_fields(self, layer_overhead_s: float, gemms_per_layer: int = 4,
                          gqa: bool = True) -> dict[str, float]:
        """The distilled values the roofline's existing `Efficiency` dials can take, by field name
        (`dep.with_efficiency(**hw.distilled.efficiency_fields(dep.efficiency.layer_overhead_s))`;
        Deployment applies them by default): weight streaming and FLOP fractions and the transition
        from bf16 GEMMs, the KV read fraction from decode attention, the all-reduce's base, hop and
        link fraction, and the per-call floors of a layer's kernels (`gemms_per_layer` GEMMs and one
        attention; a dense GQA layer runs 4: QKV, output, gate+up, down) added to the given per-layer
        overhead (kernel gaps). A serving step's calls are decode-sized: a GEMM's floor counts its
        split-K reduction (few output tiles, long k) and an attention call's its split-KV combine
        (context past one KV block) and GQA query relayout (batch > 1; `gqa`: only where a GPU's query
        heads share a KV head and it holds more than one KV head, decode_attention_seconds' condition,
        so an MHA model or one KV head per GPU pays none). Output-tile, per-block,
        L2-resident and per-row terms have no dial and are left out."""
        out: dict[str, float] = {}
        g, a, c = self.gemm_bf16, self.decode_attention, self.all_reduce
        g_floor = ((g.floor_us or 0.0) + (g.split_k_us or 0.0)) if g is not None else 0.0
        a_floor = 0.0
        if a is not None:
            a_floor = (a.floor_us or 0.0) + (a.split_kv_us or 0.0) + ((a.gqa_copy_us or 0.0) if gqa else 0.0)
        floors = gemms_per_layer * g_floor + a_floor
        out["layer_overhead_s"] = layer_overhead_s + floors * 1e-6
        if g is not None:
            for src, dst in (("bandwidth_fraction", "bandwidth_fraction"), ("flops_fraction", "flops_fraction"),
                             ("transition_p", "transition_p")):
                if getattr(g, src) is not None:
                    out[dst] = getattr(g, src)
        if a is not None and a.bandwidth_fraction is not None:
            out["kv_bandwidth_fraction"] = a.bandwidth_fraction
        if c is not None:
            if c.base_us is not None:
                out["allreduce_base_latency_s"] = c.base_us * 1e-6
            if c.hop_us is not None:
                out["allreduce_hop_latency_s"] = c.hop_us * 1e-6
            if c.link_fraction is not None:
                out["interconnect_fraction"] = c.link_fraction
        return out


class Hardware(Spec):
    """One accelerator (per chip), as written in hardware/*.yaml. Numbers are finite (no .inf/.nan)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    display_name: str
    vendor: str
    # NVIDIA's compute capability (major.minor): engines pick kernels by it (vLLM's default MLA attention
    # backend on 10.x, EngineProfile.mla_verify_prefill). None: not an NVIDIA GPU.
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d+$")
    memory_gb: PositiveFloat
    memory_bandwidth_gb_s: PositiveFloat
    bf16_dense_tflops: PositiveFloat
    fp8_dense_tflops: PositiveFloat | None = None
    int8_dense_tops: PositiveFloat | None = None
    fp4_dense_tflops: PositiveFloat | None = None
    interconnect: str = ""
    interconnect_gb_s: PositiveFloat
    # GPUs on one scale-up link domain (NVLink / xGMI box; 72 for an NVL72 rack). None = DEFAULT_GPUS_PER_NODE.
    gpus_per_node: PositiveInt | None = None
    # The scale-out link between nodes (e.g. "InfiniBand NDR 400 Gb/s"): TP above gpus_per_node needs it.
    multi_node_interconnect: str = ""
    multi_node_interconnect_gb_s: PositiveFloat | None = None
    # Per ring step of a small all-reduce. None = by link class (see allreduce_hop_latency_s).
    allreduce_hop_latency_us: PositiveFloat | None = None
    # At least 0.001 of peak (the floor deployment.MIN_FRACTION gives every efficiency fraction).
    achieved_flops_fraction: float | None = Field(default=None, ge=1e-3, le=1)
    achieved_bandwidth_fraction: float | None = Field(default=None, ge=1e-3, le=1)
    # Prices (crossover.pricing uses them; `plan --price` / `--price-file` override them). Every library
    # file sets each key, null where no source gives a figure, with its source or the reason in `sources:`.
    # Rental: on-demand USD per GPU-hour (a cloud catalog's instance price / its GPUs).
    price_per_hour_usd: PositiveFloat | None = None
    # Ownership: purchase price per GPU, or per node of `node_size` GPUs (one of the two), in USD.
    purchase_usd_per_gpu: PositiveFloat | None = None
    purchase_usd_per_node: PositiveFloat | None = None
    # When the price figures were read from their sources: YYYY-MM-DD or YYYY-MM.
    prices_as_of: str | None = Field(default=None, pattern=r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")
    # Board power (TDP / TBP) per GPU in W: ownership's power cost is tdp_w x utilisation x PUE x $/kWh.
    tdp_w: PositiveFloat | None = None
    # Fitted to measured kernel tables (validation/distill_kernels.py); absent: nothing changes.
    distilled: Distilled | None = None
    # A library GPU of the same chip (SMs, L2, memory type) whose distilled block this one takes where it
    # has none of its own (specs/loader.py; the reason in sources.distilled_from).
    distilled_from: str | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    unverified: list[str] = Field(default_factory=list)
    notes: str = ""

    @model_validator(mode="after")
    def _one_purchase_price(self) -> "Hardware":
        if self.purchase_usd_per_gpu is not None and self.purchase_usd_per_node is not None:
            raise ValueError("give purchase_usd_per_gpu or purchase_usd_per_node, not both")
        return self

    @property
    def capability_major(self) -> int | None:
        """The compute capability's major version (9 for Hopper, 10 for datacenter Blackwell), None off NVIDIA."""
        return None if self.compute_capability is None else int(self.compute_capability.split(".")[0])

    @property
    def purchase_price_per_gpu_usd(self) -> float | None:
        """Purchase price of one GPU: the spec's per-GPU figure, else its node price / node_size; None if unknown."""
        if self.purchase_usd_per_gpu is not None:
            return self.purchase_usd_per_gpu
        if self.purchase_usd_per_node is not None:
            return self.purchase_usd_per_node / self.node_size
        return None

    @property
    def node_size(self) -> int:
        """GPUs on one scale-up link domain: the spec's gpus_per_node, else DEFAULT_GPUS_PER_NODE."""
        return self.gpus_per_node or DEFAULT_GPUS_PER_NODE

    @property
    def memory_bytes(self) -> float:
        """Memory capacity in bytes."""
        return self.memory_gb * GB

    @property
    def bandwidth_bytes_s(self) -> float:
        """Peak memory bandwidth in bytes/s."""
        return self.memory_bandwidth_gb_s * GB

    @property
    def interconnect_bytes_s(self) -> float:
        """GPU-to-GPU bandwidth per direction in bytes/s."""
        return self.interconnect_gb_s * GB

    @property
    def is_pcie(self) -> bool:
        """Whether GPU-to-GPU traffic goes over PCIe (no NVLink/Infinity Fabric/ICI)."""
        return self.interconnect.lower().startswith("pcie")

    @property
    def allreduce_hop_latency_s(self) -> float:
        """Seconds per ring step of a small all-reduce: the spec's own figure, else
        PCIE_HOP_LATENCY_S over PCIe and NVLINK_HOP_LATENCY_S on NVLink-class links."""
        if self.allreduce_hop_latency_us is not None:
            return self.allreduce_hop_latency_us * 1e-6
        return PCIE_HOP_LATENCY_S if self.is_pcie else NVLINK_HOP_LATENCY_S

    def compute_rate_dtype(self, compute_dtype: str) -> str:
        """`compute_dtype` if the chip has a dense rate for it, else bf16 (weight-only execution)."""
        key = _RATE_KEYS.get(compute_dtype)
        return compute_dtype if key is not None and getattr(self, key) is not None else "bf16"

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense peak tensor throughput in FLOP/s for `compute_dtype` (bf16, fp8, int8, fp4)."""
        key = _RATE_KEYS.get(compute_dtype)
        if key is None:
            raise CrossoverError(f"unknown compute dtype {compute_dtype!r}; expected one of {', '.join(_RATE_KEYS)}")
        value = getattr(self, key)
        if value is None:
            raise CrossoverError(
                f"{self.name} has no dense {compute_dtype} tensor rate; use a weight dtype it supports "
                f"(e.g. --weight-dtype bf16)"
            )
        return value * TFLOPS
