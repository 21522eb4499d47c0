"""The library API: scenarios built as the CLI builds them, typed results whose to_dict() is the
CLI's --json, one-line errors, and the step model as the one place a step is priced."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import crossover
from crossover.cli import main
from crossover.model.scenario import Scenario
from crossover.serving.simulator import Arm, simulate
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation
from crossover.model.step import StepModel, step_time


def as_json(result) -> dict:
    """What `--json` would print for a result (tuples become lists)."""
    return json.loads(json.dumps(result.to_dict()))


def cli_json(*argv: str) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*argv, "--json"]) == 0
    return json.loads(buf.getvalue())


def test_predict_to_dict_is_the_cli_json():
    res = crossover.predict(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=5, acceptance=0.8,
                            batches=[1, 8, 64])
    assert as_json(res) == cli_json("predict", "--model", "llama-3.1-8b", "--method", "eagle3", "--k", "5",
                                     "--acceptance", "0.8", "--batch", "1,8,64")
    assert res.to_text().startswith("llama-3.1-8b on 1 x h100-sxm")


def test_whatif_and_policy_to_dict_are_the_cli_json():
    w = crossover.whatif("batch=1..256", "k=1..4", points=6, model="llama-3.1-8b")
    assert as_json(w) == cli_json("whatif", "--model", "llama-3.1-8b", "--x", "batch=1..256", "--y", "k=1..4",
                                   "--points", "6")
    p = crossover.policy(model="llama-3.1-8b", k_max=4, batch_max=64)
    assert as_json(p) == cli_json("policy", "--model", "llama-3.1-8b", "--k-max", "4", "--batch-max", "64")


def test_scenario_chooses_tp_and_refuses_what_does_not_fit():
    sc = crossover.scenario(model="llama-3.1-70b", hardware="h100-sxm")
    assert (sc.deployment.tp, sc.tp_auto) == (4, True)
    with pytest.raises(crossover.CrossoverError, match="does not fit on 1 x h100-sxm"):
        crossover.scenario(model="llama-3.1-70b", hardware="h100-sxm", tp=1)
    dep = Deployment(model=load_model("llama-3.1-70b"), hardware=load_hardware("h100-sxm"))
    with pytest.raises(crossover.CrossoverError, match="does not fit"):
        crossover.predict(Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7))))


def test_acceptance_sources_in_order(tmp_path):
    assert crossover.scenario(model="llama-3.1-8b").speculation.acceptance.value == 0.7
    cal = tmp_path / "fit.yaml"
    cal.write_text("crossover_calibration: 1\nparameters:\n  acceptance: {value: 0.55}\n")
    assert crossover.scenario(model="llama-3.1-8b", calibration=cal).speculation.acceptance.value == 0.55
    assert crossover.scenario(model="llama-3.1-8b", calibration=cal, tau=2.5).speculation.acceptance.kind == "tau"


def test_k_given_with_a_tree_must_match_its_depth():
    assert crossover.scenario(model="llama-3.1-8b", tree="4,4,2,1").speculation.k == 4
    with pytest.raises(crossover.CrossoverError, match="disagrees with the tree's depth 4"):
        crossover.scenario(model="llama-3.1-8b", tree="4,4,2,1", k=3)
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        assert main(["predict", "--model", "llama-3.1-8b", "--k", "3", "--tree", "4,4,2,1"]) == 2
    assert "--k" in buf.getvalue()


def test_one_pricing_of_every_term_by_hand():
    """A speculative step is the target forward at the verify width, the step overhead, k draft passes
    with their launches, and the speculative overheads: nothing else, nowhere else."""
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"))
    spec = Speculation("draft", 3, Acceptance.rate(0.7), draft=load_model("llama-3.2-1b"))
    model = StepModel.of(dep, spec)
    b, ctx = np.array([1.0, 32.0]), 1000.0
    st = model.price(model.decode(b, ctx, spec))
    eff = dep  # the overheads in effect (engine profile unless overridden)
    draft_dep = spec.draft_deployment(dep)
    def sampler(d, plain, drafts, bonus=0):  # fp32 sampler traffic over the 128256-entry vocabulary
        return (plain * d.sampler_bytes_per_vocab + drafts * d.verify_bytes_per_vocab
                + bonus * d.bonus_bytes_per_vocab) * 128256 / d.bandwidth

    # a draft pass is a forward without the step and without the target's sampler
    one_draft = step_time(draft_dep, b, 1, ctx).total - eff.step_overhead_s - sampler(draft_dep, b, 0)
    # the verify forward samples b bonus positions plainly and verifies 3 b drafts
    verify = step_time(dep, b, 4, ctx).total - sampler(dep, 4 * b, 0) + sampler(dep, b, 3 * b, b)
    # and the verify batches that miss a FULL graph run attention outside it (vLLM: half, 40 us a sequence)
    miss = b * dep.ragged_per_seq_s * dep.engine.spec_graph_miss
    # a draft model turns vLLM 0.14's async scheduling off: the scheduler's 12.7 us per sequence is exposed
    host = b * 12.7e-6
    want = (verify + 3 * (one_draft + eff.draft_step_overhead_s) + eff.spec_overhead_s
            + b * eff.spec_overhead_per_seq_s + 4 * b * eff.spec_per_position_s + miss + host)
    np.testing.assert_allclose(st.total, want, rtol=1e-12)
    np.testing.assert_allclose(st.term("host_work"), host, rtol=1e-12)


def test_the_tabulated_path_is_the_evaluator():
    model = StepModel.of(Deployment(model=load_model("gpt-oss-20b"), hardware=load_hardware("h100-sxm")))
    plan = model.target
    q = np.array([[1.0, 4.0, 0.0, 700.0], [1.0, 1.0, 3.0, 12.0]])
    ctx = np.array([[10.0, 5000.0, 0.0, 0.0], [200.0, 9000.0, 31.0, 4096.0]])
    kv, qk = plan.window_sums(q, ctx)
    tokens = q.sum(axis=1)
    sampled = np.array([6.0, 17.0])
    exact = plan.evaluate(tokens, kv, qk, sampled).total
    fast = plan.seconds(tokens.astype(np.int64), kv, qk, sampled.astype(np.int64))
    np.testing.assert_allclose(fast, exact, rtol=1e-12)


@pytest.mark.parametrize("speculate", [False, True])
def test_simulated_decode_steps_are_the_step_models_prices(speculate):
    """One request at a time, nothing rejected: every decode step the simulator runs costs exactly what
    StepModel.price says for one sequence at that context (closed form, step by step)."""
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"))
    spec = Speculation("eagle", 3, Acceptance.rate(0.0))
    p, o = 300, 40
    log = simulate(Arm(Scenario(dep, spec, p + o / 2, p, o), speculate), np.array([p]), np.array([o]),
                   np.random.default_rng(0), concurrency=1)
    model = StepModel.of(dep, spec)
    ctx = p + np.arange(o - 1, dtype=float)  # one token per step after the prompt's own
    steps = model.price(model.decode(np.ones_like(ctx), ctx, spec if speculate else None)).total
    assert log.finish[0] - log.first_token[0] == pytest.approx(float(steps.sum()), rel=1e-12)


def test_a_calibration_of_another_model_applies_only_when_forced(tmp_path):
    fit = tmp_path / "fit.yaml"
    fit.write_text("crossover_calibration: 1\nscenario: {model: llama-3.1-70b, hardware: h100-sxm, tp: 4}\n"
                   "parameters:\n  step_overhead_ms: {value: 2.0}\n")
    with pytest.raises(crossover.CrossoverError, match="force"):
        crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", calibration=fit)
    with pytest.warns(UserWarning):
        sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", calibration=fit, force_calibration=True)
    assert sc.deployment.efficiency.step_overhead_s == pytest.approx(2e-3)
    same = crossover.scenario(model="llama-3.1-70b", hardware="h100-sxm", tp=4, calibration=fit)
    assert same.deployment.efficiency.step_overhead_s == pytest.approx(2e-3)
