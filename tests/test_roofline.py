"""Each roofline formula against a hand-computed case (bytes / bandwidth, FLOPs / FLOP/s)."""

import numpy as np
import pytest

from crossover.model.memory import max_batch, weight_bytes_per_gpu
from crossover.model.ops import expected_distinct_experts, model_ops
from crossover.model.roofline import combine
from crossover.model.step import step_time
from crossover.specs import Deployment, Efficiency, load_hardware, load_model

SOL = Efficiency.speed_of_light()
# The generic defaults (not a GPU's kernel-table-distilled parameters): the formulas these tests check by hand.
GENERIC = Efficiency(distilled=False)


def dep(model="llama-3.1-8b", hw="h100-sxm", tp=1, eff=SOL, **kw):
    return Deployment(model=load_model(model), hardware=load_hardware(hw), tp=tp, efficiency=eff, **kw)


def test_batch1_decode_8b_h100_is_weight_bytes_over_bandwidth():
    # Llama-3.1-8B streamed weights per token (input embedding is looked up, not streamed):
    # 32 x (4096*(32+2*8)*128 + 32*128*4096 + 3*4096*14336) + 128256*4096 = 7,504,658,432 params.
    params = 32 * (4096 * 48 * 128 + 32 * 128 * 4096 + 3 * 4096 * 14336) + 128256 * 4096
    assert params == 7_504_658_432
    expected = params * 2 / 3.35e12  # bf16 bytes / H100 SXM 3,350 GB/s (decimal)
    t = float(step_time(dep(), [1], 1, 0).total[0])
    assert t == pytest.approx(expected, rel=2e-3)  # activations and the 1-token KV write are < 0.2%
    assert 4.47e-3 < t < 4.50e-3


def test_kv_read_grows_with_batch_times_context_and_counts_kv_heads():
    d = dep()
    b, ctx = 8, 4096
    att = step_time(d, [b], 1, ctx).ops["attention"]
    # read: batch x (context + 1) x layers x 2 (K,V) x kv_heads x head_dim x 2 bytes; write: the new token
    read = b * (ctx + 1) * 32 * 2 * 8 * 128 * 2
    write = b * 1 * 32 * 2 * 8 * 128 * 2
    assert float(att.bytes[0]) == pytest.approx(read + write, rel=1e-9)
    assert float(att.memory_time[0]) == pytest.approx((read + write) / 3.35e12, rel=1e-9)
    # GQA: Llama-2-7B (32 KV heads) reads 4x the KV of Llama-3.1-8B (8 KV heads), same head_dim/layers
    mha = step_time(dep("llama-2-7b"), [b], 1, ctx).ops["attention"]
    assert float(mha.bytes[0]) == pytest.approx(4 * float(att.bytes[0]), rel=1e-9)


def test_attention_flops_and_verify_reads_kv_once():
    d = dep()
    b, ctx, q = 4, 1000, 4
    att = step_time(d, [b], q, ctx).ops["attention"]
    # 2 FLOPs per MAC x (QK + PV: 2 x head_dim) per query head per attended token; causal: the j-th
    # of the q new positions attends to ctx + j tokens, q * ctx + q (q + 1) / 2 pairs per sequence
    flops = 32 * 2 * b * (q * ctx + q * (q + 1) / 2) * 32 * (2 * 128)
    assert float(att.flops[0]) == pytest.approx(flops, rel=1e-9)
    # the cache is read once per step, at its current length, whatever q is
    read = b * (ctx + q) * 32 * 2 * 8 * 128 * 2
    assert float(att.bytes[0]) == pytest.approx(read + b * q * 32 * 2 * 8 * 128 * 2, rel=1e-9)


def test_compute_bound_gemm_at_large_batch():
    d = dep()
    t = step_time(d, [4096], 1, 0)
    mlp = t.ops["mlp"]
    flops = 2 * 4096 * 32 * 3 * 4096 * 14336
    assert float(mlp.flops[0]) == pytest.approx(flops, rel=1e-9)
    assert float(mlp.time[0]) == pytest.approx(flops / 989e12, rel=1e-9)  # hard max, compute side
    assert mlp.bound[0] == "compute"
    assert step_time(d, [1], 1, 0).ops["mlp"].bound[0] == "memory"


def test_tensor_parallel_shards_weights_and_adds_allreduce():
    one = step_time(dep(tp=1), [1], 1, 0)
    two = step_time(dep(tp=2), [1], 1, 0)
    assert float(two.ops["mlp"].bytes[0]) == pytest.approx(float(one.ops["mlp"].bytes[0]) / 2, rel=1e-6)
    # ring all-reduce: 2 per layer, each 2 (tp-1)/tp x message over the link (450 GB/s per direction)
    msg = 1 * 4096 * 2
    expected = 64 * 2 * 1 / 2 * msg / 450e9
    assert float(two.ops["allreduce"].time[0]) == pytest.approx(expected, rel=1e-9)
    assert "allreduce" not in one.ops


def test_allreduce_latency_grows_with_ring_hops():
    d8 = dep(tp=8, eff=GENERIC)
    d2 = dep(tp=2, eff=GENERIC)
    assert d8.allreduce_latency == pytest.approx(5e-6 + 14 * 2e-6)
    assert d2.allreduce_latency == pytest.approx(5e-6 + 2 * 2e-6)
    pcie = dep(hw="l40s", tp=4, eff=GENERIC)
    assert pcie.allreduce_latency == pytest.approx(5e-6 + 6 * 8e-6)


def test_expected_distinct_experts():
    e, k = 8, 2
    assert float(expected_distinct_experts(np.array(1.0), e, k)) == pytest.approx(2.0)
    assert float(expected_distinct_experts(np.array(2.0), e, k)) == pytest.approx(8 * (1 - 0.75**2))
    assert float(expected_distinct_experts(np.array(1e4), e, k)) == pytest.approx(8.0)


def test_moe_verify_reads_more_expert_weights_than_decode():
    d = dep("mixtral-8x7b", "h100-sxm", tp=2)
    dec = step_time(d, [1], 1, 0).ops["experts"]
    ver = step_time(d, [1], 4, 0).ops["experts"]
    per_expert = 3 * 4096 * 14336 * 2 / 2  # bf16 bytes, sharded over TP 2
    assert float(dec.bytes[0]) == pytest.approx(32 * 2 * per_expert, rel=1e-3)
    assert float(ver.bytes[0]) == pytest.approx(32 * 8 * (1 - 0.75**4) * per_expert, rel=1e-3)


def test_mla_cache_is_latent_and_replicated():
    d = dep("deepseek-v3", "h200", tp=8)
    att = step_time(d, [1], 1, 1000).ops["attention"]
    # 61 layers x (512 latent + 64 rope) x 2 bytes per token, the full latent on every rank
    assert float(att.bytes[0]) == pytest.approx(61 * 576 * 2 * 1001 + 61 * 576 * 2, rel=1e-9)


def test_sliding_window_caps_the_attended_context():
    d = dep("gpt-oss-20b", "h100-sxm")
    att = step_time(d, [1], 1, 10_000).ops["attention"]
    full = 12 * 2 * 8 * 64 * 2 * 10_001
    slid = 12 * 2 * 8 * 64 * 2 * 128
    write = 24 * 2 * 8 * 64 * 2
    assert float(att.bytes[0]) == pytest.approx(full + slid + write, rel=1e-9)


def test_mxfp4_quantises_only_experts_and_lm_head_stays_bf16():
    ops = {op.name: op for op in model_ops(load_model("gpt-oss-120b"))}
    assert ops["experts"].dtype == "mxfp4"
    assert ops["qkv_proj"].dtype == "bf16"
    assert ops["lm_head"].dtype == "bf16"
    fp8 = {op.name: op for op in model_ops(load_model("llama-3.1-8b"), "fp8")}
    assert fp8["mlp"].dtype == "fp8" and fp8["lm_head"].dtype == "bf16"


def test_combine_modes():
    m, c = np.array([3.0]), np.array([4.0])
    assert combine(m, c, "max", 2) == pytest.approx(4.0)
    assert combine(m, c, "sum", 2) == pytest.approx(7.0)
    assert combine(m, c, "smooth", 2) == pytest.approx(5.0)
    assert combine(np.array([0.0]), np.array([0.0]), "smooth", 1.5) == pytest.approx(0.0)


def test_overheads_add_per_layer_and_per_step():
    eff = Efficiency(layer_overhead_s=10e-6, step_overhead_s=1e-3, bandwidth_fraction=1, flops_fraction=1, distilled=False,
                     transition="max", sampler_bytes_per_vocab=0.0)
    base = float(step_time(dep(eff=SOL), [1], 1, 0).total[0])
    t = float(step_time(dep(eff=eff), [1], 1, 0).total[0])
    assert t - base == pytest.approx(32 * 10e-6 + 1e-3, rel=1e-6)


def test_memory_limit_70b_tp4_h100():
    d = dep("llama-3.1-70b", tp=4, eff=GENERIC)
    w = weight_bytes_per_gpu(d)
    # all 70.55 B params (norms aside) in bf16, split over 4 GPUs
    assert w == pytest.approx(70.55e9 * 2 / 4, rel=2e-3)
    kv_per_seq = 2049 * 80 * 2 * 8 * 128 * 2 / 4
    budget = 80e9 * 0.9 - 1.5e9 - w
    assert max_batch(d, 2048, slack_tokens=1) == int(budget // kv_per_seq)


def test_draft_weights_by_hand():
    from crossover.model.scenario import Scenario, draft_memory
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation

    # EAGLE on Llama-3.1-8B: one 4096-wide layer (qkv 4096 x 6144, o 4096 x 4096, mlp 3 x 4096 x 14336)
    # and fc 8192 -> 4096, bf16; the LM head is the target's
    d = dep("llama-3.1-8b", eff=GENERIC)
    w, _ = draft_memory(Scenario(d, Speculation("eagle", 3, Acceptance.rate(0.7)), 1000))
    assert w == (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336 + 8192 * 4096) * 2
    # DeepSeek-V3's MTP layer is fp8 like the rest: its 256 routed experts (3 x 7168 x 2048 each)
    # are 1 byte per weight, 1.409 GB per GPU at TP 8, plus its attention, shared expert and eh_proj
    ds = Deployment(model=load_model("deepseek-v3"), hardware=load_hardware("h200"), tp=8)
    w, _ = draft_memory(Scenario(ds, Speculation("mtp", 1, Acceptance.rate(0.8)), 1000))
    experts = 256 * 3 * 7168 * 2048 / 8
    assert experts < w < experts * 1.03


def test_batch_arrays_broadcast_with_context_arrays():
    d = dep(eff=GENERIC)
    t = step_time(d, np.array([1, 8, 64]), 1, np.array([100, 1000, 10000])).total
    assert t.shape == (3,) and np.all(np.diff(t) > 0)


def test_fp8_weights_on_a_chip_without_fp8_run_weight_only():
    # Ampere has no fp8 tensor cores: fp8 weights are read as 1 byte and computed at the bf16 rate
    a100 = dep("llama-3.1-8b", "a100-80gb-sxm", weight_dtype="fp8")
    bf16 = dep("llama-3.1-8b", "a100-80gb-sxm")
    assert a100.compute_dtype == "bf16" and a100.flops == bf16.flops
    mlp8 = step_time(a100, [1], 1, 0).ops["mlp"]
    mlp16 = step_time(bf16, [1], 1, 0).ops["mlp"]
    assert float(mlp8.bytes[0]) == pytest.approx(float(mlp16.bytes[0]) / 2, rel=1e-3)
    h100 = dep("llama-3.1-8b", "h100-sxm", weight_dtype="fp8")
    assert h100.compute_dtype == "fp8"


def test_expert_parallel_keeps_the_moe_all_reduce_and_reads_the_busiest_gpus_whole_experts():
    # vLLM 0.14.1 (fused_moe/config.py use_all2all_kernels = dp_size > 1 and use_ep) and SGLang 0.5.5
    # (moe_a2a_backend "none"): under TP attention every GPU holds the batch's hidden states, runs its
    # own experts and the partial outputs are all-reduced as under TP; all-to-alls need DP attention
    m = "qwen3-235b-a22b"  # 94 layers, all MoE, top-8
    tp_ = dep(m, "h200", tp=8, eff=GENERIC)
    ep = dep(m, "h200", tp=8, eff=GENERIC, expert_parallel=True)
    lat = tp_.allreduce_latency
    msg = 4096 * 2  # one token's hidden state, bf16
    link = 450e9 * 0.8
    for d in (tp_, ep):  # 2 all-reduces per layer, the same with experts split whole
        t = float(step_time(d, [1], 1, 0).ops["allreduce"].time[0])
        assert t == pytest.approx(188 * (2 * 7 / 8 * msg / link + lat), rel=1e-9)
    # the experts: one token touches 8 of 128 per layer; under TP each GPU reads 1/8 of each of them,
    # under EP the busiest GPU (16 whole experts) reads its own touched ones, more than 1/8 of 8 whole
    e_tp = float(step_time(tp_, [1], 1, 0).ops["experts"].bytes[0])
    e_ep = float(step_time(ep, [1], 1, 0).ops["experts"].bytes[0])
    assert e_ep > e_tp
