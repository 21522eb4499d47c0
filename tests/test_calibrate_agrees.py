"""Issue 22 item 6: calibrate agrees with the data it was fitted on, or says why it cannot.

The fixture `tests/fixtures/measured/vllm_cross46` is a hand-built vLLM `bench serve` sweep
(Llama-3.1-8B on one H100, EAGLE-3 k = 3, random 1024 in / 128 out, concurrency 1-128): the step
model at bandwidth 0.82, 1.4 ms per step and 225 us of host time per verifying sequence, tau falling
from 2.71 to 2.37 with load as the files report it, each throughput and TPOT times exp(N(0, 0.02)),
rounded. Its speedup crosses 1 between concurrency 32 (1.085) and 64 (0.910): at 44.9 by the levels.
Before this issue calibrate fitted it with one mean tau, held the parameters it pushed to a bound at
their defaults and said "crossover: none", residuals up to 0.20.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error, run_cli

from crossover.analysis.sweep_fit import Observation, predict, speedup_between_levels
from crossover.analysis.curves import evaluate
from crossover.model.acceptance import Acceptance
from crossover.model.scenario import Scenario
from crossover.model.speculation import Speculation
from crossover.specs import Deployment, load_hardware, load_model

MEASURED = FIXTURES / "measured"
CROSS = ["--on", str(MEASURED / "vllm_cross46" / "on"), "--off", str(MEASURED / "vllm_cross46" / "off")]
MODEL = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3"]
# speedup on / off from the files' output_throughput at concurrency 32 and 64, and where a straight
# line in log(concurrency) through them passes 1: ln 32 + ln 2 x (r32 - 1) / (r32 - r64)
R32, R64 = 2478.5 / 2283.37, 2870.12 / 3152.33
CROSS_BY_HAND = math.exp(math.log(32) + math.log(2) * (R32 - 1) / (R32 - R64))  # 44.89


def _calibrate(*args: str) -> tuple[dict, str]:
    d = run_cli("calibrate", *args, "--json")
    assert d.returncode == 0, d.stderr
    return json.loads(d.stdout), run_cli("calibrate", *args).stdout


def test_calibrate_finds_the_crossing_the_sweep_measured_and_prints_both():
    assert CROSS_BY_HAND == pytest.approx(44.89, abs=0.01)
    d, text = _calibrate(*CROSS, *MODEL, "--bootstrap", "30")
    assert d["measured_crossover"]["crossover"] == pytest.approx(CROSS_BY_HAND, abs=1e-3)
    assert d["measured_crossover"]["between"] == [32.0, 64.0]
    lo, hi = d["crossover_interval"]
    assert d["crossover"] is not None and lo <= CROSS_BY_HAND <= hi
    assert d["crossover"] == pytest.approx(CROSS_BY_HAND, rel=0.15)
    assert d["reproduces"] is True and d["disagreements"] == []
    assert all(abs(v["ln_ratio"]) <= 0.1 for r in d["residuals"] for v in r.values() if isinstance(v, dict))
    assert "crossover, measured: concurrency 44.9 (between the levels 32 and 64)" in text
    assert f"crossover, fitted:   concurrency {d['crossover']:.1f} (90% bootstrap interval {lo:.1f} - {hi:.1f}" in text
    assert "the measured crossover lies inside the fitted interval" in text


def test_the_ln_errors_are_measured_over_predicted_in_calibrate_and_measured():
    d, text = _calibrate(*CROSS, *MODEL, "--bootstrap", "0")
    assert d["ln_convention"] == "ln(measured / predicted)"
    for r in d["residuals"]:
        for v in (v for v in r.values() if isinstance(v, dict)):
            assert v["ln_ratio"] == pytest.approx(math.log(v["measured"] / v["predicted"]), abs=1e-12)
    assert "ln = ln(measured / predicted) (> 0: measured above the model)" in text
    m = run_cli("measured", *CROSS, *MODEL).stdout
    assert "ln = ln(measured / predicted)" in m
    # the row at concurrency 1: off arm measured 116.8 tok/s; its ln is log(116.8 / the predicted value)
    lines = m.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("predicted by the model"))
    row = next(line for line in lines[start:] if line.split("|")[0].strip() == "1")
    predicted_off, ln_off = (float(x) for x in row.split("|")[1].split())
    assert ln_off == pytest.approx(math.log(116.8 / predicted_off), abs=2e-3)


def _tau_scenario(tau: float) -> Scenario:
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    return Scenario(dep, Speculation("eagle3", 3, Acceptance.mean_length(tau)), 1088, 1024, 128)


def test_each_level_is_priced_at_its_own_tau():
    # the cause of the missed crossing, first part: the files' tau falls with load (2.71 -> 2.37), and
    # one mean tau for every level lifts the on arm at high load, where the crossing is
    sc = _tau_scenario(2.5)
    obs = [Observation(1, 100.0, 200.0, tau_on=2.71), Observation(64, 3000.0, 3000.0, tau_on=2.37),
           Observation(8, 900.0, 1500.0)]  # no tau in the file: the scenario's 2.5
    _, on, _, tp_on = predict(sc, obs)
    for i, (load, tau) in enumerate([(1, 2.71), (64, 2.37), (8, 2.5)]):
        c = evaluate(_tau_scenario(tau), [load])
        assert on[i] == pytest.approx(float(c.tokens_per_s_on[0]), rel=1e-6)
        assert tp_on[i] == pytest.approx(float(c.step_on[0]) * 1e3 / tau, rel=1e-6)
    at_mean = evaluate(sc, [64]).tokens_per_s_on[0]
    # at 64, tau 2.37 is 5% below the mean; with the prefill share (which tau does not speed up) the
    # on arm falls by less, here ~2%
    assert on[1] < 0.985 * at_mean
    # between levels the tau is interpolated in log load: at sqrt(1 x 64) = 8 it is halfway, (2.71 + 2.37) / 2
    s = speedup_between_levels(sc, obs[:2], [1.0, 8.0, 64.0, 200.0])
    mid = (evaluate(_tau_scenario(2.71), [8]).speedup[0] + evaluate(_tau_scenario(2.37), [8]).speedup[0]) / 2
    assert s[1] == pytest.approx(mid, rel=1e-9)
    assert s[0] == pytest.approx(evaluate(_tau_scenario(2.71), [1]).speedup[0], rel=1e-9)
    assert s[3] == pytest.approx(evaluate(_tau_scenario(2.37), [200]).speedup[0], rel=1e-9)  # held beyond the last


IMPOSSIBLE_TO_FIT = """arm,concurrency,output_throughput
off,1,1000
on,1,1000
off,8,1000
on,8,900
off,32,1000
on,32,700
off,64,1000
on,64,400
"""


def test_a_sweep_the_model_cannot_reproduce_is_said_and_not_written(tmp_path):
    # the off arm delivers 1000 tok/s at every concurrency: no bandwidth, FLOP/s or overhead gives that
    f = tmp_path / "flat.csv"
    f.write_text(IMPOSSIBLE_TO_FIT)
    out = tmp_path / "fit.yaml"
    args = ["--files", str(f), "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--bootstrap", "0"]
    r = run_cli("calibrate", *args, "--out", str(out))
    assert_one_line_error(r, "not written", "cannot reproduce", "--force")
    assert not out.exists()
    assert "the model cannot reproduce this sweep" in r.stdout  # the verdict is printed before the refusal
    d = json.loads(run_cli("calibrate", *args, "--json").stdout)
    assert d["reproduces"] is False
    # the off arm at concurrency 1 would need >= 1000 tok/s of an 8B bf16 model (~16 GB per step):
    # 16 TB/s, five times an H100's 3.35: that level is among those named
    levels = {x["level"] for x in d["disagreements"]}
    assert 1.0 in levels and all(abs(x["ln"]) > 0.1 for x in d["disagreements"])
    text = run_cli("calibrate", *args).stdout
    assert "|ln| > 0.1 at concurrency 1 (" in text
    w = run_cli("calibrate", *args, "--out", str(out), "--force")
    assert w.returncode == 0, w.stderr
    assert out.exists()


def test_an_open_interval_says_how_often_the_fitted_curves_never_cross():
    d, text = _calibrate("--files", str(MEASURED / "sweep.csv"), *MODEL, "--prompt-len", "1024", "--output-len",
                         "128", "--bootstrap", "40")
    lo, hi = d["crossover_interval"]
    share = d["crossover_never_cross_share"]
    # the 95% quantile (inverted CDF) of the 40 draws is 'none' exactly when more than 2 of them (5%) never cross
    assert (hi is None) == (share * 40 > 2)
    assert hi is None and lo is not None  # this sweep: open above
    assert f"in {share:.0%} of the bootstrap resamples the fitted curves never cross up to concurrency 256: the " \
           f"interval is open above" in text
    # the measured 94.7 between 32 and 128, and the fit's own crossover beside it
    assert d["measured_crossover"]["crossover"] == pytest.approx(94.66, abs=0.01)
    assert d["crossover"] == pytest.approx(94.7, rel=0.2)


@pytest.mark.parametrize("files,extra", [
    (["--files", str(MEASURED / "sweep.csv")], ["--method", "eagle3"]),
    (["--files", str(MEASURED / "sweep.csv")], ["--method", "eagle3", "--prompt-len", "1024", "--output-len", "128"]),
    (["--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off")], []),
    (CROSS, ["--method", "eagle3"]),
    (["--files", str(FIXTURES / "edge_sweeps" / "zigzag.csv")], []),
    (["--files", str(FIXTURES / "edge_sweeps" / "impossible.csv")], []),
    (["--files", str(FIXTURES / "edge_sweeps" / "identical_arms.csv")], []),
])
def test_on_every_fixture_calibrate_agrees_with_measured_or_says_why_not(files, extra):
    m = json.loads(run_cli("measured", *files, "--json").stdout)
    d, text = _calibrate(*files, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", *extra, "--bootstrap", "20")
    assert d["measured_crossover"]["crossover"] == m["crossover"]  # the same crossing as `measured`
    if not d["reproduces"]:
        assert "the model cannot reproduce this sweep" in text and (d["disagreements"] or not d["parameters"])
        return
    lo, hi = (np.inf if x is None else x for x in d["crossover_interval"])
    if m["crossover"] is not None:
        assert lo <= m["crossover"] <= hi, (m["crossover"], d["crossover_interval"])
    elif m["side"] != "equal":  # no crossing between the levels: none fitted there either
        assert d["crossover"] is None or d["crossover"] > max(p["level"] for p in m["points"])
