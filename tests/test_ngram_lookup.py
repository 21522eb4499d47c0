"""vLLM V1's CPU n-gram proposer scans every request's whole token history each step (a numba KMP,
vllm/v1/spec_decode/ngram_proposer.py in 0.10.1.1 and 0.14.1): a cost per sequence and per context
token searched (engines/vllm.yaml ngram_lookup_per_seq_us, ngram_lookup_per_token_ns)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crossover
from crossover.api.build import engines
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation
from crossover.model.step import StepModel
from crossover.specs import Deployment, Efficiency, load_hardware, load_model
from crossover.specs.loader import load_engine

L8B, H100 = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
NGRAM = Speculation("ngram", 4, Acceptance.rate(0.6, 0.5))


def _model(engine: str, **eff) -> StepModel:
    dep = Deployment(model=L8B, hardware=H100, tp=1, engine=load_engine(engine), efficiency=Efficiency(**eff))
    return StepModel.of(dep, NGRAM)


def test_the_v1_lookup_costs_per_sequence_and_per_context_token_by_hand():
    m = _model("vllm")
    b = np.array([10.0, 100.0])
    lookup = m.price(m.decode(b, 1000.0, NGRAM)).term("proposer_lookup")
    # each sequence holds its 1000 cached tokens and the step's 1 + 0.5 x 4 = 3 positions
    width = 1.0 + 0.5 * 4
    assert NGRAM.verify_width == pytest.approx(width)
    np.testing.assert_allclose(lookup, b * (2.6e-6 + (1000.0 + width) * 1.04e-9), rtol=1e-12)


def test_the_lookup_reproduces_the_measurement_it_rests_on():
    """PR #56732: 70.28 ms per step for 512 sequences of 129,536 tokens (one thread per TP rank)."""
    m = _model("vllm")
    lookup = float(m.price(m.decode(np.array([512.0]), 129536.0 - 3.0, NGRAM)).term("proposer_lookup")[0])
    assert lookup == pytest.approx(70.28e-3, rel=0.01)
    # and PR #13365's ShareGPT run: ~2.9 us per sequence-step at contexts of ~300 tokens
    short = float(m.price(m.decode(np.array([1.0]), 300.0 - 3.0, NGRAM)).term("proposer_lookup")[0])
    assert short == pytest.approx(2.9e-6, rel=0.02)


def test_engines_whose_lookup_does_not_scan_the_context_pay_per_sequence_only():
    for name in ("vllm-v0", "sglang"):
        m = _model(name)
        per_seq = m.deployment.ngram_lookup_per_seq_s
        for ctx in (500.0, 50000.0):
            lookup = m.price(m.decode(np.array([8.0]), ctx, NGRAM)).term("proposer_lookup")
            np.testing.assert_allclose(lookup, [8.0 * per_seq], rtol=1e-12)


def test_every_profile_with_a_per_token_lookup_gives_its_source():
    for name in engines():
        p = load_engine(name)
        if p.ngram_lookup_per_token_ns:
            assert p.sources.get("ngram_lookup_per_token_ns"), name


def test_the_lookup_is_zero_without_speculation_and_in_the_speed_of_light_bound():
    m = _model("vllm")
    assert float(np.sum(m.price(m.decode(np.array([64.0]), 8000.0)).term("proposer_lookup"))) == 0.0
    sol = StepModel.of(m.deployment.model_copy(update={"efficiency": Efficiency.speed_of_light()}), NGRAM)
    assert float(sol.price(sol.decode(np.array([64.0]), 8000.0, NGRAM)).term("proposer_lookup")[0]) == 0.0


@settings(max_examples=40, deadline=None)
@given(batch=st.floats(1, 512), ctx=st.floats(16, 120000), extra=st.floats(1.01, 4.0))
def test_a_longer_context_or_a_larger_batch_never_looks_up_faster(batch, ctx, extra):
    m = _model("vllm")
    base = float(m.price(m.decode(np.array([batch]), ctx, NGRAM)).term("proposer_lookup")[0])
    longer = float(m.price(m.decode(np.array([batch]), ctx * extra, NGRAM)).term("proposer_lookup")[0])
    larger = float(m.price(m.decode(np.array([batch * extra]), ctx, NGRAM)).term("proposer_lookup")[0])
    assert longer >= base and larger >= base


def test_the_simulator_prices_the_lookup_over_the_contexts_it_records():
    """The serving simulator records the KV its verifying sequences hold and prices the same term: with
    the per-token cost set to 0 the speculating arm is faster by about the contexts searched, the
    server without speculation is unchanged."""
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", tp=2, method="ngram", k=4, acceptance=0.6,
              match_rate=0.5, engine="vllm")
    run = {"num_prompts": 60, "seed": 1}
    sc = crossover.scenario(**kw)
    zero = dataclasses.replace(sc, deployment=sc.deployment.model_copy(update={
        "efficiency": sc.deployment.efficiency.model_copy(update={"ngram_lookup_per_token_s": 0.0})}))
    with_it = crossover.simulate("long-context", [8], run=run, scenario=sc).to_dict()["levels"][0]
    without = crossover.simulate("long-context", [8], run=run, scenario=zero).to_dict()["levels"][0]
    assert with_it["off"]["mean_tpot_ms"] == pytest.approx(without["off"]["mean_tpot_ms"], rel=1e-12)
    slower = with_it["on"]["mean_tpot_ms"] - without["on"]["mean_tpot_ms"]
    # 8 sequences of 16K-32K-token prompts plus up to 256 outputs: ~8 x 24.1K x 1.04 ns more per step,
    # each step emitting the acceptance length per sequence
    tau = with_it["on"]["spec_decode_acceptance_length"]
    expected = 8 * 24.1e3 * 1.04e-9 * 1e3 / tau  # ms per output token
    assert 0.5 * expected < slower < 2.0 * expected
