"""Simulated sweeps size each level for a steady state, bound their throughput, cap their size and
report progress (issue: numbers you can trust)."""

from __future__ import annotations

import pytest
from conftest import assert_one_line_error, run_cli

import crossover
from crossover.cli.parser import build_parser
from crossover.serving.sweep import MAX_LEVELS, MAX_PROMPTS, level_prompts


def test_a_concurrency_level_runs_ten_rounds_of_its_clients_after_the_warm_up():
    assert level_prompts("concurrency", 8, 1000, 0.1) == 1000
    assert level_prompts("concurrency", 256, 1000, 0.1) == 2845  # ceil(10 x 256 / 0.9)
    assert level_prompts("request_rate", 256, 1000, 0.1) == 1000


def test_throughput_intervals_bracket_the_throughput_and_the_crossover():
    res = crossover.simulate("sharegpt", [64, 256], run={"num_prompts": 200}, model="llama-3.1-8b")
    for lv in res.sweep.levels:
        for arm in (lv.off, lv.on):
            assert arm["output_throughput_ci_low"] <= arm["output_throughput"] <= arm["output_throughput_ci_high"]
            assert arm["output_throughput_ci_high"] > arm["output_throughput_ci_low"]
    if res.crossover is not None:
        lo, hi = res.sweep.crossover_interval
        assert lo <= res.crossover and (hi is None or res.crossover <= hi)
    assert "crossover_concurrency_interval" in res.to_dict()


def test_progress_is_reported_after_every_level():
    seen = []
    crossover.simulate("sharegpt", [1, 4], run={"num_prompts": 20}, model="llama-3.1-8b",
                       progress=lambda done, total, load: seen.append((done, total, load)))
    assert seen == [(1, 2, 1), (2, 2, 4)]


@pytest.mark.parametrize("kw, needle", [
    ({"run": {"num_prompts": MAX_PROMPTS + 1}}, "exceeds"),
    ({"concurrency": list(range(1, MAX_LEVELS + 2))}, f"at most {MAX_LEVELS}"),
])
def test_oversized_sweeps_are_refused_in_one_line(kw, needle):
    args = {"concurrency": [1], "run": {"num_prompts": 10}, **kw}
    with pytest.raises(crossover.CrossoverError, match=needle):
        crossover.simulate("sharegpt", model="llama-3.1-8b", **args)


def test_report_simulates_with_the_same_defaults_as_simulate():
    parser = build_parser()
    sim = parser.parse_args(["simulate", "--workload", "sharegpt", "--concurrency", "1"])
    rep = parser.parse_args(["report", "--out", "x"])
    assert sim.num_prompts == rep.num_prompts


@pytest.mark.parametrize("flags, needle", [
    (["--num-prompts", str(MAX_PROMPTS + 1)], "exceeds"),
    (["--concurrency", ",".join(str(i) for i in range(1, MAX_LEVELS + 2))], f"at most {MAX_LEVELS}"),
])
def test_oversized_sweeps_are_one_line_errors_on_the_command_line(flags, needle):
    base = {"--concurrency": "1", "--num-prompts": "10"}
    for flag, value in zip(flags[::2], flags[1::2]):
        base[flag] = value
    r = run_cli("simulate", "--model", "llama-3.1-8b", "--workload", "sharegpt", *sum(base.items(), ()))
    assert_one_line_error(r, needle)
