"""Engine profiles (engines/*.yaml) applied by the step model: hand-computed cases per profile, the
batch-expansion verify of vLLM V0, the CUDA-graph limit, the n-gram lookup, and the property that no
profile prices a step below the roofline's speed of light."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import run_cli, vllm_scrape
from hypothesis import given, settings
from hypothesis import strategies as st

import crossover
from crossover.model.acceptance import Acceptance
from crossover.api.build import ENGINES, engines
from crossover.cli import main
from crossover.model.scenario import Scenario
from crossover.errors import CrossoverError
from crossover.specs import Deployment, Efficiency, load_hardware, load_model
from crossover.specs.loader import load_engine
from crossover.model.speculation import Speculation
from crossover.model.forward import uniform
from crossover.model.step import Mix, StepModel

H100 = load_hardware("h100-sxm")
L8B = load_model("llama-3.1-8b")


def _dep(engine: str, model=L8B, tp: int = 1, **eff) -> Deployment:
    return Deployment(model=model, hardware=H100, tp=tp, engine=load_engine(engine), efficiency=Efficiency(**eff))


def test_every_shipped_profile_loads_with_a_source_for_every_value():
    assert set(ENGINES) == set(engines())
    for name in ENGINES:
        p = load_engine(name)
        for field in ("step_overhead_ms", "spec_step_overhead_ms", "spec_per_seq_us", "draft_pass_overhead_ms",
                      "verify_layout", "graph_capture_limit", "eager_layer_us", "ngram_lookup_per_seq_us",
                      "ngram_miss"):
            assert p.sources.get(field), f"{name}: {field} has no source"
        assert p.version and p.framework in ("vllm", "sglang", "trtllm", "hf")


@pytest.mark.parametrize("name", ENGINES)
def test_each_profile_prices_an_eagle_step_by_hand(name):
    """Off: forward + step overhead. On (batch 8, k = 3, EAGLE): verify forward + step overhead +
    3 draft passes with their launches + the per-step and per-sequence bookkeeping (all profiles
    below their graph limits at this size, except hf which never captures)."""
    p = load_engine(name)
    dep = _dep(name)
    spec = Speculation("eagle", 3, Acceptance.rate(0.7))
    model = StepModel.of(dep, spec)
    b, ctx = 8.0, 1024.0
    fwd_on = model.target.evaluate(*model.target.uniform_sums(b, 4.0, ctx)).total
    fwd_off = model.target.evaluate(*model.target.uniform_sums(b, 1.0, ctx)).total
    if p.verify_layout == "batch_expansion":  # each of the 4 positions re-reads the cache
        t, kv, qk = model.target.uniform_sums(b, 4.0, ctx)
        fwd_on = model.target.evaluate(t, qk, qk).total
    floor = model.target_layers * p.eager_layer_us / 1e6
    if p.graph_capture_limit == 0:
        fwd_on, fwd_off = max(fwd_on, floor), max(fwd_off, floor)
    draft = model.draft.evaluate(*model.draft.uniform_sums(b, 1.0, ctx)).total
    # the head's catch-up on the 4 verified positions (logits at one per request): in its first pass
    # (vLLM V1), in a forward of its own (SGLang), or none (draft passes carry no eager floor: their
    # launches are draft_pass_overhead)
    t4, kv4, qk4 = model.draft.uniform_sums(b, 4.0, ctx)
    wide = model.draft.evaluate(t4, kv4, qk4, b).total
    passes = {"first_pass": wide + 2 * draft, "extra_pass": wide + 3 * draft, "none": 3 * draft}[p.draft_catch_up]
    launches = (4 if p.draft_catch_up == "extra_pass" else 3) * p.draft_pass_overhead_ms / 1e3
    outside = 0.0 if p.full_graphs else b * p.ragged_per_seq_us / 1e6  # attention outside the graph, every step
    # the verify batches that miss a full graph (vLLM V1: half of them) run their attention outside it
    outside_on = b * p.ragged_per_seq_us / 1e6 * (p.spec_graph_miss if p.full_graphs else 1.0)
    # the sampler over Llama-3.1-8B's 128256-entry vocabulary at the achieved bandwidth: off, 8 sampled
    # positions; on, 8 bonus positions at the plain sampler's bytes and their bonus rows' extra, and
    # 8 x 3 drafts at the verify bytes
    vocab, bw = 128256, dep.bandwidth
    sampler_off = 8 * p.sampler_bytes_per_vocab * vocab / bw
    sampler_on = (8 * (p.sampler_bytes_per_vocab + p.bonus_bytes_per_vocab) + 24 * p.verify_bytes_per_vocab) * vocab / bw
    positions = 8 * 4 * p.spec_per_position_us / 1e6  # every verified position, bonus included
    want_on = (fwd_on + p.step_overhead_ms / 1e3 + passes + launches
               + p.spec_step_overhead_ms / 1e3 + b * p.spec_per_seq_us / 1e6 + outside_on + sampler_on + positions)
    want_off = fwd_off + p.step_overhead_ms / 1e3 + outside + sampler_off
    # the host work per running sequence (8 of them) and per step: the whole of it where the server
    # steps synchronously (vLLM 0.10; SGLang's speculating server, 0.7 ms), the step max(rest, host)
    # where it schedules asynchronously (vLLM 0.14, which keeps that for EAGLE; SGLang without
    # speculation): 8 x 12.7 us or 0.7 ms is far below either step, so nothing there
    host = b * p.host_per_seq_us / 1e6 + p.host_per_step_us / 1e6
    want_on = max(want_on, host) if p.overlaps("eagle") else want_on + host
    want_off = max(want_off, host) if p.overlaps(None) else want_off + host
    on = model.price(model.decode(np.array([b]), ctx, spec)).total[0]
    off = model.price(model.decode(np.array([b]), ctx)).total[0]
    assert on == pytest.approx(float(want_on), rel=1e-12)
    assert off == pytest.approx(float(want_off), rel=1e-12)


def test_batch_expansion_reads_the_kv_cache_once_per_verified_position():
    """vLLM V0 at batch 64, k = 4, context 2000 on Llama-3.1-8B: the attention KV read of the verify
    forward is 5 sequences' worth per request, sum_j (2000 + j) for j = 1..5 = 10015 tokens,
    against 2005 for one multi-query pass; the FLOPs are the same."""
    v1, v0 = StepModel.of(_dep("vllm")), StepModel.of(_dep("vllm-v0"))
    spec = Speculation("ngram", 4, Acceptance.rate(0.6))
    m1, m0 = v1.decode(np.array([64.0]), 2000.0, spec), v0.decode(np.array([64.0]), 2000.0, spec)
    assert float(m1.target.kv[0][0]) == pytest.approx(64 * 2005)
    assert float(m1.target.kv[0][0] + m1.target.expansion[0][0]) == pytest.approx(64 * 10015)
    d1 = v1.price(m1, detail=True).ops["attention"]
    d0 = v0.price(m0, detail=True).ops["attention"]
    assert float(d0.flops[0]) == pytest.approx(float(d1.flops[0]))
    kv_per_token = float(d1.bytes[0]) / (64 * 2005)  # attention bytes are KV reads (+ small writes)
    assert float(d0.bytes[0]) > 4.5 * float(d1.bytes[0]) and kv_per_token > 0
    # decode (q = 1) is the same in both layouts
    off1, off0 = v1.price(v1.decode(np.array([64.0]), 2000.0)), v0.price(v0.decode(np.array([64.0]), 2000.0))
    assert float(off0.term("target_forward")[0]) == pytest.approx(float(off1.term("target_forward")[0]))


def test_the_simulator_scores_by_batch_expansion_too():
    """The serving simulator's ragged verify carries the same expansion (one pricing)."""
    dep = _dep("vllm-v0")
    spec = Speculation("ngram", 3, Acceptance.rate(0.6))
    model = StepModel.of(dep, spec)
    q = np.array([[4.0, 4.0, 4.0]])
    ctx = np.array([[1000.0, 1000.0, 1000.0]])
    rag = model.ragged_target(q, ctx, verifying=np.ones_like(q, bool))
    uni = uniform(model.target, 3.0, 4.0, 1000.0)
    np.testing.assert_allclose((rag.kv + rag.expansion).ravel(), (uni.kv + uni.expansion).ravel(), rtol=1e-12)
    v1 = StepModel.of(_dep("vllm"), spec).ragged_target(q, ctx, verifying=np.ones_like(q, bool))
    assert np.all(np.asarray(v1.expansion) == 0.0)  # multi-query engines keep one read


def test_an_eager_step_takes_at_least_its_layers_launch_time():
    """hf never captures a graph: a batch-1 decode of Llama-3.2-1B (16 layers) on an H100 takes at
    least 16 x 45 us; a step beyond vLLM V1's 512-token capture limit runs eagerly as well."""
    small = load_model("llama-3.2-1b")
    dep = _dep("hf", model=small)
    model = StepModel.of(dep)
    fwd = model.target.evaluate(*model.target.uniform_sums(1.0, 1.0, 100.0)).total
    got = model.price(model.decode(np.array([1.0]), 100.0)).term("target_forward")[0]
    assert model.target_layers == 16
    assert float(got) == pytest.approx(max(float(fwd), 16 * 45e-6))
    from crossover.model.graphs import eager_steps

    v1 = StepModel.of(_dep("vllm", model=small))
    b = np.array([400.0, 600.0])  # 400 tokens graphed, 600 eager
    mix = v1.decode(b, 100.0)
    eager = eager_steps(mix.target.tokens, np.zeros(2), v1.deployment.engine, False)
    assert eager is not None and list(eager) == [False, True]


def test_ngram_lookup_is_a_cpu_cost_per_verifying_sequence():
    dep = _dep("vllm-v0")
    spec = Speculation("ngram", 4, Acceptance.rate(0.6))
    model = StepModel.of(dep, spec)
    st_ = model.price(model.decode(np.array([10.0, 100.0]), 1000.0, spec))
    np.testing.assert_allclose(st_.term("proposer_lookup"), [10 * 166e-6, 100 * 166e-6], rtol=1e-12)
    eagle = StepModel.of(dep, Speculation("eagle", 4, Acceptance.rate(0.6)))
    assert float(eagle.price(eagle.decode(np.array([10.0]), 1000.0, Speculation("eagle", 4, Acceptance.rate(0.6))))
                 .term("proposer_lookup")[0]) == 0.0


def test_v0_crosses_far_earlier_than_v1_for_70b_ngram():
    """The mechanism of vLLM's 2024 blog: with batch expansion the n-gram crossover for Llama-3-70B
    on 4 x H100 comes far earlier than with V1's multi-query verify."""
    kw = dict(model="llama-3-70b", hardware="h100-sxm", tp=4, method="ngram", k=4, acceptance=0.7, context=1000)
    v0 = crossover.predict(crossover.scenario(engine="vllm-v0", **kw)).crossover_batch
    v1 = crossover.predict(crossover.scenario(engine="vllm", **kw)).crossover_batch
    assert v0 is not None and (v1 is None or v1 > 1.5 * v0)


def test_unknown_engine_and_cost_are_one_line_errors(capsys):
    with pytest.raises(CrossoverError, match="unknown engine 'vllm1'"):
        crossover.scenario(engine="vllm1")
    assert main(["predict", "--engine", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown engine 'nope'" in err


def test_outputs_name_the_engine(capsys):
    assert main(["predict", "--engine", "vllm-v0", "--method", "ngram", "--batch", "1,8"]) == 0
    out = capsys.readouterr().out
    assert "engine: vLLM V0 0.6.x (verify by batch expansion" in out
    assert main(["predict", "--engine", "sglang", "--batch", "1", "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)
    assert d["inputs"]["engine"] == "sglang" and d["inputs"]["verify_layout"] == "multi_query"
    assert d["inputs"]["efficiency"]["spec_overhead_s"] == pytest.approx(0.8e-3)
    assert d["inputs"]["efficiency"]["host_per_step_s"] == pytest.approx(0.7e-3)


def test_outputs_say_where_a_proposer_turns_async_scheduling_off(capsys):
    """vLLM 0.14 keeps async scheduling for EAGLE-type drafts only (vllm/config/vllm.py); the host work
    the other proposers then expose is priced at the profile's figure, a lower bound, and the engine
    line says so."""
    import json
    said = "async scheduling off with the draft proposer: the host work it hides without speculation (12.7 us"
    for engine, method, off, on, setting in (("vllm", "draft", True, False, "on"), ("vllm", "eagle3", True, True, "on"),
                                             ("vllm-0.10", "draft", False, False, "off"),
                                             ("sglang", "ngram", True, False, "on")):
        args = ["predict", "--engine", engine, "--method", method, "--batch", "1,8"]
        args += ["--draft", "llama-3.2-1b"] if method == "draft" else []
        assert main(args) == 0
        assert (said in capsys.readouterr().out) == (method == "draft" and engine == "vllm")
        assert main([*args, "--json"]) == 0
        name = "async scheduling" if engine.startswith("vllm") else "the overlap scheduler"
        assert json.loads(capsys.readouterr().out)["inputs"]["async_scheduling"] == {"off": off, "on": on,
                                                                                      "setting": setting, "name": name}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ENGINES), batch=st.floats(1, 512), k=st.integers(1, 8),
       ctx=st.floats(0, 32000), method=st.sampled_from(["eagle", "ngram", "medusa"]))
def test_no_engine_profile_prices_a_step_below_the_speed_of_light(name, batch, k, ctx, method):
    spec = Speculation(method, k, Acceptance.rate(0.6))
    real = StepModel.of(_dep(name), spec)
    light_dep = Deployment(model=L8B, hardware=H100, engine=load_engine(name), efficiency=Efficiency.speed_of_light())
    light = StepModel.of(light_dep, spec)
    b = np.array([batch])
    for s in (None, spec):
        t = real.price(real.decode(b, ctx, s)).total[0]
        bound = light.price(light.decode(b, ctx, s)).total[0]
        assert t >= bound * (1 - 1e-12)
    # and the speed of light itself carries no engine term
    terms = light.price(light.decode(b, ctx, spec)).terms
    for term in ("step_overhead", "spec_overhead", "spec_overhead_per_seq", "draft_step_overhead", "proposer_lookup"):
        assert np.all(np.asarray(terms[term]) == 0.0)


def test_predict_breakdown_names_the_cost_mode_of_every_op(capsys):
    assert main(["predict", "--batch", "1,64", "--breakdown", "64", "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)["breakdown"]
    assert d["batch"] == 64 and {r["priced_by"] for r in d["ops"]} == {"roofline"}
    total_on = sum(t["on_ms"] for t in d["terms"].values())
    assert total_on == pytest.approx(d["total_on_ms"], rel=1e-5)
    assert main(["predict", "--breakdown", "1,2"]) == 2
    assert "one batch" in capsys.readouterr().err


def test_ngram_match_rate_defaults_to_the_published_proposal_rate_and_is_shown(capsys):
    sc = crossover.scenario(method="ngram")
    assert sc.speculation.acceptance.match_rate == 0.55  # vllm PR #24344: 993 of 1,814 steps drafted
    assert crossover.scenario(method="ngram", workload="cnn-dailymail").speculation.acceptance.match_rate == 0.8
    assert crossover.scenario(method="eagle").speculation.acceptance.match_rate == 1.0
    assert main(["predict", "--method", "ngram", "--batch", "1"]) == 0
    assert "match rate 0.55: the crossover moves with it" in capsys.readouterr().out


def test_a_ragged_step_pays_attention_outside_the_graph_per_sequence():
    """vLLM V1: n-gram at match rate 0.55 verifies 1 or k+1 positions per sequence (a ragged batch,
    PIECEWISE graphs): 40 us per sequence, once (not again as the full-graph miss of a uniform verify);
    EAGLE's uniform verify pays it where it misses a FULL graph, half the time (spec_graph_miss); a step
    that prefills prompts beside decodes is ragged in both arms; SGLang pads n-gram drafts (uniform)."""
    dep = _dep("vllm")
    ngram = Speculation("ngram", 4, Acceptance.rate(0.6, match_rate=0.55))
    m = StepModel.of(dep, ngram)
    b = np.array([10.0, 100.0])
    st_ = m.price(m.decode(b, 1000.0, ngram))
    np.testing.assert_allclose(st_.term("ragged_attention"), b * 40e-6, rtol=1e-12)
    assert np.all(st_.term("spec_overhead_per_seq") == 0.0)
    eagle = Speculation("eagle", 4, Acceptance.rate(0.6))
    me = StepModel.of(dep, eagle)
    np.testing.assert_allclose(me.price(me.decode(b, 1000.0, eagle)).term("ragged_attention"), b * 0.5 * 40e-6,
                               rtol=1e-12)
    assert np.all(me.price(me.decode(b, 1000.0)).term("ragged_attention") == 0.0)  # the off arm's full graphs
    mixed = me.price(me.with_prompts(np.array([30.0]), np.array([2.0]), 100.0, 1000.0))  # off arm, 230 tokens
    # a mean step with 2 prompts: prompts arrive independently, so 1 - e^-2 of the steps carry one
    assert float(mixed.term("ragged_attention")[0]) == pytest.approx(32 * 40e-6 * (1 - np.exp(-2.0)))
    # the on arm: the steps with a prompt chunk are ragged, half of the others miss their FULL graph
    mixed_on = me.price(me.with_prompts(np.array([30.0]), np.array([2.0]), 100.0, 1000.0, eagle))
    assert float(mixed_on.term("ragged_attention")[0]) == pytest.approx(
        32 * 40e-6 * (1 - np.exp(-2.0) * (1 - 0.5)))
    big = np.array([300.0])  # 300 x 3.2 = 960 tokens: beyond V1's 512-token capture, eager, still ragged
    np.testing.assert_allclose(m.price(m.decode(big, 1000.0, ngram)).term("ragged_attention"), big * 40e-6)
    padded = replace(ngram, pad_misses=True)
    sg = StepModel.of(_dep("sglang"), padded)
    assert np.all(sg.price(sg.decode(b, 1000.0, padded)).term("ragged_attention") == 0.0)


def test_vllm_0_10_runs_every_step_piecewise_so_both_arms_pay_attention_outside_the_graph():
    """vLLM V1 before 0.11 captures PIECEWISE graphs only: a plain decode step pays 40 us per sequence
    too, and the verify batch no extra (no FULL graph to miss). By hand at batch 64, context 2048, n-gram
    k = 3: off = forward + 1 ms + 64 x 40 us + the scheduler's 64 x 12.7 us; on = verify forward + 1 ms + 0.8 ms
    + the lookup (64 x 2.6 us and 1.04 ns per token of the 64 x (2048 + verify width) searched) + 64 x 40 us
    + 64 x 12.7 us. Speculation, fewer steps per token, pays the per-sequence cost less often: at batch 128
    the 0.10 profile predicts a larger speedup than the 0.11+ one, at batch 1 about the same."""
    old, new = load_engine("vllm"), load_engine("vllm-0.10")
    assert old.full_graphs and not new.full_graphs and new.spec_per_seq_us == 0.0
    dep = _dep("vllm-0.10")
    ngram = Speculation("ngram", 3, Acceptance.mean_length(2.2, match_rate=0.55))
    m = StepModel.of(dep, ngram)
    b = np.array([64.0])
    off, on = m.price(m.decode(b, 2048.0)), m.price(m.decode(b, 2048.0, ngram))
    fwd_off = m.target.evaluate(*m.target.uniform_sums(b, 1.0, 2048.0)).total
    samp_off = 64 * 10 * 128256 / dep.bandwidth  # the V1 sampler: 10 B per vocabulary entry
    w = ngram.verify_width  # drafts per sequence w - 1 at the rejection sampler's 30 B, and each bonus row's
    samp_on = (64 * (10 + 10) + 64 * (w - 1) * 30) * 128256 / dep.bandwidth  # gather and copy (10 B)
    host = 64 * 12.7e-6  # the scheduler's 12.7 us per running sequence, every step (0.10 steps synchronously)
    assert off.total[0] == pytest.approx(float(fwd_off[0]) + 1e-3 + 64 * 40e-6 + samp_off + host, rel=1e-12)
    assert off.term("host_work")[0] == on.term("host_work")[0] == pytest.approx(host)
    assert off.term("ragged_attention")[0] == pytest.approx(64 * 40e-6)
    assert on.term("ragged_attention")[0] == pytest.approx(64 * 40e-6)
    assert on.term("spec_overhead_per_seq")[0] == 0.0
    lookup = 64 * 2.6e-6 + 64 * (2048.0 + w) * 1.04e-9
    want = (on.term("target_forward")[0] + 1e-3 + 0.8e-3 + lookup + 64 * 40e-6 + samp_on + host)
    assert on.total[0] == pytest.approx(float(want), rel=1e-12)
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=3, tau=2.2)
    s10 = crossover.predict(crossover.scenario(engine="vllm-0.10", **kw), batches=[1, 128])
    s11 = crossover.predict(crossover.scenario(engine="vllm", **kw), batches=[1, 128])
    s10, s11 = s10.prediction.speedup, s11.prediction.speedup
    assert s10[1] > s11[1] + 0.2
    assert s10[0] == pytest.approx(s11[0], rel=0.02)


def test_an_engine_that_pads_ngram_drafts_verifies_k_plus_1_positions_on_a_miss():
    """SGLang and TensorRT-LLM pad a sequence without an n-gram match to k drafts: at match rate
    0.55 and k = 4 every sequence verifies 5 positions (vLLM: 1 + 0.55 x 4 = 3.2), tau is the same
    (1 + 0.55 x sum of survival), and the step's target forward prices 5 query tokens per sequence."""
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=4, acceptance=0.6, match_rate=0.55)
    v1 = crossover.scenario(engine="vllm", **kw)
    sg = crossover.scenario(engine="sglang", **kw)
    trt = crossover.scenario(engine="trtllm", **kw)
    assert v1.speculation.verify_width == pytest.approx(1 + 0.55 * 4)
    assert sg.speculation.verify_width == trt.speculation.verify_width == 5.0
    surv = 0.6 + 0.36 + 0.216 + 0.1296
    assert sg.speculation.tau == pytest.approx(v1.speculation.tau) == pytest.approx(1 + 0.55 * surv)
    # a Scenario takes the engine's rule even from a hand-built speculation
    again = Scenario(sg.deployment, replace(sg.speculation, pad_misses=False))
    assert again.speculation.pad_misses
    m = StepModel.of(sg.deployment, sg.speculation)
    mix = m.decode(np.array([8.0]), 1000.0, sg.speculation)
    assert mix.uniform is True or bool(np.all(mix.uniform))
    np.testing.assert_allclose(np.asarray(mix.target.tokens, float), [40.0], rtol=1e-12)  # 8 sequences x 5


def test_the_simulator_verifies_padded_ngram_misses_at_full_width():
    """In the serving simulator every verify of a padding engine is k+1 wide (padded drafts count as
    verified drafts, acceptance rate over them), while vLLM's misses verify their bonus only: mean
    width 1 + match x k. Verified drafts per verify step = (acceptance length - 1) / acceptance rate."""
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=4, acceptance=0.6, match_rate=0.5)
    for engine, width, tol in (("sglang", 5.0, 1e-3), ("vllm", 3.0, 0.05)):
        r = crossover.simulate("sharegpt", [8], run={"num_prompts": 100, "seed": 3}, engine=engine, **kw)
        on = r.to_dict()["levels"][0]["on"]
        drafts = (on["spec_decode_acceptance_length"] - 1.0) / (on["spec_decode_acceptance_rate"] / 100.0)
        assert 1.0 + drafts == pytest.approx(width, rel=tol)


def test_vllm_v0_runs_prompts_in_steps_of_their_own_that_do_not_speculate():
    """V0 without chunked prefill, and SGLang (mixed chunks are opt-in, enable_mixed_chunk False): a
    step with prompts prefills only (running sequences wait, nothing speculates); V1 mixes prompt
    chunks with decodes and verifies in the same step."""
    from crossover.serving import records as r
    from crossover.serving.engine import EngineLimits
    from crossover.serving.simulator import Arm, _Engine

    out = {}
    for engine in ("vllm-v0", "vllm", "sglang"):
        sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=4, acceptance=0.7,
                                prompt_len=500, output_len=60, engine=engine)
        n = 40
        e = _Engine(Arm(sc, True), np.full(n, 500.0), 30.0 + (np.arange(n) * 7) % 50, np.random.default_rng(0), 8,
                    None, EngineLimits(256, 8192), np.inf, 0, 0.0)
        e.run()
        ns, SF = int(e.state.ST[r.ST_NSTEPS]), e.records.SF
        pre = SF[r.SF_PRE, :ns] > 0
        on_mode = np.array([md.on for md in e.order])[e.records.SI[r.SI_MODE, :ns]]
        # tokens emitted in prefill steps: first tokens only (V0), or decodes too (V1)
        out[engine] = (pre.sum(), on_mode[pre].any(), (SF[r.SF_EMIT, :ns][pre] > SF[r.SF_SEQS, :ns][pre]).any(),
                       (SF[r.SF_NDEC, :ns][pre] > 0).any())
    v0, v1, sg = out["vllm-v0"], out["vllm"], out["sglang"]
    assert v0[0] > 0 and not v0[1] and not v0[2] and not v0[3]
    assert sg[0] > 0 and not sg[1] and not sg[2] and not sg[3]
    assert v1[0] > 0 and v1[1] and v1[3]


def test_sglang_caps_its_speculating_server_at_48_running_requests(capsys):
    """SGLang resets max_running_requests to 48 with speculation unless it is given: the speculating
    arm runs at most 48 requests (its TTFT grows with the queue at concurrency 96), the plain arm 256;
    --max-num-seqs sets both; vLLM has no such cap."""
    kw = dict(concurrency=[96], model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3)
    sg = crossover.simulate("sharegpt", engine="sglang", run={"num_prompts": 200}, **kw)
    assert sg.inputs["max_num_seqs"] == 256 and sg.inputs["max_num_seqs_speculating"] == 48
    given = crossover.simulate("sharegpt", engine="sglang", run={"num_prompts": 200, "max_num_seqs": 256}, **kw)
    assert "max_num_seqs_speculating" not in given.inputs
    assert "max_num_seqs_speculating" not in crossover.simulate("sharegpt", engine="vllm", run={"num_prompts": 200},
                                                                 **kw).inputs
    capped, free = sg.to_dict()["levels"][0]["on"], given.to_dict()["levels"][0]["on"]
    assert capped["median_ttft_ms"] > 5 * free["median_ttft_ms"]
    assert capped["output_throughput"] < free["output_throughput"]
    from crossover.serving.engine import EngineLimits
    lim = EngineLimits.of(sg_dep := _dep("sglang"))
    assert (lim.seats(False), lim.seats(True)) == (256, 48)
    assert EngineLimits.of(sg_dep, 64).seats(True) == 64
    assert main(["simulate", "--workload", "sharegpt", "--concurrency", "8", "--num-prompts", "60",
                 "--engine", "sglang", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]) == 0
    assert "at most 256 off, 48 on" in capsys.readouterr().out
    # predict prices the running batch it is given, and says when SGLang would not run it by default
    for engine, batches, says in (("sglang", "1,64", True), ("sglang", "1,48", False), ("vllm", "1,64", False)):
        assert main(["predict", "--engine", engine, "--batch", batches, "--model", "llama-3.1-8b"]) == 0
        assert ("engine cap: SGLang 0.5.x runs at most 48 requests" in capsys.readouterr().out) is says


def test_measured_names_engine_effects_for_a_slowdown_deeper_than_the_model(capsys):
    """The fixture's EAGLE-3 sweep measures 0.926 at concurrency 128 where V1's profile predicts
    ~1.5: the note names batch expansion with the vllm-v0 profile's own prediction there (below 1) and
    the CUDA-graph coverage, and no cause of another engine (SGLang's 48-request cap: issue 22); with
    --engine vllm-v0 the model already predicts a slowdown that deep, so nothing is named. The text
    shows the diagnosis, one verdict, instead of the list."""
    from conftest import REPO

    f = str(REPO / "tests" / "fixtures" / "measured" / "sweep.csv")
    res = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm")
    e = res.engine_effects
    assert e is not None and e["level"] == 128 and e["measured_speedup"] < 1 < e["predicted_speedup"]
    v0 = e["causes"][0]
    assert "batch expansion" in v0["effect"] and float(v0["check"].split("predicts ")[1].split()[0]) < 1.0
    assert not any("SGLang" in c["effect"] or "48" in c["effect"] for c in e["causes"])  # a CSV on the vLLM profile
    assert e["direction"] == "below"
    # priced greedy by default: requests that sampled with a top-p are named, with the model's speedup then
    # (any top-p sorts the same), below the greedy prediction; told the sampling, the cause is gone
    sort = next(c for c in e["causes"] if "sorts the vocabulary of every verified row" in c["effect"])
    assert float(sort["check"].split("predicts ")[1].split()[0]) < e["predicted_speedup"]
    told = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm", temperature=0.7,
                              top_p=0.9).engine_effects
    assert not any("sorts the vocabulary" in c["effect"] for c in told["causes"])
    v0_effects = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm", engine="vllm-v0").engine_effects
    assert v0_effects is None or v0_effects["direction"] == "above"  # V0 already predicts a slowdown that deep
    assert main(["measured", "--files", f, "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "slowdown deeper than the model allows" not in out and "\n  verdict: " in out


def test_measured_names_engine_effects_where_speculation_wins_that_the_model_says_loses(tmp_path, capsys):
    """n-gram measured at 1.15 at concurrency 64 and 128 (the shape of vLLM 0.10 sweeps), where the
    0.11+ profile predicts a loss (0.91, 0.82 at tau 1.6): the note names PIECEWISE-only graphs with
    the vllm-0.10 profile's own prediction there (above 1), the per-step host time and acceptance;
    with --engine vllm-0.10 the prediction is already above 1, so nothing is named."""
    f = tmp_path / "ngram.csv"
    rows = ["arm,concurrency,output_throughput,acceptance_length"]
    for c, s_ in ((1, 1.19), (16, 1.17), (64, 1.15), (128, 1.15)):
        off = 130.0 * c / (1 + c / 60)
        rows += [f"off,{c},{off:.2f},", f"on,{c},{off * s_:.2f},1.6"]
    f.write_text("\n".join(rows) + "\n")
    kw = dict(files=[str(f)], model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=3)
    e = crossover.measured(**kw).engine_effects
    assert e is not None and e["direction"] == "above" and e["level"] == 128
    assert e["measured_speedup"] > 1 > e["predicted_speedup"]
    first = e["causes"][0]
    assert "PIECEWISE" in first["effect"] and float(first["check"].split("predicts ")[1].split()[0]) > 1.0
    assert crossover.measured(engine="vllm-0.10", **kw).engine_effects is None
    assert main(["measured", "--files", str(f), "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method",
                 "ngram", "--k", "3"]) == 0
    # the diagnosis: the off arm's own host time fitted, the on arm still above what V1 0.11+ gives it, and
    # PIECEWISE graphs (what vLLM 0.10 captured) explain it
    assert "verdict: configuration: the on arm is" in capsys.readouterr().out
    d = crossover.measured(**kw).diagnosis
    assert d["verdict"] == "configuration" and "PIECEWISE" in d["message"]


def test_measured_takes_the_sglang_profile_for_sglang_files(tmp_path):
    """SGLang bench_serving results are modelled with the sglang profile unless --engine says otherwise
    (a note says so); vLLM results and CSVs keep the default vllm profile."""
    from conftest import REPO

    fixture = (REPO / "tests" / "fixtures" / "measured" / "sglang_runs.jsonl").read_text().splitlines()
    f = tmp_path / "sg.jsonl"
    f.write_text("\n".join(fixture[:4]) + "\n")  # EAGLE3 on and off at concurrency 32 and 128
    kw = dict(files=[str(f)], model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=3)
    res = crossover.measured(**kw)
    assert res.table.columns.formats == {"sglang"} and res.table.columns.algorithms == {"EAGLE3"}
    assert res.scenario.deployment.engine.name == "sglang"
    assert any("engine profile sglang" in n for n in res.notes)
    given = crossover.measured(engine="vllm", **kw)
    assert given.scenario.deployment.engine.name == "vllm" and not any("engine profile" in n for n in given.notes)
    csv = crossover.measured(files=[str(REPO / "tests" / "fixtures" / "measured" / "sweep.csv")], model="llama-3.1-8b",
                             hardware="h100-sxm")
    assert csv.table.columns.formats == {"csv"} and csv.scenario.deployment.engine.name == "vllm"


def test_measured_takes_the_method_the_sglang_files_ran(tmp_path, capsys):
    """Without --method, SGLang files price the method their speculative_algorithm names (a note says
    so); a --method that differs is kept, with a note; STANDALONE without --draft is one line, exit 2;
    files that name nothing keep the default (eagle)."""
    import json

    from conftest import REPO

    lines = (REPO / "tests" / "fixtures" / "measured" / "sglang_runs.jsonl").read_text().splitlines()[:4]

    def sweep(name: str, algo: str) -> str:
        out = []
        for line in lines:
            obj = json.loads(line)
            if obj["server_info"].get("speculative_algorithm"):
                obj["server_info"]["speculative_algorithm"] = algo
            out.append(json.dumps(obj))
        (tmp_path / name).write_text("\n".join(out) + "\n")
        return str(tmp_path / name)

    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", k=3)
    res = crossover.measured(files=[sweep("e3.jsonl", "EAGLE3")], **kw)
    assert res.scenario.speculation.method == "eagle3"
    assert any("method eagle3 from the files" in n for n in res.notes)
    other = crossover.measured(files=[sweep("e3.jsonl", "EAGLE3")], method="eagle", **kw)
    assert other.scenario.speculation.method == "eagle" and any("priced as --method eagle" in n for n in other.notes)
    assert crossover.measured(files=[sweep("ng.jsonl", "NGRAM")], **kw).scenario.speculation.method == "ngram"
    rc = main(["measured", "--files", sweep("sa.jsonl", "STANDALONE"), "--model", "llama-3.1-8b", "--hardware",
               "h100-sxm"])
    err = capsys.readouterr().err
    assert rc == 2 and "STANDALONE" in err and "--draft" in err and len(err.strip().splitlines()) == 1
    csv = crossover.measured(files=[str(REPO / "tests" / "fixtures" / "measured" / "sweep.csv")], **kw)
    assert csv.scenario.speculation.method == "eagle" and not any("from the files" in n for n in csv.notes)


def test_distilled_kernel_parameters_are_the_default_efficiency_where_a_gpu_has_them():
    """hardware/h100-sxm.yaml carries parameters distilled from measured kernel tables: without the
    extra, the roofline takes them for every dial the user leaves alone (not the transition
    exponent); a flag the user sets wins; Efficiency(distilled=False) keeps the generic defaults;
    the speed of light stays the speed of light."""
    hw = load_hardware("h100-sxm")
    g = hw.distilled.gemm_bf16
    dep = Deployment(model=L8B, hardware=hw)
    assert dep.efficiency.bandwidth_fraction == g.bandwidth_fraction
    assert dep.efficiency.transition_p == 1.5
    a = hw.distilled.decode_attention  # decode-sized calls: a GEMM's split-K, attention's split-KV and GQA copy
    floors = (4 * (g.floor_us + (g.split_k_us or 0.0)) + a.floor_us + (a.split_kv_us or 0.0) + (a.gqa_copy_us or 0.0)) * 1e-6
    assert dep.efficiency.layer_overhead_s == pytest.approx(15e-6 + floors)
    assert dep.efficiency.kernel_floors_s == pytest.approx(floors)
    assert Deployment(model=L8B, hardware=hw, efficiency=Efficiency(bandwidth_fraction=0.5)).efficiency.bandwidth_fraction == 0.5
    assert Deployment(model=L8B, hardware=hw, efficiency=Efficiency(distilled=False)).efficiency.bandwidth_fraction is None
    light = Deployment(model=L8B, hardware=hw, efficiency=Efficiency.speed_of_light()).efficiency
    assert light.bandwidth_fraction == 1.0 and light.layer_overhead_s == 0.0
    again = dep.model_copy(update={"tp": 1})
    assert again.efficiency.layer_overhead_s == dep.efficiency.layer_overhead_s  # applied once
    assert crossover.predict(crossover.scenario()).inputs["distilled_from"].startswith("aiconfigurator-core")


def test_ngram_match_rate_comes_from_the_files_counters(tmp_path, capsys):
    """On arm at concurrency 8: 1,000 requests, 101,000 output tokens, 60,000 accepted drafts:
    request steps = 101,000 - 1,000 - 60,000 = 40,000, of which 22,000 drafted: match rate 0.55."""
    from crossover.api.sweeps import files_match_rate, read_arms

    f = tmp_path / "ngram.csv"
    f.write_text("arm,concurrency,output_throughput,total_output_tokens,completed,spec_decode_num_drafts,"
                 "spec_decode_accepted_tokens,median_tpot_ms\n"
                 "off,8,900,101000,1000,,,8.0\n"
                 "on,8,1500,101000,1000,22000,60000,5.0\n")
    table = read_arms(files=[f])
    assert files_match_rate(table) == pytest.approx(22000 / 40000)
    res = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=4)
    assert res.scenario.speculation.acceptance.match_rate == pytest.approx(0.55)
    assert any("match rate 0.550" in n for n in res.notes)
    eagle = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=4)
    assert eagle.scenario.speculation.acceptance.match_rate == 1.0


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--breakdown", "0"], "--breakdown must be > 0 (got 0)"),
    (["predict", "--breakdown", "1e9"], "--breakdown batch 1e+09 is no load"),
    (["predict", "--cost", "bogus"], "--cost"),
    (["measured", "--files", "tests/fixtures/measured/sweep.csv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
      "--engine", "nope"], "unknown engine 'nope'"),
])
def test_bad_engine_cost_and_breakdown_inputs_are_one_line(argv, needle, capsys, monkeypatch):
    from conftest import REPO

    monkeypatch.chdir(REPO)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err




def test_measured_takes_acceptance_and_the_ngram_match_rate_from_engine_metrics(tmp_path, capsys):
    """A /metrics scrape after the run minus one before it: 22,000 drafts of 4 tokens, 60,000 accepted,
    101,000 output tokens, 1,000 finished requests (600 stop + 400 length): acceptance length per
    draft 1 + 60,000 / 22,000, k = 4, request steps = 101,000 - 1,000 - 60,000 = 40,000, match rate 22,000 / 40,000 = 0.55. The
    scenario takes them (the files report neither); the note and the JSON show them."""
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text(vllm_scrape(1000, 4000, 2000, 10000, 100, 50))
    after.write_text(vllm_scrape(23000, 92000, 62000, 111000, 700, 450))
    f = tmp_path / "ngram.csv"
    f.write_text("arm,concurrency,output_throughput,median_tpot_ms\noff,8,900,8.0\non,8,1500,5.0\n")
    res = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm", method="ngram",
                             engine_metrics=[after, before])
    spec = res.scenario.speculation
    assert spec.k == 4 and spec.acceptance.match_rate == pytest.approx(0.55)
    # the engine's acceptance length is per drafted step; per request step: 1 + 0.55 x 60,000 / 22,000
    assert spec.acceptance.value == pytest.approx(1 + 60000 / 22000) and spec.tau == pytest.approx(2.5)
    assert any("n-gram match rate 0.550" in n and "acceptance length 3.727" in n for n in res.notes)
    d = res.to_dict()["engine_metrics"]
    assert d["num_drafts"] == 22000 and d["requests_finished"] == 1000 and d["match_rate"] == pytest.approx(0.55)
    # the CLI: --engine-metrics AFTER,BEFORE; a scrape whose counters fell is refused in one line
    assert main(["measured", "--files", str(f), "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method",
                 "ngram", "--engine-metrics", f"{after},{before}", "--json"]) == 0
    assert "n-gram match rate 0.550" in capsys.readouterr().err
    assert main(["measured", "--files", str(f), "--engine-metrics", f"{before},{after}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "fell" in err and "\n" not in err
    # a server log gives tau (and k) but no request steps: the note says what the match rate needs
    log = crossover.measured(files=[f], model="llama-3.1-8b", hardware="h100-sxm", method="ngram",
                             engine_metrics=["tests/fixtures/measured/vllm_specdecode.log"])
    assert any("no n-gram match rate" in n for n in log.notes)


@pytest.mark.parametrize("metrics, needle", [
    ("a.prom,b.prom,c.prom", "one file, or a scrape after the run and one before it"),
    ("tests/fixtures/measured/vllm_specdecode.log,tests/fixtures/measured/vllm_metrics.prom",
     "applies to Prometheus scrapes, not to logs"),
    ("EMPTY", "no acceptance length in these engine metrics"),
])
def test_bad_engine_metrics_are_one_line_with_exit_2(metrics, needle, tmp_path, capsys):
    if metrics == "EMPTY":  # counters without drafts or accepted tokens: nothing to take
        f = tmp_path / "empty.prom"
        f.write_text('vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 5.0\n')
        metrics = str(f)
    argv = ["measured", "--files", "tests/fixtures/measured/sweep.csv", "--engine-metrics", metrics]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_the_scheduler_limits_default_to_the_engines_own_on_each_gpu():
    """vLLM V1's API server (vllm/engine/arg_utils.py get_batch_defaults, 0.10.1.1 and 0.14.1 wheels):
    1024 running sequences and 8192 tokens per step on a GPU of >= 70 GiB whose name has no 'a100',
    else 256 and 2048; V0 (0.6.3.post1): 256, and without chunked prefill a budget of max(the model's
    length, 2048); a given value replaces the default, and the running sequences never exceed the budget."""
    from crossover.serving.engine import EngineLimits, default_limits

    def dep(hw, engine="vllm", model="llama-3.1-8b", tp=1):
        return Deployment(model=load_model(model), hardware=load_hardware(hw), tp=tp, engine=load_engine(engine))

    assert default_limits(dep("h100-sxm")) == (1024, 8192)  # 80 GB = 74.5 GiB >= 70
    assert default_limits(dep("h200")) == (1024, 8192)
    assert default_limits(dep("a100-80gb-sxm")) == (256, 2048)  # an A100: the small pair at any memory
    assert default_limits(dep("l40s")) == (256, 2048)  # 48 GB < 70 GiB
    assert default_limits(dep("h100-sxm", "vllm-0.10")) == (1024, 8192)
    assert default_limits(dep("h100-sxm", "vllm-v0", "llama-3-70b", 4)) == (256, 8192)  # max(8192, 2048)
    assert default_limits(dep("h100-sxm", "sglang")) == (256, 8192)  # the stand-in
    assert default_limits(dep("h100-sxm"), 512) == (512, 512)  # running sequences <= the budget
    lim = EngineLimits.of(dep("h100-sxm"), 64)
    assert (lim.max_num_seqs, lim.max_num_batched_tokens) == (64, 8192)


# ------------------------------------------------------------------ CUDA-graph capture sizes (padding)
def test_a_captured_step_replays_the_next_captured_size_by_hand():
    """SGLang 0.4.4.post2 captures verify graphs for 1-8, odd 9-31, then 64 requests: EAGLE-3 (k = 3,
    4 positions per request) at batch 32 replays the 64-request graph, so its linear layers and LM head
    run 64 x 4 rows while attention reads the 32 real requests' caches; batch 31 is captured as it is.
    Without speculation 32 is captured (multiples of 8), and SGLang 0.5 pads a 13-request decode to 16."""
    dep = _dep("sglang-0.4")
    spec = Speculation("eagle3", 3, Acceptance.rate(0.7))
    model = StepModel.of(dep, spec)
    ctx = 512.0
    for batch, rows in ((32.0, 64.0), (31.0, 31.0), (40.0, 64.0), (64.0, 64.0)):
        t, kv, qk = model.target.uniform_sums(batch, 4.0, ctx)
        by_hand = model.target.evaluate(t * rows / batch, kv, qk, t * rows / batch).total
        got = model.price(model.decode(np.array([batch]), ctx, spec)).term("target_forward")[0]
        assert got == pytest.approx(float(np.asarray(by_hand).ravel()[0]), rel=1e-12), batch
    t, kv, qk = model.target.uniform_sums(32.0, 1.0, ctx)
    off = model.price(model.decode(np.array([32.0]), ctx)).term("target_forward")[0]
    assert off == pytest.approx(float(np.asarray(model.target.evaluate(t, kv, qk).total).ravel()[0]), rel=1e-12)
    # off and on priced together (the curves' layout): each element replays its own server's graphs
    both = model.price(model.decode(np.array([32.0]), ctx, spec)).term("target_forward")[0]
    assert both > off
    m05 = StepModel.of(_dep("sglang"))
    t, kv, qk = m05.target.uniform_sums(13.0, 1.0, ctx)
    by_hand = m05.target.evaluate(t * 16 / 13, kv, qk, t * 16 / 13).total
    got = m05.price(m05.decode(np.array([13.0]), ctx)).term("target_forward")[0]
    assert got == pytest.approx(float(np.asarray(by_hand).ravel()[0]), rel=1e-12)


def test_padding_keys_and_the_sizes_a_profile_may_list():
    p = load_engine("sglang-0.4")
    keys = np.array([1.0, 10.0, 31.0, 32.0, 63.0, 64.0, 65.0, 161.0])
    assert p.padded_key(keys, True).tolist() == [1, 11, 31, 64, 64, 64, 96, 161]
    assert p.padded_key(keys, False).tolist() == [1, 16, 32, 32, 64, 64, 72, 161]
    assert load_engine("vllm").padded_key(keys, True).tolist() == keys.tolist()  # lists none: no padding
    for bad in ([4, 2], [0, 1], [], [2, 2]):
        with pytest.raises(ValueError):
            type(p).model_validate({**p.model_dump(), "capture_sizes": bad})


def test_a_larger_batch_never_steps_faster_across_the_padding_gaps():
    """Between two captured sizes the step costs what the larger one does; at the gap's end it stays
    there, and beyond the capture limit it runs eagerly at its own size: never cheaper with more requests."""
    for name in ("sglang-0.4", "sglang", "vllm-v0"):
        dep = _dep(name)
        spec = Speculation("eagle3", 3, Acceptance.rate(0.7))
        model = StepModel.of(dep, spec)
        b = np.arange(1.0, 300.0)
        for s in (None, spec):
            t = model.price(model.decode(b, 512.0, s)).total
            assert (np.diff(t) >= -1e-15).all(), name


def test_host_work_per_sequence_is_hidden_under_the_gpu_only_by_a_server_that_schedules_asynchronously():
    """vLLM 0.14 schedules the next step while the GPU runs this one (async scheduling), for EAGLE-type
    drafts too; the draft-model and n-gram proposers turn it off (vllm/config/vllm.py 0.14.1). By hand at
    batch 64 with the host work set to 1 ms per sequence (64 ms, above any GPU step here): the off step
    and the EAGLE step are max(rest, 64 ms) = 64 ms, the n-gram step its rest + 64 ms; at the profile's
    12.7 us (0.81 ms) the off and EAGLE steps hide it all, the n-gram step pays it all; vLLM 0.10 (no
    async scheduling) pays it in both arms."""
    b = np.array([64.0])
    eagle, ngram = Speculation("eagle", 3, Acceptance.rate(0.7)), Speculation("ngram", 3, Acceptance.rate(0.7))
    for per in (1e-3, None):
        dep = _dep("vllm", host_per_seq_s=per)
        host = 64 * (per if per is not None else 12.7e-6)
        for spec in (None, eagle, ngram):
            m = StepModel.of(dep, spec)
            st = m.price(m.decode(b, 1024.0, spec))
            rest = float(st.total[0] - st.term("host_work")[0])
            exposed = host if spec is ngram else max(host - rest, 0.0)
            assert float(st.term("host_work")[0]) == pytest.approx(exposed, rel=1e-12)
            assert float(st.total[0]) == pytest.approx(rest + host if spec is ngram else max(rest, host), rel=1e-12)
            if per is None:  # the profile's figure: the overlapped servers hide it whole
                assert float(st.term("host_work")[0]) == (pytest.approx(host) if spec is ngram else 0.0)
    dep = _dep("vllm-0.10")
    for spec in (None, eagle):
        m = StepModel.of(dep, spec)
        assert float(m.price(m.decode(b, 1024.0, spec)).term("host_work")[0]) == pytest.approx(64 * 12.7e-6)
    # the speed of light has no host work
    sol = _dep("vllm").model_copy(update={"efficiency": Efficiency.speed_of_light()})
    m = StepModel.of(sol, ngram)
    assert float(m.price(m.decode(b, 1024.0, ngram)).term("host_work")[0]) == 0.0


@settings(max_examples=40, deadline=None)
@given(b1=st.floats(1, 400), extra=st.floats(0, 200), per_us=st.floats(0, 2000),
       method=st.sampled_from([None, "eagle", "ngram"]), engine=st.sampled_from(["vllm", "vllm-0.10"]))
def test_host_work_never_makes_a_larger_batch_step_faster(b1, extra, per_us, method, engine):
    """max(rest, host) and rest + host both grow with the batch: however large the host work per
    sequence, more sequences never step faster, overlapped or not."""
    spec = None if method is None else Speculation(method, 3, Acceptance.rate(0.6))
    m = StepModel.of(_dep(engine, host_per_seq_s=per_us * 1e-6), spec)
    t = m.price(m.decode(np.array([b1, b1 + extra]), 2048.0, spec)).total
    assert t[1] >= t[0] * (1 - 1e-12)


def test_async_scheduling_as_the_user_set_it(capsys):
    """--async-scheduling off (vLLM's --no-async-scheduling) makes both servers wait for the host work;
    on is vLLM 0.14's default, which the speculating server keeps for EAGLE-type drafts only (vLLM turns
    it off for the others, and 0.10 for any speculation); V0 and the other engines have no such flag."""
    import json
    base = ["predict", "--model", "llama-3.1-8b", "--method", "eagle", "--k", "3", "--batch", "64", "--json"]
    got = {}
    for setting in (None, "on", "off"):
        assert main([*base, *(["--async-scheduling", setting] if setting else [])]) == 0
        d = json.loads(capsys.readouterr().out)
        got[setting] = d["points"][0]
        assert d["inputs"]["async_scheduling"] == {"off": setting != "off", "on": setting != "off",
                                                   "setting": setting or "on", "name": "async scheduling"}
    assert got[None] == got["on"]
    host = 64 * 12.7e-3  # ms: the scheduler's 12.7 us per sequence, now on the critical path of both
    assert got["off"]["step_ms_off"] == pytest.approx(got["on"]["step_ms_off"] + host, abs=2e-3)
    assert got["off"]["step_ms_on"] == pytest.approx(got["on"]["step_ms_on"] + host, abs=2e-3)
    for args, on in ((["--method", "ngram"], False), (["--engine", "vllm-0.10"], False), ([], True)):
        assert main(["predict", "--batch", "64", "--json", "--async-scheduling", "on", *args]) == 0
        assert json.loads(capsys.readouterr().out)["inputs"]["async_scheduling"]["on"] is on
    for args, said in ((["--engine", "vllm-v0", "--async-scheduling", "off"], "is vLLM V1's setting"),
                       (["--engine", "hf", "--async-scheduling", "on"], "is vLLM V1's setting"),
                       (["--async-scheduling", "maybe"], "invalid choice")):
        r = run_cli("predict", "--batch", "1", *args)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_tensorrt_llm_overlap_scheduler_hides_its_host_step_until_the_host_is_the_longer():
    """TensorRT-LLM's overlap scheduler launches step n+1 before step n's host work ends; its host step is
    45.11 ms at 1536 sequences (PR #10273): 29.4 us each. By hand, Llama-3.2-1B on an H100: at batch 1024
    the host's 30.1 ms exceeds the GPU's step, so the plain decode takes exactly the host's time; at batch
    64 (1.9 ms) the GPU's step is longer and hides it; EAGLE-3 (one-model) keeps the overlap, n-gram
    (not compatible with it) pays all 1.9 ms."""
    p = load_engine("trtllm")
    assert p.host_per_seq_us == 29.4 and p.overlaps(None) and p.overlaps("eagle3") and not p.overlaps("ngram")
    dep = Deployment(model=load_model("llama-3.2-1b"), hardware=H100, tp=1, engine=p)
    m = StepModel.of(dep)
    big = m.price(m.decode(np.array([1024.0]), 1024.0))
    assert float(big.total[0]) == pytest.approx(1024 * 29.4e-6, rel=1e-12)
    small = m.price(m.decode(np.array([64.0]), 1024.0))
    assert float(small.term("host_work")[0]) == 0.0
    ngram = Speculation("ngram", 3, Acceptance.rate(0.6))
    mn = StepModel.of(dep, ngram)
    assert float(mn.price(mn.decode(np.array([64.0]), 1024.0, ngram)).term("host_work")[0]) == pytest.approx(64 * 29.4e-6)


def test_vllm_v0_run_eagerly_has_no_async_scheduling_setting(capsys):
    """--enforce-eager makes V0 score drafts with its multi-query scorer, but it stays V0: no async
    scheduling setting in its inputs or its engine line (EngineProfile.vllm_v1 keys on the graph unit,
    which configuring leaves alone), and --async-scheduling is refused for it still."""
    import json
    eager = load_engine("vllm-v0").configured(cuda_graphs="none")
    assert eager.verify_layout == "multi_query" and not eager.vllm_v1
    assert load_engine("vllm").vllm_v1 and load_engine("vllm-0.10").vllm_v1 and not load_engine("sglang").vllm_v1
    args = ["predict", "--engine", "vllm-v0", "--cuda-graphs", "none", "--batch", "1"]
    assert main(args) == 0 and "async scheduling" not in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"]["async_scheduling"]["setting"] is None
    r = run_cli(*args, "--async-scheduling", "off")
    assert r.returncode == 2 and "is vLLM V1's setting" in r.stderr and "Traceback" not in r.stderr


def test_sglang_overlap_scheduler_hides_its_host_step_and_spec_v1_exposes_it():
    """SGLang's overlap scheduler hides ~0.7 ms of host work per step (1.1x throughput, v0.4 blog); every
    speculative algorithm turns it off up to 0.5.10 (the profile's default), so the speculating server pays
    it, and spec v2 (0.5.11+ for EAGLE-type and standalone drafts, 0.5.14+ for n-gram: --async-scheduling
    on) keeps it; --disable-overlap-schedule (--async-scheduling off) makes both servers pay it. By hand on
    Llama-3.1-8B, EAGLE-3 k = 3 at batch 32: the on arm is 0.7 ms shorter with spec v2, the off arm 0.7 ms
    longer without the overlap scheduler; 0.8 ms of speculative bookkeeping stays in every case."""
    import json
    base = ["predict", "--engine", "sglang", "--model", "llama-3.1-8b", "--method", "eagle3", "--k", "3",
            "--acceptance", "0.7", "--batch", "32", "--json"]
    got = {}
    for setting in (None, "on", "off"):
        r = run_cli(*base, *(["--async-scheduling", setting] if setting else []))
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        got[setting] = d["points"][0]
        assert d["inputs"]["async_scheduling"]["on"] is (setting == "on")
        assert d["inputs"]["async_scheduling"]["off"] is (setting != "off")
    assert got["on"]["step_ms_on"] == pytest.approx(got[None]["step_ms_on"] - 0.7, abs=1e-6)
    assert got["on"]["step_ms_off"] == pytest.approx(got[None]["step_ms_off"], abs=1e-9)
    assert got["off"]["step_ms_off"] == pytest.approx(got[None]["step_ms_off"] + 0.7, abs=1e-6)
    assert got["off"]["step_ms_on"] == pytest.approx(got[None]["step_ms_on"], abs=1e-9)
    # the 0.4 profile has no spec v2: on is its default (overlap without speculation only)
    r = run_cli("predict", "--engine", "sglang-0.4", "--method", "eagle", "--batch", "8", "--json", "--async-scheduling", "on")
    assert r.returncode == 0 and json.loads(r.stdout)["inputs"]["async_scheduling"]["on"] is False


@pytest.mark.parametrize("engine, method, needle", [
    ("trtllm", "eagle", "no EAGLE-1 decoding type"), ("trtllm", "medusa", "no medusa decoding type"),
    ("sglang", "medusa", "SGLang has no medusa algorithm flag"),
    ("sglang-0.4", "ngram", "NGRAM needs SGLang >= 0.5.3"), ("vllm", "draft", "refuse method draft_model")])
def test_a_method_the_engines_releases_lack_is_priced_as_asked_and_said(engine, method, needle):
    """Medusa on SGLang or TensorRT-LLM, EAGLE-1 on TensorRT-LLM, n-gram on SGLang 0.4, a draft model on
    vLLM 0.11-0.14: predict prices the question and names why no such server runs (the configs' reasons)."""
    kw = dict(model="llama-3.1-8b", engine=engine, method=method, **({"draft": "llama-3.2-1b"} if method == "draft" else {}))
    r = crossover.predict(crossover.scenario(**kw), batches=[1, 64])
    assert needle in r.inputs["method_unsupported"]
    assert f"note: {r.inputs['method_unsupported']} (priced as asked" in r.to_text()


@pytest.mark.parametrize("engine, method", [("sglang", "ngram"), ("sglang", "draft"), ("sglang", "eagle"),
                                            ("trtllm", "eagle3"), ("trtllm", "ngram"), ("vllm", "medusa"),
                                            ("vllm-v0", "draft")])
def test_a_method_the_engine_runs_has_no_such_note(engine, method):
    kw = dict(model="llama-3.1-8b", engine=engine, method=method, **({"draft": "llama-3.2-1b"} if method == "draft" else {}))
    r = crossover.predict(crossover.scenario(**kw), batches=[1, 64])
    assert r.inputs["method_unsupported"] is None and "priced as asked" not in r.to_text()
