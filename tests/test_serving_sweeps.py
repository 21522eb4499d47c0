"""The serving simulator's sweeps: throughput as `vllm bench serve` counts it, saturation, level seeds."""

import json

import numpy as np
import pytest

from conftest import run_cli
from crossover.model.scenario import Scenario
from crossover.errors import CrossoverError
from crossover.reporting.serving import simulation_dict, simulation_table
from crossover.serving.engine import EngineLimits, kv_capacity_tokens
from crossover.serving.metrics import summarize
from crossover.serving.simulator import Arm, simulate
from crossover.serving.sweep import sweep
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation
from crossover.specs.workload import fixed

LIMITS = EngineLimits(max_num_seqs=32)


def scenario(p=200, o=100):
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    return Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7)), p + o / 2, p, o)


def test_output_throughput_is_completed_tokens_over_the_benchmark_duration():
    sc = scenario()
    prompt, output = np.full(40, 200), np.full(40, 100)
    log = simulate(Arm(sc, False), prompt, output, np.random.default_rng(0), concurrency=8,
                   kv_capacity=kv_capacity_tokens(sc.deployment))
    res = summarize(log, 0)
    duration = float(np.max(log.finish))  # first request sent at 0, last one completed
    assert res["output_throughput"] == pytest.approx(output.sum() / duration, rel=1e-12)
    assert res["request_throughput"] == pytest.approx(40 / duration, rel=1e-12)
    assert res["saturated"] is False


def test_rates_above_capacity_deliver_the_capacity_and_are_marked_saturated():
    sc = scenario()
    res = sweep(sc, fixed(200, 100), "request_rate", [2.0, 1000.0, 1e6], num_prompts=150, seed=0, limits=LIMITS)
    low, high, huge = res.levels
    for arm in ("off", "on"):
        cap = getattr(low, arm)["capacity_request_rate"]
        assert getattr(low, arm)["saturated"] is False
        assert getattr(low, arm)["offered_request_rate"] == 2.0
        assert getattr(low, arm)["achieved_request_rate"] == pytest.approx(2.0, rel=0.25)
        for lv in (high, huge):
            a = getattr(lv, arm)
            assert a["saturated"] is True and a["capacity_request_rate"] == cap
            # a saturated server still delivers (nearly) its capacity, not zero
            assert a["output_throughput"] > 0.5 * cap * 100
            assert a["achieved_request_rate"] <= 1.25 * cap
        assert huge.off["output_throughput"] > 0.8 * high.off["output_throughput"]
    d = simulation_dict(res)
    assert d["levels"][2]["off"]["saturated"] is True and d["levels"][0]["on"]["saturated"] is False
    text = simulation_table(res, {"model": "m", "tp": 1, "hardware": "h", "workload": "w", "prompt_len": 200,
                                  "output_len": 100, "num_prompts": 150, "seed": 0, "method": "eagle", "k": 3,
                                  "tau": 2.5})
    assert "* saturated" in text and "achieved req/s" in text
    assert text.count("*") >= 5  # four saturated arm-levels and the footnote


def test_a_level_is_the_same_alone_and_inside_a_sweep():
    sc = scenario()
    w = fixed(200, 100)
    alone = sweep(sc, w, "concurrency", [24], num_prompts=120, seed=3)
    pair = sweep(sc, w, "concurrency", [4, 24], num_prompts=120, seed=3)
    reordered = sweep(sc, w, "concurrency", [24, 8, 4], num_prompts=120, seed=3)
    assert alone.levels[0].off == pair.levels[1].off == reordered.levels[2].off
    assert alone.levels[0].on == pair.levels[1].on == reordered.levels[2].on
    rates = sweep(sc, w, "request_rate", [3.0], num_prompts=120, seed=3, limits=LIMITS)
    rates2 = sweep(sc, w, "request_rate", [1.0, 3.0], num_prompts=120, seed=3, limits=LIMITS)
    assert rates.levels[0].on == rates2.levels[1].on


def test_a_negative_seed_is_a_one_line_error():
    with pytest.raises(CrossoverError, match="seed"):
        sweep(scenario(), fixed(200, 100), "concurrency", [4], num_prompts=20, seed=-1)


def test_simulate_json_marks_saturation_per_arm_and_level():
    r = run_cli("simulate", "--model", "llama-3.1-8b", "--workload", "random-1024-128", "--request-rate", "1,100000",
                "--num-prompts", "60", "--max-num-seqs", "16", "--json")
    assert r.returncode == 0, r.stderr
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout
    levels = json.loads(r.stdout)["levels"]
    assert [lv["off"]["saturated"] for lv in levels] == [False, True]
    assert levels[1]["off"]["output_throughput"] > 0
