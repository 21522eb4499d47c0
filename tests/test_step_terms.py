"""The step terms that grow with batch x verify width (issue 21): the sampler's traffic over the
vocabulary, vLLM V0's host work per verified position, and the engine configuration as the user set it
(CUDA-graph mode, chunked prefill, GPU memory utilisation). Each by hand."""

import numpy as np
import pytest

import crossover
from crossover.model.breakdown import op_breakdown
from crossover.model.speculation import Speculation
from crossover.model.acceptance import Acceptance
from crossover.model.step import StepBreakdown, StepModel
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.loader import load_engine

from conftest import assert_one_line_error, run_cli

H100, L8B, QWAMA = load_hardware("h100-sxm"), load_model("llama-3.1-8b"), load_model("qwama-0.5b")


def _v0(**kw):
    return Deployment(model=L8B, hardware=H100, engine=load_engine("vllm-v0"), **kw)


def test_v0_sampler_and_per_position_host_work_by_hand():
    """vLLM V0 at batch 16, k = 3, a draft model, context 256 (the PR #9298 setting): off, 16 sampled
    positions x 34 B x 128256 vocabulary entries; on, 16 bonus positions at 34 B and 48 drafts at 120 B,
    and 64 expanded sequences x 125 us = 8 ms of host work."""
    dep = _v0()
    spec = Speculation("draft", 3, Acceptance.rate(0.7), draft=QWAMA, draft_tp=1)
    m = StepModel.of(dep, spec)
    b = np.array([16.0])
    off, on = m.price(m.decode(b, 256.0)), m.price(m.decode(b, 256.0, spec))
    bw = dep.bandwidth
    assert off.term("sampler")[0] == pytest.approx(16 * 34 * 128256 / bw, rel=1e-12)
    assert on.term("sampler")[0] == pytest.approx((16 * 34 + 48 * 120) * 128256 / bw, rel=1e-12)
    assert on.term("spec_overhead_per_position")[0] == pytest.approx(64 * 125e-6, rel=1e-12)
    assert off.term("spec_overhead_per_position")[0] == 0.0
    # 70 MB and 813 MB at 3.35 TB/s x the H100's achieved fraction: tenths of a millisecond
    assert 0.1e-3 < on.term("sampler")[0] < 0.5e-3


def test_the_per_position_cost_grows_with_batch_times_verify_width():
    dep = _v0()
    m4 = StepModel.of(dep, s4 := Speculation("eagle", 4, Acceptance.rate(0.7)))
    m2 = StepModel.of(dep, s2 := Speculation("eagle", 2, Acceptance.rate(0.7)))
    b = np.array([8.0, 32.0])
    t4 = m4.price(m4.decode(b, 512.0, s4)).term("spec_overhead_per_position")
    t2 = m2.price(m2.decode(b, 512.0, s2)).term("spec_overhead_per_position")
    np.testing.assert_allclose(t4, b * 5 * 125e-6, rtol=1e-12)
    np.testing.assert_allclose(t2, b * 3 * 125e-6, rtol=1e-12)


def test_the_speed_of_light_has_no_sampler_and_an_override_replaces_the_engines():
    from crossover.specs.deployment import Efficiency

    sol = Deployment(model=L8B, hardware=H100, efficiency=Efficiency.speed_of_light())
    m = StepModel.of(sol)
    assert float(m.price(m.decode(np.array([64.0]), 0.0)).term("sampler")[0]) == 0.0
    dep = Deployment(model=L8B, hardware=H100, efficiency=Efficiency(sampler_bytes_per_vocab=20.0))
    m = StepModel.of(dep)
    assert m.price(m.decode(np.array([64.0]), 0.0)).term("sampler")[0] == pytest.approx(
        64 * 20 * 128256 / dep.bandwidth, rel=1e-12)


@pytest.mark.parametrize("engine", ["vllm", "vllm-v0", "sglang", "hf"])
@pytest.mark.parametrize("batch", [4.0, 300.0])
def test_the_breakdown_rows_add_up_to_the_step(engine, batch):
    """predict --breakdown: the op rows (with the kernel gaps and an eager launch floor) plus every
    term but the target forward are the step, off and on."""
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine=engine, method="eagle", k=3)
    bd = op_breakdown(StepModel.of(sc.deployment, sc.speculation), batch, 1024.0, sc.speculation)
    names = [r["op"] for r in bd["ops"]]
    assert "kernel_gaps" in names
    for arm in ("off", "on"):
        rows = sum(r[f"{arm}_ms"] or 0.0 for r in bd["ops"])
        terms = sum(t[f"{arm}_ms"] for n, t in bd["terms"].items() if n != "target_forward")
        assert rows + terms == pytest.approx(bd[f"total_{arm}_ms"], abs=1e-5)
    assert set(bd["terms"]) == set(StepBreakdown.TERMS)
    # the graphs line: vLLM V1's verify batches inside the 512-token limit miss a full graph half the time
    # (that share is the on arm's ragged_attention: batch x 40 us x 0.5); beyond it none is replayed
    on = bd["graphs"]["on"]
    assert bd["graphs"]["off"]["miss"] == 0.0
    if engine == "vllm":
        assert on["miss"] == (0.5 if batch == 4.0 else 0.0) and (on["replayed"] is None) == (batch == 300.0)
        share = 0.5 if batch == 4.0 else 1.0
        assert bd["terms"]["ragged_attention"]["on_ms"] == pytest.approx(batch * 40e-3 * share, rel=1e-9)
    else:
        assert on["miss"] == 0.0


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_breakdown_with_the_prefill_share_is_the_rows_step(engine):
    """With --prompt-len/--output-len the breakdown prices the mean step the table's row prices: at
    batch 64, y tokens per step, r = 64 y / 200 prompts per step, the steps carrying floor(r) and
    ceil(r) of them weighted 1 - frac and frac (off y = 1: r = 0.32, 68% / 32%); rows still add up."""
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", engine=engine, method="eagle", k=3, acceptance=0.7,
              prompt_len=1000, output_len=200)
    r = crossover.predict(crossover.scenario(**kw), batches=[64], breakdown=64)
    bd, row = r.breakdown, r.to_dict()["points"][0]
    assert bd["total_off_ms"] == pytest.approx(row["step_ms_off"], abs=1e-4)
    assert bd["total_on_ms"] == pytest.approx(row["step_ms_on"], abs=1e-4)
    assert [(s["prompts"], round(s["share"], 9)) for s in bd["prompts"]["off"]] == [(0.0, 0.68), (1.0, 0.32)]
    tau = r.inputs["tau"]
    assert sum(s["share"] * s["prompts"] for s in bd["prompts"]["on"]) == pytest.approx(64 * tau / 200, rel=1e-9)
    for arm in ("off", "on"):
        rows = sum(x[f"{arm}_ms"] or 0.0 for x in bd["ops"])
        terms = sum(t[f"{arm}_ms"] for n, t in bd["terms"].items() if n != "target_forward")
        assert rows + terms == pytest.approx(bd[f"total_{arm}_ms"], abs=1e-5)
    pure = crossover.predict(crossover.scenario(**{k: v for k, v in kw.items() if "len" not in k}, context=1100),
                             batches=[64], breakdown=64).breakdown
    assert "prompts" not in pure and pure["total_off_ms"] < bd["total_off_ms"]
    assert "prefill share: each arm's mean step" in r.to_text()


def test_cuda_graphs_none_runs_v0_eagerly_with_its_multi_query_scorer():
    """--cuda-graphs none on vLLM V0 (--enforce-eager): no captured step, so every forward takes at least
    its layers' launch time (32 x 340 us = 10.88 ms for Llama-3.1-8B), and V0 scores drafts with its MQA
    scorer (vllm/spec_decode/spec_decode_worker.py, 0.6.3): one read of the KV cache per request."""
    full = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm-v0", method="eagle")
    eager = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm-v0", method="eagle",
                               cuda_graphs="none")
    e = eager.deployment.engine
    assert (e.graph_capture_limit, e.verify_layout, e.cuda_graphs) == (0, "multi_query", "none")
    assert full.deployment.engine.verify_layout == "batch_expansion"
    m = StepModel.of(eager.deployment)
    t = m.price(m.decode(np.array([1.0]), 100.0)).term("target_forward")[0]
    assert t >= 32 * 340e-6 * (1 - 1e-12)
    assert crossover.predict(eager).inputs["cuda_graphs"] == "none"
    res = crossover.predict(eager)
    assert res.inputs["engine_settings_given"] == ["cuda_graphs"]
    assert "CUDA graphs none (given), chunked prefill off (default)" in res.to_text()


def test_piecewise_graphs_make_every_v1_step_pay_attention_outside_the_graph():
    """vLLM V1 PIECEWISE: a uniform decode step pays ragged_per_seq_us (40 us) per sequence: 64 x 40 us."""
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm")
    full, pw = crossover.scenario(**kw), crossover.scenario(cuda_graphs="piecewise", **kw)
    b = np.array([64.0])
    for sc, want in ((full, 0.0), (pw, 64 * 40e-6)):
        m = StepModel.of(sc.deployment)
        assert float(m.price(m.decode(b, 1024.0)).term("ragged_attention")[0]) == pytest.approx(want, abs=1e-15)


def test_chunked_prefill_and_memory_utilisation_are_the_users():
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm")
    assert not crossover.scenario(chunked_prefill=False, **kw).deployment.engine.chunked_prefill
    assert crossover.scenario(engine="vllm-v0", chunked_prefill=True, **kw).deployment.engine.chunked_prefill
    lo = crossover.predict(crossover.scenario(gpu_memory_utilization=0.5, **kw)).prediction
    hi = crossover.predict(crossover.scenario(**kw)).prediction
    assert lo.max_batch_off < hi.max_batch_off


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--engine", "sglang", "--cuda-graphs", "piecewise"], "piecewise CUDA graphs are vLLM V1's mode"),
    (["predict", "--engine", "vllm-v0", "--cuda-graphs", "piecewise"], "piecewise"),
    (["predict", "--engine", "hf", "--cuda-graphs", "full"], "never captures CUDA graphs"),
    (["predict", "--gpu-memory-utilization", "1.5"], "(0, 1]"),
    (["predict", "--gpu-memory-utilization", "0"], "--gpu-memory-utilization"),
    (["predict", "--cuda-graphs", "sometimes"], "--cuda-graphs"),
    (["predict", "--chunked-prefill", "maybe"], "--chunked-prefill"),
])
def test_engine_settings_an_engine_does_not_have_are_one_line(argv, needle):
    assert_one_line_error(run_cli(*argv), needle)


def test_a_head_at_draft_tp_1_runs_whole_on_one_gpu():
    """vLLM's draft_tensor_parallel_size applies to MTP and EAGLE heads too (1 or the target's TP,
    vllm/config/speculative.py, 0.14.1): DeepSeek-V3's MTP layer at draft TP 1 streams all of its
    weights from one GPU, eight times what each GPU streams at TP 8, and holds them there."""
    kw = dict(model="deepseek-v3", hardware="h200", tp=8, method="mtp", k=1, weight_dtype="fp8")
    one, eight = crossover.scenario(draft_tp=1, **kw), crossover.scenario(**kw)
    assert one.speculation.draft_deployment(one.deployment).tp == 1
    assert eight.speculation.draft_deployment(eight.deployment).tp == 8
    m1, m8 = (StepModel.of(s.deployment, s.speculation) for s in (one, eight))
    d1 = m1.price(m1.decode(np.array([1.0]), 1000.0, one.speculation)).term("draft_forwards")[0]
    d8 = m8.price(m8.decode(np.array([1.0]), 1000.0, eight.speculation)).term("draft_forwards")[0]
    assert d1 > 2.5 * d8
    w1, _ = one.speculation.memory(one.deployment, 1000.0)
    w8, _ = eight.speculation.memory(eight.deployment, 1000.0)
    assert w1 == pytest.approx(8 * w8, rel=0.02)


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8", "--method", "mtp", "--k", "1",
      "--weight-dtype", "fp8", "--draft-tp", "2"], "1 or at the target's tp 8"),
    (["predict", "--method", "ngram", "--draft-tp", "1"], "no setting of n-gram"),
])
def test_draft_tps_an_engine_refuses_are_one_line(argv, needle):
    assert_one_line_error(run_cli(*argv), needle)


def test_the_speculating_server_can_run_its_own_cuda_graph_mode():
    """--cuda-graphs-speculating piecewise: the speculating server runs attention outside the graph on
    every step (64 x 40 us at batch 64), the other keeps full graphs: off unchanged, on +1.28 ms (with
    full graphs half its verify steps miss one and pay it already: spec_graph_miss)."""
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", acceptance=0.7)
    base = crossover.predict(crossover.scenario(**kw), batches=[64])
    split = crossover.predict(crossover.scenario(cuda_graphs_speculating="piecewise", **kw), batches=[64])
    assert split.prediction.curves.step_off[0] == pytest.approx(base.prediction.curves.step_off[0], rel=1e-12)
    assert split.prediction.curves.step_on[0] == pytest.approx(base.prediction.curves.step_on[0] + 64 * 40e-6 * 0.5,
                                                                rel=1e-9)
    assert split.inputs["cuda_graphs"] == "full" and split.inputs["cuda_graphs_speculating"] == "piecewise"
    assert "the speculating server's piecewise (given)" in split.to_text()
    # the simulator's speculating server pays it too, its other server does not
    sim = crossover.simulate("sharegpt", [16], run={"num_prompts": 60}, cuda_graphs_speculating="piecewise", **kw)
    ref = crossover.simulate("sharegpt", [16], run={"num_prompts": 60}, **kw)
    a, b = sim.to_dict()["levels"][0], ref.to_dict()["levels"][0]
    assert a["off"]["mean_tpot_ms"] == pytest.approx(b["off"]["mean_tpot_ms"], rel=1e-9)
    assert a["on"]["mean_tpot_ms"] > b["on"]["mean_tpot_ms"]
    assert_one_line_error(run_cli("predict", "--engine", "sglang", "--cuda-graphs-speculating", "piecewise"),
                          "piecewise CUDA graphs are vLLM V1's mode")


def test_a_calibrations_per_sequence_microseconds_are_microseconds(tmp_path):
    """A fit's spec_per_seq_us of 85.6 is 85.6 us per verifying sequence (it was read as 85.6 s: the
    policy of the README's worked example said speculation never pays, 130,000x slower always-on)."""
    cal = tmp_path / "fit.yaml"
    cal.write_text("crossover_calibration: 1\nparameters:\n  spec_per_seq_us: {value: 85.6}\n"
                   "  step_overhead_ms: {value: 0.5}\n")
    dep = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", calibration=cal).deployment
    assert dep.spec_overhead_per_seq_s == pytest.approx(85.6e-6)
    assert dep.step_overhead_s == pytest.approx(0.5e-3)


def test_a_scenario_built_twice_from_plain_values_is_the_same_and_warns_again():
    """crossover.scenario is memoised on plain arguments (issue 25): the second call returns the same
    frozen scenario, and the build's warnings are given on every call."""
    import warnings

    kw = dict(model="llama-3.2-1b", method="draft", draft="llama-3.1-8b", allow_vocab_mismatch=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a, b = crossover.scenario(**kw), crossover.scenario(**kw)
    assert a is b
    assert len(caught) == 2 and all(str(w.message).startswith("draft llama-3.1-8b (8.0B parameters) is larger")
                                    for w in caught)
    # a file named, or a spec object: built afresh each time
    spec = load_model("llama-3.1-8b")
    assert crossover.scenario(model=spec) is not crossover.scenario(model=spec)


@pytest.mark.parametrize("engine, per_layer", [("vllm-v0", 340e-6), ("hf", 45e-6)])
def test_an_eager_server_runs_its_draft_passes_eagerly_too(engine, per_layer):
    """--cuda-graphs none (and HF, which never captures): each draft pass takes at least its layers'
    launch time, as the target forward does. Qwama-0.5B (24 layers) drafting k = 4 for Llama-3-70B on
    4 x H100 at batch 16: the draft passes are 4 x max(one pass under graphs, 24 x the profile's
    launch floor per layer); vLLM V0's 340 us makes each ~8.2 ms, as PR #9298 measured its eager
    proposer (13.69 against 5.56 ms per draft token with graphs, on an A10)."""
    kw = dict(model="llama-3-70b", hardware="h100-sxm", tp=4, method="draft", draft="qwama-0.5b", draft_tp=1, k=4,
              engine=engine)
    graphed = crossover.scenario(**kw, **({"cuda_graphs": "full"} if engine == "vllm-v0" else {}))
    eager = crossover.scenario(**kw, cuda_graphs="none") if engine == "vllm-v0" else graphed

    def drafts(sc):
        m = StepModel.of(sc.deployment, sc.speculation)
        return float(m.price(m.decode(np.array([16.0]), 1000.0, sc.speculation)).term("draft_forwards")[0]), m

    if engine == "vllm-v0":
        full, _ = drafts(graphed)
        none, m = drafts(eager)
        assert m.draft_layers == 24
        assert none == pytest.approx(4 * max(full / 4, 24 * per_layer), rel=1e-12)
        assert none > 4 * 8e-3
    else:  # no graphs ever: the pass's forward without the floor, priced by hand from the draft model
        none, m = drafts(eager)
        t, kv, qk = m.draft.uniform_sums(np.array([16.0]), 1.0, 1000.0)
        one = float(m.draft.evaluate(t, kv, qk).total[0])
        assert none == pytest.approx(4 * max(one, 24 * per_layer), rel=1e-12)
