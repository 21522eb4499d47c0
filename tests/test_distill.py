"""The op-level kernel formulas (crossover.kernel_formulas) that
validation/distill_kernels.py fits to measured kernel tables, each checked by hand on a small case
with round numbers, and the fit recovering known parameters from synthetic data. No kernel tables
are needed."""

from __future__ import annotations

import importlib.util
import math
import sys
import numpy as np
import pytest
from conftest import REPO
from pydantic import ValidationError

from crossover.model.ops import balanced_distinct_experts, expected_distinct_experts
from crossover.model.kernels.formulas import (
    ChipFacts,
    allreduce_seconds,
    context_attention_seconds,
    decode_attention_seconds,
    gemm_seconds,
    moe_seconds,
    pow2_ceil,
    resident_seconds,
    resident_share,
)
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.hardware import Distilled, DistilledOp

BW = 1e12  # 1 TB/s: bytes / BW in microseconds are bytes / 1e6
RATE = 1e15


def _distill():
    """validation/distill_kernels.py as a module (its fit and parameter tables)."""
    if "distill_kernels" in sys.modules:
        return sys.modules["distill_kernels"]
    spec = importlib.util.spec_from_file_location("distill_kernels", REPO / "validation" / "distill_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["distill_kernels"] = mod
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ L2 residency

def test_resident_bytes_stream_from_l2_when_they_fit():
    # 10 MB moved, 4 MB of it resident in a 50 MB L2 at 4x DRAM's rate: 6 us + 1 us.
    assert resident_seconds(10e6, 4e6, 50e6, BW, 4.0) == pytest.approx(7e-6)
    # The same 4 MB do not fit a 3 MB L2: all 10 MB from DRAM.
    assert resident_seconds(10e6, 4e6, 3e6, BW, 4.0) == pytest.approx(10e-6)
    # No ratio (or no L2): plain DRAM.
    assert resident_seconds(10e6, 4e6, 50e6, BW, None) == pytest.approx(10e-6)
    assert resident_seconds(10e6, 4e6, 0.0, BW, 4.0) == pytest.approx(10e-6)


def test_resident_share_is_a_smooth_step_at_the_capacity():
    assert resident_share(8e6, 8e6) == pytest.approx(0.5)
    assert resident_share(4e6, 8e6) == pytest.approx(16 / 17)  # 1 / (1 + (1/2)^4)
    assert resident_share(16e6, 8e6) == pytest.approx(1 / 17)


def test_pow2_ceil():
    assert list(pow2_ceil([0.5, 1, 2, 3, 64, 65])) == [1, 1, 2, 4, 64, 128]


# ------------------------------------------------------------------ GEMM

def test_gemm_bf16_by_hand_tiles_and_split_k():
    """m = 1, n = k = 4096, bf16: 32 output tiles (ceil(1/64) x ceil(4096/128)), half the tiles_half
    of 64, so memory and compute take twice as long; k >= 256 with 32 tiles < 100 SMs adds the split-K
    reduction kernel's floor."""
    chip = ChipFacts(bandwidth=BW, sms=100)
    q = dict(floor_us=2.0, bandwidth_fraction=0.5, flops_fraction=1.0, transition_p=2.0, tiles_half=64.0,
             split_k_us=1.0)
    nbytes = 4096 * 4096 * 2 + 4096 * 2 + 4096 * 2  # weights, activations, output
    mem = nbytes / (BW * 0.5) * 2
    comp = 2 * 4096 * 4096 / RATE * 2
    want = 2e-6 + math.hypot(mem, comp) + 1e-6  # p = 2: (mem^2 + comp^2)^(1/2)
    assert gemm_seconds(1, 4096, 4096, 2.0, 2.0, RATE, chip, q) == pytest.approx(want, rel=1e-12)
    # k below 256, or as many tiles as SMs: no split-K.
    no_split = dict(q, split_k_us=None)
    assert gemm_seconds(1, 4096, 128, 2.0, 2.0, RATE, chip, q) == pytest.approx(
        gemm_seconds(1, 4096, 128, 2.0, 2.0, RATE, chip, no_split), rel=1e-12)
    few_sms = ChipFacts(bandwidth=BW, sms=32)
    assert gemm_seconds(1, 4096, 4096, 2.0, 2.0, RATE, few_sms, q) == pytest.approx(want - 1e-6, rel=1e-12)


def test_gemm_l2_resident_activations_and_weights():
    """m = 64, n = 128, k = 4096 bf16 on a 1 MB L2: the activations and output (540,672 bytes) fit
    and stream at 4x; the 1 MiB of weights do not fit (1,048,576 > 1e6)... until a 4 MB L2 whose half
    holds them: 16/17 of them then come from L2 too (resident_share at half the capacity)."""
    q = dict(floor_us=0.0, bandwidth_fraction=1.0, flops_fraction=1.0, transition_p=1.0, l2_bandwidth_ratio=4.0)
    act, weights = 64 * 4096 * 2 + 64 * 128 * 2, 128 * 4096 * 2
    comp = 2 * 64 * 128 * 4096 / RATE
    got = gemm_seconds(64, 128, 4096, 2.0, 2.0, RATE, ChipFacts(bandwidth=BW, l2_bytes=1e6), q)
    assert got == pytest.approx(weights / BW + act / (4 * BW) + comp, rel=1e-12)  # p = 1: memory + compute
    chip4 = ChipFacts(bandwidth=BW, l2_bytes=4 * 2 ** 20)
    got = gemm_seconds(64, 128, 4096, 2.0, 2.0, RATE, chip4, dict(q, weights_l2_share=0.5))
    mem = weights / BW + act / (4 * BW) - 16 / 17 * weights / BW * (1 - 1 / 4)
    assert got == pytest.approx(mem + comp, rel=1e-12)


def test_gemm_fp8_quantisation_cta_stream_and_output():
    """fp8 extras by hand, one at a time."""
    chip = ChipFacts(bandwidth=BW, sms=1, min_tile_rows=64)
    base = dict(floor_us=1.0, bandwidth_fraction=1.0, flops_fraction=1.0, transition_p=1.0)
    m, n, k = 100.0, 256.0, 1000.0
    nbytes = n * k + m * k + m * n * 2
    comp = 2 * m * n * k / RATE
    plain = 1e-6 + nbytes / BW + comp
    assert gemm_seconds(m, n, k, 1.0, 1.0, RATE, chip, base) == pytest.approx(plain, rel=1e-12)
    # Per-token quantisation, its own kernel: another floor + (5 us of rows (+) 12 us of bf16 read and
    # fp8 write (3 bytes x 2e6 at 0.5 of 1 TB/s)) at p = 2 = 13 us.
    q = dict(base, quantise_bandwidth_fraction=0.5, quantise_row_ns=5.0)
    assert gemm_seconds(1000.0, n, 2000.0, 1.0, 1.0, RATE, chip, q) == pytest.approx(
        gemm_seconds(1000.0, n, 2000.0, 1.0, 1.0, RATE, chip, base) + 1e-6 + 13e-6, rel=1e-12)
    # Per-CTA stream: m = 100 -> 128 rows per CTA (power of two in [64, 256]), 2 CTAs (128 columns
    # each) on 1 SM = 2 waves of (128 + 128) x 1000 bytes at 256 GB/s = 2 x 1 us, above the DRAM time.
    q = dict(base, sm_bandwidth_gb_s=256.0)
    assert gemm_seconds(m, n, k, 1.0, 1.0, RATE, chip, q) == pytest.approx(1e-6 + 2e-6 + comp, rel=1e-12)
    # m = 3 on Ada (smallest tile M 16): 16 rows per CTA; on Hopper 64.
    ada = ChipFacts(bandwidth=BW, sms=1, min_tile_rows=16)
    assert gemm_seconds(3.0, 128.0, k, 1.0, 1.0, RATE, ada, q) == pytest.approx(
        1e-6 + (16 + 128) * k / 256e9 + 2 * 3 * 128 * k / RATE, rel=1e-12)
    # The epilogue writes the bf16 output at 0.25 of peak instead of 1.0: + m n 2 (4 - 1) / BW.
    q = dict(base, output_fraction=0.25)
    assert gemm_seconds(m, n, k, 1.0, 1.0, RATE, chip, q) == pytest.approx(plain + m * n * 2 * 3 / BW, rel=1e-12)


# ------------------------------------------------------------------ attention

def test_decode_attention_by_hand():
    """2 sequences of 256 cached tokens, 8 query and 2 KV heads of 128, bf16 KV (524,288 bytes)."""
    chip = ChipFacts(bandwidth=BW, sms=4)
    q = dict(floor_us=10.0, bandwidth_fraction=0.5, flops_fraction=1.0, transition_p=1.0, kv_len_extra=256.0,
             kv_block_us=1.0, split_kv_us=3.0, gqa_copy_us=4.0)
    nbytes = 2 * 256 * 2 * 128 * 2 * 2
    mem = nbytes / (BW * 0.5) * (1 + 256 / 256)  # 2.097 us, above 8 KV blocks x 1 us / 4 SMs = 2 us
    comp = 4 * 2 * 256 * 8 * 128 / RATE
    want = 10e-6 + mem + comp + 3e-6 + 4e-6  # p = 1; L > 128: split-KV; GQA at batch 2: the query relayout
    assert decode_attention_seconds(2, 256, 8, 2, 128, 2.0, RATE, chip, q) == pytest.approx(want, rel=1e-12)
    # The KV blocks bind when they take longer: 1 us each on 1 SM = 8 us.
    assert decode_attention_seconds(2, 256, 8, 2, 128, 2.0, RATE, ChipFacts(bandwidth=BW, sms=1), q) == \
        pytest.approx(10e-6 + 8e-6 + comp + 7e-6, rel=1e-12)
    one = decode_attention_seconds(1, 256, 8, 2, 128, 2.0, RATE, chip, q)  # batch 1: no relayout
    assert one == pytest.approx(10e-6 + mem / 2 + comp / 2 + 3e-6, rel=1e-12)
    short = decode_attention_seconds(2, 128, 8, 2, 128, 2.0, RATE, chip, q)  # one KV block: no split
    mem_short = nbytes / 2 / (BW * 0.5) * (1 + 256 / 128)  # 1.57 us, above 4 blocks x 1 us / 4 SMs
    assert short == pytest.approx(10e-6 + mem_short + comp / 2 + 4e-6, rel=1e-12)
    for h, kvh in ((8, 1), (8, 8)):  # one KV head, or no grouping: the relayout is free
        assert decode_attention_seconds(2, 256, h, kvh, 128, 2.0, RATE, chip, dict(q, gqa_copy_us=0.0)) == \
            pytest.approx(decode_attention_seconds(2, 256, h, kvh, 128, 2.0, RATE, chip, q), rel=1e-12)


def test_decode_attention_kv_resident_in_l2():
    q = dict(bandwidth_fraction=1.0, flops_fraction=1.0, transition_p=1.0, l2_bandwidth_ratio=2.0)
    nbytes = 4 * 1024 * 8 * 128 * 2 * 2  # 16.8 MB of KV
    comp = 4 * 4 * 1024 * 32 * 128 / RATE
    fits = decode_attention_seconds(4, 1024, 32, 8, 128, 2.0, RATE, ChipFacts(bandwidth=BW, l2_bytes=20e6), q)
    spills = decode_attention_seconds(4, 1024, 32, 8, 128, 2.0, RATE, ChipFacts(bandwidth=BW, l2_bytes=16e6), q)
    assert fits == pytest.approx(nbytes / (2 * BW) + comp, rel=1e-12)
    assert spills == pytest.approx(nbytes / BW + comp, rel=1e-12)


def test_context_attention_critical_path_ctas_and_head_size():
    """One prompt of 1024 tokens, one head of 128 on 10 SMs: head size efficiency 128 / (128 + 128)
    x min(1, 64 / 128) = 0.25 of 1e15; the last query tile (128 rows x 1024 keys) on one SM takes
    longer than the whole causal work spread over all ten; 8 CTAs x 1 us / 10 SMs on top."""
    chip = ChipFacts(bandwidth=BW, sms=10)
    q = dict(floor_us=0.0, bandwidth_fraction=1.0, flops_fraction=1.0, transition_p=1.0, head_dim_half=128.0,
             head_dim_max=64.0, critical_rows=128.0, cta_us=1.0)
    r = RATE * 0.25
    whole = 4 * 128 * 1024 * 1025 / 2 / r  # 1.07 us
    longest = 4 * 128 * 1024 * 128 / (r / 10)  # 2.68 us
    assert longest > whole
    mem = 2 * 1024 * (1 + 2) * 128 * 2 / BW  # Q, K, V read, O written
    want = mem + longest + 8 * 1e-6 / 10
    assert context_attention_seconds(1, 1024, 1, 1, 128, 2.0, RATE, chip, q) == pytest.approx(want, rel=1e-12)
    # Many heads: the work spread over the SMs binds again.
    many = context_attention_seconds(1, 1024, 64, 8, 128, 2.0, RATE, chip, q)
    mem = 2 * 1024 * (64 + 16) * 128 * 2 / BW
    assert many == pytest.approx(mem + 64 * whole + 64 * 8 * 1e-6 / 10, rel=1e-12)


# ------------------------------------------------------------------ MoE, all-reduce

def test_balanced_routing_touches_every_expert_it_can():
    assert balanced_distinct_experts(16, 128, 8) == 128  # 16 x 8 choices, every one a new expert
    assert balanced_distinct_experts(2, 128, 8) == 16
    assert balanced_distinct_experts(1000, 64, 6) == 64
    # Random routing collides: 128 (1 - (1 - 8/128)^16) = 82.6 < 128.
    assert expected_distinct_experts(16, 128, 8) == pytest.approx(128 * (1 - (120 / 128) ** 16))
    assert expected_distinct_experts(16, 128, 8) < balanced_distinct_experts(16, 128, 8)


def test_moe_by_hand():
    """2 tokens to 2 of 8 experts (balanced: 4 touched), hidden 1024, gated width 512 split over TP 2
    (256 per GPU, half the expert_width_full of 512: twice as long)."""
    chip = ChipFacts(bandwidth=BW)
    q = dict(floor_us=5.0, bandwidth_fraction=1.0, flops_fraction=1.0, transition_p=1.0, expert_width_full=512.0)
    nbytes = 4 * 3 * 1024 * 256 * 2 + 2 * 2 * (2 * 1024 + 2 * 256) * 2
    comp = 2 * 2 * 2 * 3 * 1024 * 256 / RATE
    want = 5e-6 + (nbytes / BW + comp) * 2
    assert moe_seconds(2, 1024, 512, 2, 8, 2, 2.0, 2.0, RATE, chip, q) == pytest.approx(want, rel=1e-12)
    random = moe_seconds(2, 1024, 512, 2, 8, 2, 2.0, 2.0, RATE, chip, q, balanced=False)
    distinct = 8 * (1 - (6 / 8) ** 2)  # 3.5
    nbytes = distinct * 3 * 1024 * 256 * 2 + 2 * 2 * (2 * 1024 + 2 * 256) * 2
    assert random == pytest.approx(5e-6 + (nbytes / BW + comp) * 2, rel=1e-12)


def test_allreduce_ring_and_pcie_host_path():
    q = dict(base_us=2.0, hop_us=1.0, link_fraction=0.5, host_fraction=0.25)
    nvlink = ChipFacts(bandwidth=BW, link=100e9)
    pcie = ChipFacts(bandwidth=BW, link=100e9, pcie=True)
    ring4 = 2e-6 + 6e-6 + 1e6 * 2 * 3 / 4 / (100e9 * 0.5)  # 1 MB over 4 GPUs
    assert allreduce_seconds(4, 1e6, nvlink, q) == pytest.approx(ring4, rel=1e-12)
    # PCIe: 2 GPUs peer to peer (the ring); 4 GPUs through the host, 2 (g - 1) bytes at 0.25 of a link.
    ring2 = 2e-6 + 2e-6 + 1e6 * 2 * 1 / 2 / (100e9 * 0.5)
    assert allreduce_seconds(2, 1e6, pcie, q) == pytest.approx(ring2, rel=1e-12)
    assert allreduce_seconds(4, 1e6, pcie, q) == pytest.approx(2e-6 + 6e-6 + 1e6 * 6 / (100e9 * 0.25), rel=1e-12)
    assert allreduce_seconds(4, 1e6, pcie, dict(q, host_fraction=None)) == pytest.approx(ring4, rel=1e-12)


# ------------------------------------------------------------------ specs, step dials, the fit

def test_distilled_parameters_keep_their_physical_ranges():
    for field in ("bandwidth_fraction", "output_fraction", "quantise_bandwidth_fraction", "weights_l2_share",
                  "host_fraction", "link_fraction"):
        with pytest.raises(ValidationError):
            DistilledOp(**{field: 1.5})
        with pytest.raises(ValidationError):
            DistilledOp(**{field: 0.0})
    with pytest.raises(ValidationError):
        DistilledOp(l2_bandwidth_ratio=0.5)  # L2 is no slower than DRAM
    for field in ("split_k_us", "kv_block_us", "split_kv_us", "gqa_copy_us", "cta_us", "quantise_row_ns"):
        with pytest.raises(ValidationError):
            DistilledOp(**{field: -1.0})


def test_decode_sized_call_floors_feed_the_layer_overhead():
    """A serving step's GEMMs count split-K's reduction and its attention split-KV's combine and the
    GQA query relayout: 4 x (2 + 1) + (10 + 3 + 4) = 29 us on top of 15 us of kernel gaps."""
    d = Distilled(source="test", gemm_bf16=DistilledOp(floor_us=2.0, split_k_us=1.0, bandwidth_fraction=0.8),
                  decode_attention=DistilledOp(floor_us=10.0, split_kv_us=3.0, gqa_copy_us=4.0,
                                               bandwidth_fraction=0.9))
    f = d.efficiency_fields(15e-6)
    assert f["layer_overhead_s"] == pytest.approx(15e-6 + 29e-6)
    assert f["bandwidth_fraction"] == 0.8 and f["kv_bandwidth_fraction"] == 0.9


def test_the_gqa_relayout_floor_is_paid_only_where_a_gpu_holds_grouped_kv_heads():
    """decode_attention_seconds pays gqa_copy_us only where a GPU's query heads share a KV head and it holds
    more than one: the layer overhead follows the same condition, per GPU. Hand values: 4 x 2 + 10 + 4 =
    22 us with the relayout, 18 without."""
    from crossover.specs.hardware import Distilled, DistilledOp

    d = Distilled(source="test", gemm_bf16=DistilledOp(floor_us=2.0),
                  decode_attention=DistilledOp(floor_us=10.0, gqa_copy_us=4.0))
    assert d.efficiency_fields(0.0)["layer_overhead_s"] == pytest.approx(22e-6)
    assert d.efficiency_fields(0.0, gqa=False)["layer_overhead_s"] == pytest.approx(18e-6)
    h100 = load_hardware("h100-sxm")
    a = h100.distilled.decode_attention.gqa_copy_us
    assert a > 0

    def floors(model, tp):
        return Deployment(model=load_model(model), hardware=h100, tp=tp).efficiency.kernel_floors_s

    # Llama-3.1-8B: 32 query / 8 KV heads: grouped at TP 1 and 4 (2 KV heads per GPU), one KV head at TP 8
    assert floors("llama-3.1-8b", 1) == pytest.approx(floors("llama-3.1-8b", 8) + a * 1e-6)
    assert floors("llama-3.1-8b", 4) == pytest.approx(floors("llama-3.1-8b", 1))
    # Llama-2-7B is MHA (32 and 32): no relayout at any TP
    assert floors("llama-2-7b-32k", 1) == pytest.approx(floors("llama-3.1-8b", 8))
    # MLA: none, even where its nominal KV heads are fewer than its query heads
    v3 = load_model("deepseek-v3")
    grouped = v3.model_copy(update={"num_key_value_heads": 32})  # 4 per GPU at TP 8
    mla = [Deployment(model=m, hardware=h100, tp=8, weight_dtype="fp8").efficiency.kernel_floors_s for m in (v3, grouped)]
    assert mla[0] == pytest.approx(mla[1]) == pytest.approx(floors("llama-3.1-8b", 8))


def test_every_distilled_yaml_block_loads_with_its_chip_facts():
    for name in ("h100-sxm", "h200", "b200", "b300", "gb200", "a100-80gb-sxm", "l40s"):
        d = load_hardware(name).distilled
        assert d is not None and d.l2_mib and d.sms and d.min_tile_rows in (16, 64) and d.facts_source
        assert d.gemm_bf16 is not None and d.gemm_bf16.split_k_us is not None


def test_fit_recovers_known_parameters_from_synthetic_allreduce():
    """Synthetic L40S all-reduce latencies from known parameters (2 GPUs peer to peer, 4 and 8
    through the host): the fit on them returns those parameters."""
    dk = _distill()
    hw = load_hardware("l40s")
    true = dict(base_us=2.0, hop_us=1.5, link_fraction=0.6, host_fraction=0.45)
    g = np.repeat([2.0, 4.0, 8.0], 16)
    size = np.tile(2.0 ** np.arange(8, 32, 1.5), 3)
    s = dict(gpus=g, bytes=size, t=allreduce_seconds(g, size, dk.chip_facts(hw), true))
    got = dk.fit("all-reduce", s, hw, np.arange(len(g)))
    for key, value in true.items():
        assert got[key] == pytest.approx(value, rel=1e-3)


def test_step_model_pcie_allreduce_crosses_the_host_past_two_gpus():
    """The step model's all-reduce on L40S (PCIe, distilled host path): TP 2 rings over the link at
    the distilled link fraction; TP 4 sends 2 (tp - 1) x each message over the host at host_fraction
    of one link. Llama-3.1-70B: 2 all-reduces per layer x 80 layers of 8,192 bf16 activations."""
    from crossover.model.roofline import compiled_target
    from crossover.specs import Deployment, Efficiency, load_model

    hw = load_hardware("l40s")
    ar = hw.distilled.all_reduce
    model = load_model("llama-3.1-70b")
    two = compiled_target(Deployment(model=model, hardware=hw, tp=2))
    four = compiled_target(Deployment(model=model, hardware=hw, tp=4))
    link = 32e9
    assert two.allreduce_s_per_token == pytest.approx(160 * 2 * 1 / 2 * 8192 * 2 / (link * ar.link_fraction))
    assert four.allreduce_s_per_token == pytest.approx(160 * 2 * 3 * 8192 * 2 / (link * ar.host_fraction))
    generic = compiled_target(Deployment(model=model, hardware=hw, tp=4, efficiency=Efficiency(distilled=False)))
    assert generic.allreduce_s_per_token == pytest.approx(160 * 2 * 3 / 4 * 8192 * 2 / (link * 0.8))
