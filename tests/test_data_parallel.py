"""Data parallelism (Deployment.data_parallel: vLLM -dp, SGLang --dp-size with --enable-dp-attention): each
rank's attention and dense layers over its own sequences at --tp, a MoE's routed experts over every rank's
tokens on all tp x dp GPUs with the MoE layers' gather and reduce-scatter across the ranks, the busiest rank
setting the step; each rank's own KV cache and scheduler limits; a dense model's ranks replicas.
Hand-computed where a formula is new."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crossover
from crossover.errors import CrossoverError
from crossover.model import memory
from crossover.model.collectives import collectives
from crossover.model.forward import Forward, Mix
from crossover.model.ops import model_ops
from crossover.model.step import StepModel
from crossover.serving.engine import EngineLimits, kv_capacity_tokens
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.deployment import Efficiency
from crossover.specs.parallel import dp_problem


def _dep(model="mixtral-8x7b", hw="h100-sxm", tp=1, dp=1, **kw):
    return Deployment(model=load_model(model), hardware=load_hardware(hw), tp=tp, data_parallel=dp, **kw)


def test_the_moe_gather_and_reduce_scatter_by_hand():
    """Mixtral (32 MoE layers, hidden 4096) at tp 1 over 4 ranks: per token of one rank, each MoE layer moves
    (dp - 1) x 4096 x 2 bytes in and as many out on each GPU's link; two calls of 3 ring steps per layer."""
    d = _dep(dp=4)
    per_token, latency = collectives(d, model_ops(d.model, d.wdtype, d.tp))
    assert per_token == pytest.approx(32 * 2 * 3 * 4096 * 2 / d.link_bandwidth, rel=1e-12)
    eff, hop = d.efficiency, d.hardware.allreduce_hop_latency_s
    hop = hop if eff.allreduce_hop_latency_s is None else eff.allreduce_hop_latency_s
    assert latency == pytest.approx(32 * 2 * (eff.allreduce_base_latency_s + 3 * hop), rel=1e-12)
    # no ranks, no gathers; a dense model's ops carry no MoE layer to gather for
    assert collectives(_dep(dp=1), model_ops(d.model, d.wdtype, 1)) == (0.0, 0.0)


def test_the_busiest_rank_takes_its_share_of_every_sum():
    """5 sequences over 2 ranks: the busiest holds 3, so every sum of the step is 3/5 of the whole; no
    sequences, no work."""
    f = Forward(np.array([10.0, 0.0]), np.array([[500.0, 0.0]]), np.array([[700.0, 0.0]]), np.array([5.0, 0.0]))
    m = Mix(f, np.array([5.0, 0.0]), sequences=np.array([5.0, 0.0])).busiest_rank(2)
    assert m.target.tokens.tolist() == pytest.approx([6.0, 0.0])
    assert m.target.kv[0].tolist() == pytest.approx([300.0, 0.0])
    assert m.target.sampled.tolist() == pytest.approx([3.0, 0.0])
    assert np.asarray(m.verifying).tolist() == pytest.approx([3.0, 0.0])
    # one sequence on 8 ranks: the others step too (vLLM's dummy batches), padded to the busiest's one
    one = Mix(Forward(np.array(1.0), np.array([100.0]), np.array([100.0]))).busiest_rank(8)
    assert float(one.target.tokens) == 1.0


def test_each_op_is_a_ranks_or_the_whole_groups():
    """At tp 1 over 2 ranks and 16 sequences: attention and the dense rows cost what a tp-1 engine's do at
    the busiest rank's 8 sequences; the routed experts what a tp-2 engine's do at all 16 (split over 2 GPUs)."""
    dp2, tp1, tp2 = _dep(dp=2), _dep(), _dep(tp=2)

    def ops(dep, batch):
        sm = StepModel.of(dep)
        return sm.price(sm.decode(np.array(float(batch)), 2048.0), detail=True).target.ops

    got, rank, whole = ops(dp2, 16), ops(tp1, 8), ops(tp2, 16)
    for name in ("attention", "qkv_proj", "o_proj", "router", "lm_head"):
        assert got[name].time == pytest.approx(rank[name].time, rel=1e-12), name
    assert got["experts"].time == pytest.approx(whole["experts"].time, rel=1e-12)
    assert got["experts"].bytes == pytest.approx(whole["experts"].bytes, rel=1e-12)


def test_weights_kv_and_limits_per_rank():
    """The experts split over tp x dp GPUs, the rest held by every rank; each rank holds its own sequences'
    KV cache and schedules its own max_num_seqs."""
    dp2, tp1 = _dep(dp=2), _dep()
    ops = model_ops(tp1.model, tp1.wdtype, 1)
    experts = sum(op.count * op.num_experts * op.params * 2 for op in ops if op.kind == "experts")  # bf16
    assert memory.weight_bytes_per_gpu(dp2) == pytest.approx(memory.weight_bytes_per_gpu(tp1) - experts / 2)
    per_seq = memory.kv_bytes_per_seq_per_gpu(dp2, ops, 4096.0)
    assert memory.max_batch(dp2, 4096.0) == 2 * int(memory.kv_budget_bytes(dp2, ops) // per_seq)
    assert kv_capacity_tokens(dp2) == pytest.approx(
        2 * memory.kv_budget_bytes(dp2, ops) / memory.kv_bytes_per_seq_per_gpu(dp2, ops, 1.0))
    lim, one = EngineLimits.of(dp2), EngineLimits.of(tp1)
    assert (lim.max_num_seqs, lim.max_num_batched_tokens) == (2 * one.max_num_seqs, 2 * one.max_num_batched_tokens)
    assert EngineLimits.of(dp2, max_num_seqs=64).max_num_seqs == 128


def test_mla_latent_cache_is_read_per_rank_not_replicated():
    """DeepSeek-V3's latent KV is whole on every GPU of a TP group; over 8 ranks of one GPU each, a GPU
    reads only its rank's sequences' cache: 1/8 of the KV bytes of tp 8 at the same batch."""
    tp8 = _dep("deepseek-v3", "h200", tp=8, weight_dtype="fp8")
    dp8 = _dep("deepseek-v3", "h200", tp=1, dp=8, weight_dtype="fp8")

    def kv_bytes(dep):
        sm = StepModel.of(dep)
        return float(sm.price(sm.decode(np.array(64.0), 4096.0), detail=True).target.ops["attention"].bytes)

    assert kv_bytes(dp8) == pytest.approx(kv_bytes(tp8) / 8, rel=1e-9)


def test_a_dense_models_ranks_are_replicas():
    """Llama-3.1-8B over 2 ranks of one H100: no collectives, and 16 sequences step as one replica's 8 do
    (engine overheads included); twice the sequences fit."""
    rep, one = _dep("llama-3.1-8b", dp=2), _dep("llama-3.1-8b")
    assert collectives(rep, model_ops(rep.model, rep.wdtype, 1)) == (0.0, 0.0)
    sr, so = StepModel.of(rep), StepModel.of(one)
    assert float(sr.price(sr.decode(np.array(16.0), 2048.0)).total) == pytest.approx(
        float(so.price(so.decode(np.array(8.0), 2048.0)).total), rel=1e-12)
    assert memory.max_batch(rep, 2048.0) == 2 * memory.max_batch(one, 2048.0)
    assert dp_problem(rep.model, rep.hardware, 1, 2) is None


def test_layouts_no_engine_runs_are_one_line_errors():
    """A MoE model's experts must split over tp x dp GPUs in one box; --dp is a whole number."""
    hw = load_hardware("h100-sxm")
    mix = load_model("mixtral-8x7b")
    assert dp_problem(mix, hw, 1, 8, expert_parallel=True) is None
    assert "experts do not split" in dp_problem(mix, hw, 1, 3, expert_parallel=True)
    assert "holds 8 GPUs" in dp_problem(mix, hw, 4, 4, expert_parallel=True)
    with pytest.raises(CrossoverError, match="experts do not split"):
        crossover.scenario(model="mixtral-8x7b", hardware="h100-sxm", tp=1, data_parallel=3, expert_parallel=True)
    with pytest.raises(CrossoverError, match=r"--dp\) must be an integer"):
        crossover.scenario(model="mixtral-8x7b", hardware="h100-sxm", tp=1, data_parallel=1.5)
    with pytest.raises(CrossoverError, match=r"at most 64"):
        crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, data_parallel=1000)
    with pytest.raises(CrossoverError, match=r"64 data-parallel ranks of 4096 running sequences each exceed"):
        EngineLimits.of(_dep("llama-3.1-8b", dp=64), max_num_seqs=4096)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(layout=st.sampled_from([("deepseek-v3", "h200", 1, 8), ("deepseek-v3", "h200", 4, 2),
                               ("mixtral-8x7b", "h100-sxm", 1, 2), ("qwen3-235b-a22b", "h200", 2, 4)]),
       engine=st.sampled_from(["vllm", "sglang"]), ep=st.booleans(), b1=st.floats(1, 600),
       extra=st.floats(0, 300), ctx=st.floats(0, 8000), spec_on=st.booleans())
def test_a_larger_batch_never_steps_faster_and_no_step_beats_the_speed_of_light(layout, engine, ep, b1, extra,
                                                                               ctx, spec_on):
    """Under data-parallel attention, with and without expert parallelism and speculation: more sequences
    never cost less, and the engine's step is never cheaper than the same step at 100% of peak without
    overheads."""
    model, hw, tp, dp = layout
    method = "mtp" if model == "deepseek-v3" else "eagle"
    sc = crossover.scenario(model=model, hardware=hw, tp=tp, data_parallel=dp, expert_parallel=ep, method=method,
                            k=2, acceptance=0.7, engine=engine, weight_dtype="fp8")
    m = StepModel.of(sc.deployment, sc.speculation)
    spec = sc.speculation if spec_on else None
    t = m.price(m.decode(np.array([b1, b1 + extra]), ctx, spec)).total
    assert t[1] >= t[0] * (1 - 1e-12)
    light = sc.deployment.model_copy(update={"efficiency": Efficiency.speed_of_light()})
    ml = StepModel.of(light, sc.speculation)
    assert np.all(ml.price(ml.decode(np.array([b1, b1 + extra]), ctx, spec)).total <= t * (1 + 1e-12))


def test_the_cli_takes_dp_and_says_it():
    """`--dp` reaches the deployment and the header names the GPUs it runs on; JSON says the ranks."""
    import json

    from conftest import run_cli

    r = run_cli("predict", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "1", "--dp", "8", "--method",
                "mtp", "--k", "1", "--weight-dtype", "fp8", "--batch", "1,64")
    assert r.returncode == 0 and "deepseek-v3 on 8 x h200 (8 data-parallel ranks of tp 1)" in r.stdout
    r = run_cli("predict", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "1", "--dp", "8", "--method",
                "mtp", "--k", "1", "--weight-dtype", "fp8", "--batch", "1,64", "--json")
    assert json.loads(r.stdout)["inputs"]["data_parallel"] == 8
    r = run_cli("predict", "--model", "mixtral-8x7b", "--hardware", "h100-sxm", "--tp", "1", "--dp", "two")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--dp" in r.stderr


def test_a_calibration_fitted_at_other_data_parallelism_transfers_only_when_forced():
    """A fit's efficiencies were measured on its layout: one saved at --dp 2 refuses --dp 1 without --force,
    and a file that names no data parallelism was fitted at 1."""
    from crossover.analysis.calibration import check_transfer

    saved = {"model": "mixtral-8x7b", "hardware": "h100-sxm", "tp": 1, "data_parallel": 2}
    assert check_transfer(saved, "mixtral-8x7b", "h100-sxm", 1, data_parallel=2) is None
    with pytest.raises(CrossoverError, match="data_parallel 2 -> 1"):
        check_transfer(saved, "mixtral-8x7b", "h100-sxm", 1)
    assert "data_parallel 1 -> 4" in check_transfer({**saved, "data_parallel": 1}, "mixtral-8x7b", "h100-sxm", 1,
                                                    force=True, data_parallel=4)
    old = {"model": "mixtral-8x7b", "hardware": "h100-sxm", "tp": 1}
    assert check_transfer(old, "mixtral-8x7b", "h100-sxm", 1) is None
    with pytest.raises(CrossoverError, match="data_parallel 1 -> 2"):
        check_transfer(old, "mixtral-8x7b", "h100-sxm", 1, data_parallel=2)


def test_plan_searches_data_parallel_layouts():
    """`plan --dp`: a replica of D ranks is D x tp GPUs (priced and counted so), each rank schedules the
    engine's default running sequences, a layout the node cannot hold is dropped with its reason, and --dp
    outside 1..64 is a one-line error."""
    from conftest import assert_one_line_error, run_cli

    from crossover.api.records import SLO, Demand, Search, Verification
    from crossover.specs.workload import fixed

    res = crossover.plan("mixtral-8x7b", fixed(512, 128), demand=Demand(peak_rps=20), slo=SLO(tpot_ms=60),
                         search=Search(hardware=["h100-sxm"], tp=[1], weight_dtype=["fp8"], data_parallel=[1, 2, 16]),
                         verification=Verification(verify=0, jobs=1))
    by = {(o.data_parallel, o.arm): o for o in res.options}
    one, two = by[(1, "off")], by[(2, "off")]
    assert two.replica_gpus == 2 and two.gpus == two.replicas * 2 and two.layout == "tp 1 dp 2"
    assert two.max_num_seqs == 2 * one.max_num_seqs  # vLLM's --max-num-seqs is each rank's
    d = two.to_dict()
    assert d["data_parallel"] == 2 and d["tokens_per_s_per_gpu"] == pytest.approx(d["tokens_per_s_per_replica"] / 2,
                                                                                 abs=0.01)
    dropped = [o for o in res.plan.dropped if o.data_parallel == 16]
    assert dropped and all("dp 16 refused" in o.dropped_because for o in dropped)
    for bad in ("0", "100"):
        r = run_cli("plan", "--model", "mixtral-8x7b", "--workload", "sharegpt", "--peak-rps", "5", "--slo-tpot-ms",
                    "60", "--hardware", "h100-sxm", "--tp", "1", "--dp", bad)
        assert_one_line_error(r, "--dp")
