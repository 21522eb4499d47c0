"""Engines that capture decode steps only (vLLM V0, SGLang: EngineProfile.prefill_graphs False) run a
step that carries prompt tokens eagerly: it takes at least its layers' launch time, and a draft that
reads the prompts too (vllm 0.6.3.post1 worker/model_runner.py; sglang 0.5.5 model_runner.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossover.model.acceptance import Acceptance
from crossover.model.forward import Mix, prompts
from crossover.model.scenario import Scenario
from crossover.model.speculation import Speculation
from crossover.model.step import StepModel
from crossover.serving.sweep import run_level
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.loader import load_engine
from crossover.specs.workload import Workload

H100 = load_hardware("h100-sxm")


def _model(engine: str, model: str = "llama-3-70b", tp: int = 4, spec: Speculation | None = None) -> StepModel:
    return StepModel.of(Deployment(model=load_model(model), hardware=H100, tp=tp, engine=load_engine(engine)), spec)


def test_which_profiles_capture_decode_steps_only():
    assert [n for n in ("vllm", "vllm-0.10", "vllm-v0", "sglang", "sglang-0.4")
            if not load_engine(n).prefill_graphs] == ["vllm-v0", "sglang", "sglang-0.4"]
    for n in ("vllm-v0", "sglang", "sglang-0.4"):
        assert load_engine(n).sources.get("prefill_graphs"), n


def test_a_prompt_step_takes_at_least_its_layers_launch_time_by_hand():
    """One 200-token prompt of Llama-3-70B on 4 x H100: the kernels take less than V0's 80 layers x 340 us
    = 27.2 ms of eager launches; a step standing for a share s of prompt steps pays the floor on s."""
    v0 = _model("vllm-v0")
    kernels = float(v0.price(Mix(prompts(v0.target, 1.0, 200.0, 200.0))).term("target_forward"))
    floor = 80 * 340e-6
    assert v0.target_layers == 80 and kernels < floor
    for share in (1.0, 0.25):
        got = float(v0.price(Mix(prompts(v0.target, 1.0, 200.0, 200.0), prompting=share)).term("target_forward"))
        assert got == pytest.approx((1 - share) * kernels + share * floor, rel=1e-12)
    # vLLM V1 replays prompt steps as PIECEWISE graphs: no floor
    v1 = _model("vllm")
    assert float(v1.price(Mix(prompts(v1.target, 1.0, 200.0, 200.0), prompting=1.0)).term("target_forward")) == \
        pytest.approx(float(v1.price(Mix(prompts(v1.target, 1.0, 200.0, 200.0))).term("target_forward")), rel=1e-12)
    # a long prompt's kernels exceed the floor: unchanged
    long = Mix(prompts(v0.target, 1.0, 4000.0, 4000.0))
    assert float(v0.price(long).term("target_forward")) > floor
    assert float(v0.price(Mix(long.target, prompting=1.0)).term("target_forward")) == \
        pytest.approx(float(v0.price(long).term("target_forward")), rel=1e-12)


def test_the_draft_reads_the_prompts_eagerly_too():
    """V0's Qwama-0.5B draft (24 layers) prefilling one 200-token prompt: at least 24 x 340 us."""
    spec = Speculation("draft", 4, Acceptance.rate(0.7), draft=load_model("qwama-0.5b"), draft_tp=1)
    v0 = _model("vllm-v0", spec=spec)
    pre = prompts(v0.draft, 1.0, 200.0, 200.0)
    kernels = float(v0.price(Mix(prompts(v0.target, 1.0, 200.0, 200.0), draft_prefill=pre)).term("draft_prefill"))
    assert v0.draft_layers == 24 and kernels < 24 * 340e-6
    eager = v0.price(Mix(prompts(v0.target, 1.0, 200.0, 200.0), draft_prefill=pre, prompting=1.0))
    assert float(eager.term("draft_prefill")) == pytest.approx(24 * 340e-6, rel=1e-12)


def test_the_simulator_runs_its_prompt_steps_eagerly_where_the_engine_does():
    """One client, 32-token prompts on Llama-3.1-8B: V0's prompt step takes its 32 layers x 340 us of
    launches (10.9 ms), far above its kernels; with prefill graphs (the same profile otherwise) TTFT is
    the kernels' time. Decode steps are unchanged (TPOT the same)."""
    wl = Workload(name="short", prompt_len={"dist": "fixed", "value": 32}, output_len={"dist": "fixed", "value": 16})
    model = load_model("llama-3.1-8b")
    v0 = load_engine("vllm-v0")
    graphed = v0.model_copy(update={"prefill_graphs": True})
    res = {}
    for name, eng in (("eager", v0), ("graphed", graphed)):
        sc = Scenario(Deployment(model=model, hardware=H100, tp=1, engine=eng), Speculation("ngram", 3, Acceptance.rate(0.6)),
                      48.0, 32.0, 16.0)
        res[name] = run_level(sc, wl, "concurrency", 1, num_prompts=20, seed=0, arms=(False,))["off"]
    floor = 32 * 340e-3  # ms
    m = StepModel.of(Deployment(model=model, hardware=H100, tp=1, engine=v0), None)
    kernels = float(m.price(Mix(prompts(m.target, 1.0, 32.0, 32.0))).term("target_forward")) * 1e3
    assert kernels < floor
    assert res["eager"]["median_ttft_ms"] >= floor
    assert res["eager"]["median_ttft_ms"] - res["graphed"]["median_ttft_ms"] == pytest.approx(floor - kernels, rel=1e-6)
    assert res["eager"]["median_tpot_ms"] == pytest.approx(res["graphed"]["median_tpot_ms"], rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(engine=st.sampled_from(["vllm-v0", "sglang", "vllm"]), length=st.floats(8, 8000), count=st.floats(0.05, 8),
       share=st.floats(0, 1), more=st.floats(1.0, 3.0))
def test_more_prompt_tokens_or_a_larger_eager_share_never_step_faster(engine, length, count, share, more):
    m = _model(engine, "llama-3.1-8b", 1)

    def step(c, s):
        return float(m.price(Mix(prompts(m.target, c, length, length), prompting=s)).total)

    base = step(count, share)
    assert step(count * more, share) >= base * (1 - 1e-12)
    assert step(count, min(1.0, share * more)) >= base * (1 - 1e-12)
