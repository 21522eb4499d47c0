"""Issue 12 item 9: calibrate fits only what the sweep identifies, and says what it fixed and why."""

from __future__ import annotations

import json
import re

import numpy as np
from conftest import FIXTURES, REPO, run_cli

from crossover.analysis.calibration import PARAMETERS, Observation, calibrate
from crossover.model.scenario import Scenario
from crossover.analysis.curves import evaluate
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation

MEASURED = FIXTURES / "measured"
BASE = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--method", "eagle3"]


def _scenario(**eff):
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    dep = dep.with_efficiency(**eff) if eff else dep
    return Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.6)), 1088, 1024, 128)


def _sweep(sc, levels, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    c = evaluate(sc, levels)
    return [Observation(b, float(c.tokens_per_s_off[i] * np.exp(rng.normal(0, noise))),
                        float(c.tokens_per_s_on[i] * np.exp(rng.normal(0, noise)))) for i, b in enumerate(levels)]


def test_a_three_level_sweep_fits_fewer_parameters_than_levels_each_identified():
    # the issue: four parameters from few levels came back as step_overhead_ms 2.2 +- 14 and
    # bandwidth_fraction 1 +- 1.3 (at its bound), with no warning
    r = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), *BASE,
                "--bootstrap", "0", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    levels = len(d["residuals"])
    assert 0 < len(d["parameters"]) < levels
    for name, p in d["parameters"].items():
        assert p["stderr"] <= abs(p["value"]) and not p["at_bound"], (name, p)
    held = d["fixed_at_default"]
    assert set(held) | set(d["parameters"]) | set(d["at_bound"]) == {
        "bandwidth_fraction", "flops_fraction", "step_overhead_ms", "draft_step_overhead_ms", "spec_per_seq_us"}
    assert all(PARAMETERS[n][1:].count(b["value"]) == 1 for n, b in d["at_bound"].items())  # held at a bound
    assert all(isinstance(h["value"], float) and h["reason"] for h in held.values())
    assert "levels fit at most" in held["draft_step_overhead_ms"]["reason"]
    text = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), *BASE,
                   "--bootstrap", "0").stdout
    for name, h in held.items():
        assert re.search(rf"^{name}\s.*\(default\)\s+{re.escape(h['reason'])}$", text, re.M), (name, text)


def test_a_well_measured_sweep_keeps_every_parameter():
    # every parameter away from its bounds in the truth (20 us per verifying sequence: the vllm profile's
    # own default is 0)
    truth = _scenario(bandwidth_fraction=0.7, flops_fraction=0.6, step_overhead_s=2e-3, draft_step_overhead_s=0.3e-3,
                      spec_overhead_per_seq_s=20e-6)
    start = Scenario(_scenario().deployment, Speculation("eagle", 3, Acceptance.rate(0.5)), 1088, 1024, 128)
    fit = calibrate(start, _sweep(truth, [1, 2, 4, 8, 16, 32, 64, 96, 128, 192]), fit_acceptance=True, bootstrap=0)
    assert fit.at_default == {} and fit.at_bound == {} and len(fit.names) == 6


def test_a_parameter_pushed_to_its_bound_is_held_at_that_bound_and_the_rest_refitted():
    # no per-step overhead at all in the truth: the fit pins step_overhead_ms at 0 and keeps it there
    # (held at its default of 1 ms, issue 22 item 6, the rest could not reproduce the sweep)
    truth = _scenario(bandwidth_fraction=0.7, step_overhead_s=0.0)
    obs = _sweep(truth, [1, 4, 16, 64, 128, 256])
    fit = calibrate(_scenario(), obs, fit_acceptance=False, bootstrap=0)
    held = fit.at_bound["step_overhead_ms"]
    assert held["value"] == 0.0 and held["reason"].startswith("at its bound 0")
    assert "step_overhead_ms" not in fit.names and "step_overhead_ms" not in fit.at_default and fit.fixed == {}
    assert all(not p["at_bound"] and p["stderr"] <= abs(p["value"]) for p in fit.parameters().values())
    assert fit.scenario.deployment.step_overhead_s == 0.0
    assert fit.reproduces and all(abs(v["ln_ratio"]) < 1e-3 for r in fit.residuals for v in r.values()
                                  if isinstance(v, dict))
    saved = fit.to_yaml_dict()  # saved with the fit: --calibration reproduces the fitted curve
    assert saved["parameters"]["step_overhead_ms"] == {"value": 0.0, "stderr": 0.0, "at_bound": True}
    assert "step_overhead_ms" not in saved["fixed_at_default"] and "step_overhead_ms" not in saved["fixed"]


def test_two_levels_fit_one_parameter():
    fit = calibrate(_scenario(), _sweep(_scenario(bandwidth_fraction=0.7), [1, 64], noise=0.02), fit_acceptance=True,
                    bootstrap=0)
    assert len(fit.names) <= 1
    assert {"draft_step_overhead_ms", "flops_fraction", "step_overhead_ms"} <= set(fit.at_default)


def test_every_bound_has_a_documented_reason():
    src = (REPO / "crossover" / "analysis" / "sweep_fit.py").read_text().splitlines()
    for name in PARAMETERS:
        i = next(j for j, line in enumerate(src) if line.strip().startswith(f'"{name}": ('))
        above = []
        while src[i - 1].strip().startswith("#"):
            i -= 1
            above.append(src[i])
        lo, hi = PARAMETERS[name][1:]
        text = " ".join(above)
        assert len(above) >= 2 and ("At most" in text or "Below" in text) and "At least" in text, name
