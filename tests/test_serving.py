"""The serving simulator: consistency with the closed form, the prefill/decode mix, determinism."""

import numpy as np
import pytest

from crossover.model.scenario import Scenario
from crossover.analysis.curves import evaluate, predict
from crossover.errors import CrossoverError
from crossover.serving.engine import EngineLimits, kv_capacity_tokens
from crossover.serving.metrics import weighted_percentile
from crossover.serving.simulator import Arm, arrivals_poisson, simulate
from crossover.serving.sweep import Level, SweepResult, check_fits, run_level, sweep
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation
from crossover.specs.workload import Workload, fixed, load_workload


def scenario(hw="h100-sxm", method="eagle", alpha=0.7, k=3, p=None, o=None, model="llama-3.1-8b"):
    dep = Deployment(model=load_model(model), hardware=load_hardware(hw), tp=1)
    ctx = 1024.0 if p is None else p + o / 2
    return Scenario(dep, Speculation(method, k, Acceptance.rate(alpha)), ctx, p, o)


@pytest.mark.parametrize("p_len,o_len", [(1024, 128), (128, 512)])
@pytest.mark.parametrize("conc", [1, 16, 64])
def test_simulation_agrees_with_closed_form_at_fixed_lengths(p_len, o_len, conc):
    sc = scenario(p=p_len, o=o_len)
    # enough requests that the drain at the end (fewer than conc running) weighs little
    r = run_level(sc, fixed(p_len, o_len), "concurrency", conc, num_prompts=2000, seed=1)
    c = evaluate(sc, [conc])
    assert r["off"]["output_throughput"] == pytest.approx(float(c.tokens_per_s_off[0]), rel=0.05)
    assert r["on"]["output_throughput"] == pytest.approx(float(c.tokens_per_s_on[0]), rel=0.05)
    # decode steps without prefill cost exactly the predictor's step at that batch and context
    assert r["off"]["median_tpot_ms"] > 0


def test_tpot_at_concurrency_1_is_the_decode_step():
    sc = scenario(p=128, o=256)
    r = run_level(sc, fixed(128, 256), "concurrency", 1, num_prompts=50, seed=0)
    from crossover.model.step import step_time

    dec = float(step_time(sc.deployment, [1], 1, 128 + 128).total[0])  # mean context over the decode
    assert r["off"]["median_tpot_ms"] == pytest.approx(dec * 1e3, rel=0.02)
    assert r["on"]["spec_decode_acceptance_length"] == pytest.approx(sc.speculation.tau, rel=0.03)


def test_the_prefill_share_lowers_the_gain_and_the_crossover():
    # same mean context (prompt + output / 2 = 768) so only the prefill/decode mix changes: the
    # closed form's crossover moves down as the prompt share grows, and in the simulator the gain at
    # low load (where the prefill share, not the batch, decides it) falls level by level. (Near the
    # crossover the simulated ratios of the last two mixes lie within each other's noise.)
    mixes = [(256, 1024), (640, 256), (736, 64)]
    closed = [predict(scenario(hw="a100-80gb-sxm", alpha=0.6, p=p, o=o), [1, 256]).crossover_batch
              for p, o in mixes]
    assert closed[0] > closed[1] > closed[2]
    gains = []
    for p_len, o_len in mixes:
        sc = scenario(hw="a100-80gb-sxm", alpha=0.6, p=p_len, o=o_len)
        res = sweep(sc, fixed(p_len, o_len), "concurrency", [8, 32], num_prompts=300, seed=0)
        gains.append(res.ratios)
    for level in range(2):
        assert gains[0][level] > gains[1][level] > gains[2][level]


def test_prefill_is_not_sped_up_by_speculation():
    # with long prompts and short outputs (Amdahl) the gain at low load is smaller
    chat = run_level(scenario(p=128, o=512), fixed(128, 512), "concurrency", 4, num_prompts=120, seed=0)
    summ = run_level(scenario(p=4000, o=64), fixed(4000, 64), "concurrency", 4, num_prompts=120, seed=0)
    gain = lambda r: r["on"]["output_throughput"] / r["off"]["output_throughput"]  # noqa: E731
    assert gain(summ) < gain(chat)
    # and speculation leaves time-to-first-token no better
    assert summ["on"]["median_ttft_ms"] >= summ["off"]["median_ttft_ms"] * 0.999


def test_same_seed_same_results_and_p99_above_p50():
    sc = scenario(p=222, o=201)
    w, base = load_workload("sharegpt")
    a = run_level(sc, w, "concurrency", 16, num_prompts=200, seed=7, base=base)
    b = run_level(sc, w, "concurrency", 16, num_prompts=200, seed=7, base=base)
    c = run_level(sc, w, "concurrency", 16, num_prompts=200, seed=8, base=base)
    assert a == b
    assert a["on"]["output_throughput"] != c["on"]["output_throughput"]
    for arm in ("off", "on"):
        for m in ("ttft", "tpot", "itl", "e2el"):
            assert a[arm][f"p99_{m}_ms"] >= a[arm][f"median_{m}_ms"]
            assert a[arm][f"median_{m}_ms"] > 0


def test_acceptance_is_ragged_across_the_batch():
    sc = scenario(p=64, o=300, alpha=0.6)
    r = run_level(sc, fixed(64, 300), "concurrency", 32, num_prompts=200, seed=0)
    on = r["on"]
    assert on["p99_tpot_ms"] > on["median_tpot_ms"] * 1.02  # per-request acceptance noise spreads TPOT
    assert on["spec_decode_acceptance_length"] == pytest.approx(sc.speculation.tau, rel=0.03)


def test_open_loop_low_rate_same_throughput_lower_latency():
    sc = scenario(p=200, o=200)
    r = run_level(sc, fixed(200, 200), "request_rate", 1.0, num_prompts=200, seed=0)
    assert r["on"]["request_throughput"] == pytest.approx(r["off"]["request_throughput"], rel=0.1)
    assert r["off"]["mean_e2el_ms"] / r["on"]["mean_e2el_ms"] > 1.3


def test_bursty_arrivals_have_the_requested_rate():
    rng = np.random.default_rng(0)
    for burst in (0.25, 1.0, 4.0):
        t = arrivals_poisson(rng, 20000, 5.0, burst)
        assert (len(t) - 1) / t[-1] == pytest.approx(5.0, rel=0.05)
    gaps = np.diff(arrivals_poisson(rng, 20000, 5.0, 0.25))
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(2.0, rel=0.1)  # cv = 1/sqrt(shape)


def test_a_concurrency_that_does_not_fit_says_what_fits():
    sc = scenario(hw="rtx-4090", p=2000, o=1000)
    with pytest.raises(CrossoverError, match=r"does not fit.*concurrency <= \d+"):
        check_fits(sc, fixed(2000, 1000), 512)


def test_engine_limits_cap_running_sequences():
    sc = scenario(p=64, o=64)
    limits = EngineLimits(max_num_seqs=8, max_num_batched_tokens=8192)
    r = run_level(sc, fixed(64, 64), "concurrency", 32, num_prompts=100, seed=0, limits=limits)
    r8 = run_level(sc, fixed(64, 64), "concurrency", 8, num_prompts=100, seed=0)
    # 32 clients on an engine that runs 8 at a time deliver about what 8 clients do, and wait longer
    assert r["off"]["output_throughput"] == pytest.approx(r8["off"]["output_throughput"], rel=0.15)
    assert r["off"]["median_e2el_ms"] > 2 * r8["off"]["median_e2el_ms"]


def test_kv_capacity_counts_the_draft():
    sc = scenario(p=100, o=100)
    sc = Scenario(sc.deployment, Speculation("draft", 3, Acceptance.rate(0.7), draft=load_model("llama-3.2-1b")),
                  150, 100, 100)
    assert kv_capacity_tokens(sc.deployment, sc) < kv_capacity_tokens(sc.deployment)


def test_weighted_percentile():
    v = np.array([1.0, 2.0, 3.0])
    assert weighted_percentile(v, np.array([1.0, 1.0, 1.0]), 50) == 2.0
    assert weighted_percentile(v, np.array([0.0, 0.0, 5.0]), 1) == 3.0
    assert weighted_percentile(v, np.array([10.0, 1.0, 1.0]), 50) == 1.0


def test_sweep_crossover_interpolates_in_log_load():
    res = SweepResult("concurrency", [Level(8, {"output_throughput": 100.0}, {"output_throughput": 120.0}),
                                      Level(32, {"output_throughput": 100.0}, {"output_throughput": 80.0})])
    assert res.crossover == pytest.approx(16.0)
    flat = SweepResult("concurrency", [Level(8, {"output_throughput": 100.0}, {"output_throughput": 120.0})])
    assert flat.crossover is None and flat.side == "on"


def test_workload_presets_and_distributions():
    rng = np.random.default_rng(0)
    for name in ("sharegpt", "cnn-dailymail", "gsm8k", "instructcoder", "long-context", "random-1024-128"):
        w, base = load_workload(name)
        p, o = w.sample(rng, 500, base)
        assert (p >= 1).all() and (o >= 1).all() and len(p) == 500
        assert w.sources
    w = Workload.model_validate({"name": "x", "prompt_len": {"dist": "lognormal", "mean": 300, "sd": 100},
                                 "output_len": {"dist": "uniform", "low": 10, "high": 20}})
    p, o = w.sample(rng, 20000)
    assert p.mean() == pytest.approx(300, rel=0.03) and p.std() == pytest.approx(100, rel=0.08)
    assert o.min() >= 10 and o.max() <= 20
    emp = Workload.model_validate({"name": "e", "prompt_len": {"dist": "empirical", "values": [5, 7]},
                                   "output_len": {"dist": "fixed", "value": 3}})
    assert set(emp.sample(rng, 100)[0]) == {5, 7}


def test_empirical_lengths_from_a_file(tmp_path):
    (tmp_path / "lens.txt").write_text("10\n20\n30\n")
    (tmp_path / "w.yaml").write_text("name: mine\nprompt_len: {dist: empirical, file: lens.txt}\n"
                                     "output_len: {dist: fixed, value: 5}\n")
    w, base = load_workload(str(tmp_path / "w.yaml"))
    p, _ = w.sample(np.random.default_rng(0), 300, base)
    assert set(p) == {10, 20, 30}


def test_bad_workloads_are_one_line_errors(tmp_path):
    with pytest.raises(CrossoverError, match="unknown workload"):
        load_workload("sharegtp")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nprompt_len: {dist: fixed, value: -3}\noutput_len: {dist: fixed, value: 5}\n")
    with pytest.raises(CrossoverError, match="bad.yaml"):
        load_workload(str(bad))
    with pytest.raises(CrossoverError):
        fixed(0, 10)


def test_simulation_handles_prompts_longer_than_the_token_budget():
    sc = scenario(p=3000, o=16)
    arm = Arm(sc, False)
    log = simulate(arm, np.full(6, 3000), np.full(6, 16), np.random.default_rng(0), concurrency=2,
                   limits=EngineLimits(max_num_batched_tokens=1024), kv_capacity=kv_capacity_tokens(sc.deployment))
    assert np.all(np.isfinite(log.finish)) and np.all(log.first_token > 0)


def test_routing_by_load_beats_always_on_at_peak_and_always_off_in_troughs():
    w, base = load_workload("sharegpt")
    p, o = w.means(base=base)
    sc = scenario(p=p, o=o, alpha=0.6)
    from crossover.analysis.policy import best_k_policy

    schedule = best_k_policy(sc, 256, 3).best_k
    res = sweep(sc, w, "request_rate", [10.0, 45.0], num_prompts=600, seed=0, burstiness=0.2, base=base,
                schedule=schedule)
    trough, peak = res.levels
    lat = lambda arm: arm["mean_e2el_ms"]  # noqa: E731
    assert lat(trough.policy) < 0.8 * lat(trough.off)  # speculating where it pays
    assert lat(peak.policy) < lat(peak.on)  # not speculating where it does not
    for lv in res.levels:
        assert lat(lv.policy) <= 1.03 * min(lat(lv.on), lat(lv.off))


def test_a_schedule_of_zeros_without_a_draft_is_the_off_arm():
    sc = Scenario(scenario(p=200, o=100).deployment, Speculation("ngram", 3, Acceptance.rate(0.6)), 250, 200, 100)
    r = run_level(sc, fixed(200, 100), "concurrency", 32, num_prompts=150, seed=0,
                  schedule=np.zeros(256, int))
    assert r["policy"]["output_throughput"] == pytest.approx(r["off"]["output_throughput"], rel=1e-12)
