"""Issue 21: an MLA model's verify positions through the attention backend's prefill path, where the
engine's default MLA backend takes one query token per request (vLLM 0.10.1.1 on every GPU; vLLM 0.14.1's
CUTLASS MLA, its default on compute capability 10.x). Each verifying request's context is gathered from
the latent cache and up-projected by kv_b_proj at every layer of every step, and the speculating server
runs PIECEWISE graphs. Computed by hand."""

import numpy as np
import pytest

import crossover
from crossover.errors import InputError
from crossover.model.acceptance import Acceptance
from crossover.model.scenario import Scenario
from crossover.model.speculation import Speculation
from crossover.model.step import StepModel
from crossover.serving.sweep import run_level
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.loader import load_engine
from crossover.specs.workload import load_workload

from conftest import assert_one_line_error, run_cli

DSV3 = load_model("deepseek-v3")
MTP = Speculation("mtp", 1, Acceptance.rate(0.8))


def _dep(hardware: str, engine: str = "vllm", **configured) -> Deployment:
    eng = load_engine(engine)
    if configured:
        eng = eng.configured(**configured)
    return Deployment(model=DSV3, hardware=load_hardware(hardware), tp=8, engine=eng)


LEVELS = [1, 16, 64, 128]


def _sweep(tmp_path, hardware: str, mla_verify_prefill: str):
    """A DeepSeek-V3 MTP sweep (tau 1.8, context 2048) as the model writes it for a server whose MLA backend
    runs the verify tokens as `mla_verify_prefill` says: the CSV, its levels and the curve it came from."""
    from crossover.analysis.curves import evaluate

    sc = Scenario(_dep(hardware, mla_verify_prefill=mla_verify_prefill),
                  Speculation("mtp", 1, Acceptance.mean_length(1.8)), 2048)
    c = evaluate(sc, LEVELS)
    rows = ["arm,concurrency,output_throughput,mean_tpot_ms,acceptance_length"]
    for i, b in enumerate(LEVELS):
        rows += [f"off,{b},{c.tokens_per_s_off[i]:.3f},{c.step_off[i] * 1e3:.5f},",
                 f"on,{b},{c.tokens_per_s_on[i]:.3f},{c.step_on[i] * 1e3 / 1.8:.5f},1.8"]
    f = tmp_path / f"{hardware}.csv"
    f.write_text("\n".join(rows) + "\n")
    return f, LEVELS, c


def test_the_prefill_path_up_projects_every_verifying_requests_context_by_hand():
    """DeepSeek-V3 on 8 x B200 under vLLM 0.14 (CUTLASS MLA), MTP k = 1, batch 64 at context 2048: the
    64 requests hold 64 x 2050 KV tokens. Per token and layer: the 576-wide latent read at 2 B (bf16 KV),
    written to the workspace and read back at 2 B each (576 x 6 = 3456 B); 16 local heads' no-rope keys
    and values written by kv_b_proj (16 x 256 x 2), the no-rope keys read and the joined 192-wide keys
    written (16 x (128 + 192) x 2), the attention reading keys and values (16 x (192 + 128) x 2):
    3456 + 28672 = 32128 B, and 2 x 512 x 16 x 256 = 4,194,304 FLOPs, at 61 layers."""
    dep = _dep("b200")
    assert dep.mla_verify_prefill
    m = StepModel.of(dep, MTP)
    b = np.array([64.0])
    on, off = m.price(m.decode(b, 2048.0, MTP)), m.price(m.decode(b, 2048.0))
    tokens = 64 * 2050 * 61
    mem, comp = tokens * 32128 / dep.bandwidth, tokens * 4194304 / dep.flops
    want = (mem ** 1.5 + comp ** 1.5) ** (2 / 3)  # the roofline's smooth transition, p = 1.5
    assert on.term("mla_verify_prefill")[0] == pytest.approx(want, rel=1e-9)
    assert 30e-3 < want < 60e-3  # ~263 GB through 8 TB/s at the B200's fraction: tens of ms
    assert off.term("mla_verify_prefill")[0] == 0.0
    # the speculating server runs PIECEWISE graphs: 40 us of host time per sequence on each verify step
    assert dep.engine.cuda_graphs == "full" and dep.speculating_engine.cuda_graphs == "piecewise"
    assert on.term("ragged_attention")[0] == pytest.approx(64 * 40e-6, rel=1e-12)
    assert off.term("ragged_attention")[0] == 0.0


def test_where_the_prefill_path_applies():
    # vLLM 0.14 on Hopper runs FLASH_ATTN_MLA first (VARLEN: the verify tokens as a decode)
    for dep in (_dep("h200"), _dep("b200", "sglang"), _dep("b200", mla_verify_prefill="never")):
        assert not dep.mla_verify_prefill and dep.speculating_engine.cuda_graphs == dep.engine.cuda_graphs
        m = StepModel.of(dep, MTP)
        assert m.price(m.decode(np.array([64.0]), 2048.0, MTP)).term("mla_verify_prefill")[0] == 0.0
    # vLLM 0.10: every MLA backend keeps reorder_batch_threshold 1, Hopper included
    assert _dep("h200", "vllm-0.10").mla_verify_prefill and _dep("h100-sxm", "vllm-0.10").mla_verify_prefill
    assert _dep("h200", mla_verify_prefill="always").mla_verify_prefill
    # vLLM 0.14 outside Hopper: Triton MLA below 9.x (and on ROCm by default) takes one token per request too
    assert _dep("a100-80gb-sxm").mla_verify_prefill and _dep("mi300x").mla_verify_prefill
    # a model without MLA never takes it
    llama = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("b200"), engine=load_engine("vllm"))
    assert not llama.mla_verify_prefill


def test_the_engine_line_and_inputs_say_so_and_a_bad_value_is_one_line():
    sc = crossover.scenario(model="deepseek-v3", hardware="b200", tp=8, method="mtp", k=1, acceptance=0.8)
    said = crossover.inputs(sc)
    assert said["mla_verify_prefill"] is True and said["cuda_graphs_speculating"] == "piecewise"
    r = run_cli("predict", "--model", "deepseek-v3", "--hardware", "b200", "--tp", "8", "--method", "mtp",
                "--k", "1", "--batch", "64")
    assert r.returncode == 0
    assert "MLA verify through the attention backend's prefill path (default)" in r.stdout
    assert "the speculating server's piecewise (vLLM's fallback from full graphs" in r.stdout
    with pytest.raises(InputError, match="never, always or outside_hopper"):
        load_engine("vllm").configured(mla_verify_prefill="sometimes")


def test_the_serving_simulator_prices_the_verifying_requests_kv():
    """The simulator's records carry the KV its verifying sequences hold: the speculating arm is slower
    with the prefill path, the other arm the same step for step."""
    w, base = load_workload("random-1024-128")
    p, o = w.means(base=base)
    out = {}
    for mode in ("never", "always"):  # on Blackwell: CUTLASS MLA keeps the off server's full graphs
        sc = Scenario(_dep("b200", mla_verify_prefill=mode), MTP, p + o / 2, p, o)
        out[mode] = run_level(sc, w, "concurrency", 32, num_prompts=64, seed=0, base=base)
    assert out["always"]["off"]["mean_tpot_ms"] == pytest.approx(out["never"]["off"]["mean_tpot_ms"], rel=1e-12)
    assert out["always"]["on"]["mean_tpot_ms"] > 1.5 * out["never"]["on"]["mean_tpot_ms"]


def test_measured_names_the_prefill_path_where_a_deepseek_sweep_slowed_beyond_the_model(tmp_path):
    """A DeepSeek-V3 MTP sweep on 8 x H200 written by the model with the verify tokens through the prefill
    path (what vLLM 0.10 runs), read with the default profile (0.14 on Hopper: a decode): the engine
    effects name the prefill path, and the model with it gives the measured speedup back."""
    f, levels, c = _sweep(tmp_path, "h200", "always")
    res = crossover.measured(files=[str(f)], model="deepseek-v3", hardware="h200", tp=8, method="mtp", k=1)
    effects = res.engine_effects
    assert effects and effects["direction"] == "below"
    cause = next(e for e in effects["causes"] if e["effect"].startswith("an MLA attention backend"))
    at = levels.index(int(effects["level"]))
    assert cause["check"] == f"with it the model predicts {c.speedup[at]:.3f} there"


def test_the_diagnosis_names_the_mla_backend_as_the_setting_that_explains_the_sweep(tmp_path):
    """The same synthetic vLLM-0.10-like DeepSeek sweep: the verdict is the configuration, and the MLA
    prefill path is the cause that, re-priced, explains every level."""
    f, levels, c = _sweep(tmp_path, "h200", "always")
    d = crossover.measured(files=[str(f)], model="deepseek-v3", hardware="h200", tp=8, method="mtp", k=1).diagnosis
    assert d["verdict"] == "configuration"
    cause = next(c for c in d["causes"] if c["cause"] == "mla_verify_prefill")
    assert cause["checked"] and cause["explains"] and abs(cause["ln_worst_after"]) < 0.02
    assert "an MLA attention backend" in d["message"]


def test_sweep_plan_says_which_mla_path_it_priced():
    r = run_cli("sweep-plan", "--model", "deepseek-v3", "--hardware", "b200", "--tp", "8", "--method", "mtp",
                "--k", "1", "--acceptance", "0.8")
    assert r.returncode == 0
    assert "note: vLLM: MLA verify priced through the attention backend's prefill path" in r.stdout
    r = run_cli("sweep-plan", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8", "--method", "mtp",
                "--k", "1", "--acceptance", "0.8")
    assert r.returncode == 0 and "MLA verify" not in r.stdout


def test_a_deepseek_sweep_faster_than_the_default_blackwell_backend_allows_names_the_decode_backend(tmp_path):
    """A sweep on 8 x B200 written with the verify tokens scored as a decode (a server started with
    --attention-backend FLASHINFER_MLA), read with the default profile (CUTLASS MLA's prefill path):
    the on arm does better than the expectation, and the decode backend explains it."""
    f, levels, c = _sweep(tmp_path, "b200", "never")
    d = crossover.measured(files=[str(f)], model="deepseek-v3", hardware="b200", tp=8, method="mtp", k=1).diagnosis
    assert d["verdict"] == "configuration" and "above the expectation" in d["message"]
    cause = next(c for c in d["causes"] if c["cause"] == "mla_verify_decode")
    assert cause["explains"] and "FLASHINFER_MLA" in d["message"]


def test_the_speed_of_light_bound_scores_the_verify_tokens_as_a_decode():
    """The physical bound holds whichever backend a server runs: no prefill path, no PIECEWISE downgrade,
    and no profile's step below it."""
    from crossover.analysis.bounds import speed_of_light

    sc = Scenario(_dep("b200"), MTP, 2048)
    sol = speed_of_light(sc)
    assert sc.deployment.mla_verify_prefill and not sol.deployment.mla_verify_prefill
    assert sol.deployment.speculating_engine.cuda_graphs == "full"
    b = np.array([1.0, 16.0, 64.0, 256.0])
    for s in (sc, Scenario(_dep("b200", mla_verify_prefill="never"), MTP, 2048)):
        m, ms = StepModel.of(s.deployment, s.speculation), StepModel.of(sol.deployment, sol.speculation)
        assert np.all(m.price(m.decode(b, 2048.0, MTP)).total >= ms.price(ms.decode(b, 2048.0, sol.speculation)).total)


def test_the_mla_verify_flag_sets_the_servers_backend_path():
    """--mla-verify decode (a server started with --attention-backend FLASHINFER_MLA) or prefill, given;
    measured takes it as a launch setting too."""
    base = ["predict", "--model", "deepseek-v3", "--tp", "8", "--method", "mtp", "--k", "1", "--acceptance", "0.8",
            "--batch", "64", "--json"]
    import json

    fast = json.loads(run_cli(*base, "--hardware", "b200", "--mla-verify", "decode").stdout)
    slow = json.loads(run_cli(*base, "--hardware", "b200").stdout)
    hop = json.loads(run_cli(*base, "--hardware", "h200", "--mla-verify", "prefill").stdout)
    assert not fast["inputs"]["mla_verify_prefill"] and slow["inputs"]["mla_verify_prefill"]
    assert hop["inputs"]["mla_verify_prefill"] and "mla_verify_prefill" in hop["inputs"]["engine_settings_given"]
    assert fast["points"][0]["speedup"] > 1.3 > 0.6 > slow["points"][0]["speedup"]
    text = run_cli(*base[:-1], "--hardware", "b200", "--mla-verify", "decode").stdout
    assert "MLA verify as a decode (given)" in text
    sc = crossover.scenario(model="deepseek-v3", hardware="b200", tp=8, method="mtp", k=1, mla_verify="decode")
    assert not sc.deployment.mla_verify_prefill
    with pytest.raises(InputError, match="decode or prefill"):
        crossover.scenario(model="deepseek-v3", hardware="b200", tp=8, method="mtp", k=1, mla_verify="fast")
    assert_one_line_error(run_cli(*base, "--hardware", "b200", "--mla-verify", "fast"), "--mla-verify", "invalid choice")


def test_the_mtp_layers_catch_up_pass_takes_the_prefill_path_too_by_hand():
    """vLLM's MTP drafter runs its first pass over every verified position (vllm/v1/spec_decode/eagle.py
    propose, 0.14.1) through the same MLA backend: where the target's verify takes the prefill path, the
    draft's one MLA layer does too. DeepSeek-V3 (61 layers) MTP k = 1 on 8 x B200, batch 64, context 2048:
    the draft forward grows by the target's term / 61 (the same KV, one layer); its width-1 passes
    (k = 3) are decodes and add nothing more."""
    on, off = _dep("b200", mla_verify_prefill="always"), _dep("b200", mla_verify_prefill="never")
    b = np.array([64.0])
    for k in (1, 3):
        spec = Speculation("mtp", k, Acceptance.rate(0.8))
        m_on, m_off = StepModel.of(on, spec), StepModel.of(off, spec)
        assert m_on.mtp_mla_tp == 8 and m_on.target_layers == 61 and m_on.draft_layers == 1
        st_on, st_off = (m.price(m.decode(b, 2048.0, spec)) for m in (m_on, m_off))
        grew = float(st_on.term("draft_forwards")[0] - st_off.term("draft_forwards")[0])
        assert grew == pytest.approx(float(st_on.term("mla_verify_prefill")[0]) / 61, rel=1e-9)
    # an EAGLE head for the same target has no MLA layer: nothing added
    eagle = Speculation("eagle3", 3, Acceptance.rate(0.8))
    m = StepModel.of(on, eagle)
    assert m.mtp_mla_tp is None
    # a draft TP of 1 puts all 128 heads on one GPU: the pass's up-projection 8x the FLOPs
    one = Speculation("mtp", 1, Acceptance.rate(0.8), draft_tp=1)
    assert StepModel.of(on, one).mtp_mla_tp == 1


def test_the_simulator_prices_the_mtp_catch_up_pass_through_the_same_path(monkeypatch):
    """The simulator's draft passes carry the KV a multi-token pass holds (its catch-up over the verified
    positions), priced by the same StepModel.price: every multi-token pass it prices holds its KV."""
    w, base = load_workload("random-1024-128")
    p, o = w.means(base=base)
    seen = []
    price = StepModel.price

    def spy(self, mix, detail=False):
        for _, f in mix.draft_passes:
            kv, held = np.asarray(f.kv, float), np.asarray(f.verify_kv, float)
            if np.ndim(held):
                seen.append((kv.copy(), held.copy()))
        return price(self, mix, detail)

    monkeypatch.setattr(StepModel, "price", spy)
    sc = Scenario(_dep("b200", mla_verify_prefill="always"), MTP, p + o / 2, p, o)
    run_level(sc, w, "concurrency", 16, num_prompts=32, seed=0, base=base, arms=(True,))
    assert seen and all(np.array_equal(kv, held) for kv, held in seen)
    assert sum(float(held.sum()) for _, held in seen) > 0


def test_triton_mla_captures_no_full_graphs_so_both_servers_run_piecewise():
    """vLLM 0.14.1 runs Triton MLA outside compute capability 9.x and 10.x and on ROCm; its builder keeps
    AttentionCGSupport.NEVER, so FULL_AND_PIECEWISE resolves to PIECEWISE for every step: the server
    without speculation pays the attention outside the graph too (40 us per sequence, by hand at batch 64).
    Hopper (FlashAttention MLA) keeps full graphs on both; Blackwell (CUTLASS MLA) on the off server."""
    b = np.array([64.0])
    for hardware, off_mode, on_mode in (("mi300x", "piecewise", "piecewise"), ("a100-80gb-sxm", "piecewise", "piecewise"),
                                        ("h200", "full", "full"), ("b200", "full", "piecewise")):
        dep = _dep(hardware)
        assert (dep.engine.cuda_graphs, dep.speculating_engine.cuda_graphs) == (off_mode, on_mode), hardware
        m = StepModel.of(dep, MTP)
        ragged = float(m.price(m.decode(b, 2048.0)).term("ragged_attention")[0])
        assert ragged == pytest.approx(64 * 40e-6 if off_mode == "piecewise" else 0.0), hardware
    # a backend named as scoring verify as a decode (--mla-verify decode) keeps the profile's graphs; one named
    # as taking the prefill path is Triton MLA outside 10.x (CUTLASS MLA there), Hopper included
    assert _dep("mi300x", mla_verify_prefill="never").engine.cuda_graphs == "full"
    assert _dep("h200", mla_verify_prefill="always").engine.cuda_graphs == "piecewise"
    assert _dep("b200", mla_verify_prefill="always").engine.cuda_graphs == "full"
    assert _dep("h200", "vllm-0.10").engine.cuda_graphs == "piecewise"  # 0.10: every step PIECEWISE anyway
    out = run_cli("predict", "--model", "deepseek-v3", "--hardware", "mi300x", "--tp", "8", "--method", "mtp",
                  "--k", "1", "--batch", "1").stdout
    assert "Triton MLA: no full graphs, both servers piecewise" in out
    # a dense model on the same GPU is untouched, and SGLang has no such rule
    dense = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("a100-80gb-sxm"), tp=1,
                       engine=load_engine("vllm"))
    assert dense.engine.cuda_graphs == "full" and _dep("mi300x", "sglang").engine.cuda_graphs == "full"


def test_the_engine_line_does_not_claim_an_mla_setting_that_does_not_apply():
    """--mla-verify on a model without MLA attention is said as unused; an eager server has no graphs to
    make piecewise."""
    out = run_cli("predict", "--model", "llama-3.1-8b", "--mla-verify", "prefill", "--batch", "1").stdout
    assert "--mla-verify unused (llama-3.1-8b has no MLA attention)" in out and "MLA verify as a decode" not in out
    out = run_cli("predict", "--model", "deepseek-v3", "--hardware", "mi300x", "--tp", "8", "--method", "mtp",
                  "--k", "1", "--batch", "1", "--cuda-graphs", "none").stdout
    assert "CUDA graphs none (given)" in out and "Triton MLA" not in out


def test_the_piecewise_fallback_is_vllm_v1s_and_overrides_a_given_full_only():
    """vLLM V1 drops the speculating server to PIECEWISE under an MLA prefill-path verify whatever full
    mode was set (and says so); a given none stays none. Engines without a piecewise mode keep what they
    run: --mla-verify prefill on SGLang, TensorRT-LLM or V0 prices the prefill path with their graphs."""
    kw = dict(model="deepseek-v3", hardware="b200", tp=8, method="mtp", k=1, acceptance=0.8)
    full = crossover.inputs(crossover.scenario(cuda_graphs_speculating="full", **kw))
    assert full["cuda_graphs_speculating"] == "piecewise" and full["mla_graph_fallback"] is True
    none = crossover.inputs(crossover.scenario(cuda_graphs_speculating="none", **kw))
    assert none["cuda_graphs_speculating"] == "none" and none["mla_graph_fallback"] is False
    for engine in ("sglang", "sglang-0.4", "trtllm", "vllm-v0"):
        said = crossover.inputs(crossover.scenario(engine=engine, mla_verify="prefill", **kw))
        assert said["mla_verify_prefill"] is True and said["mla_graph_fallback"] is False, engine
        assert said["cuda_graphs_speculating"] == said["cuda_graphs"] == "full", engine
    r = run_cli("predict", "--model", "deepseek-v3", "--hardware", "b200", "--tp", "8", "--method", "mtp",
                "--engine", "sglang", "--mla-verify", "prefill", "--batch", "16")
    assert r.returncode == 0 and "piecewise" not in r.stdout
