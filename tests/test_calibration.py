"""Calibration recovers known parameters; the physics check flags impossible points; CLI verbs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from conftest import FIXTURES, assert_one_line_error, run_cli

from crossover.analysis.calibration import Observation, apply, calibrate, load_calibration
from crossover.model.scenario import Scenario
from crossover.analysis.curves import evaluate
from crossover.errors import CrossoverError
from crossover.analysis.bounds import check
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation

MEASURED = FIXTURES / "measured"
EDGE_SWEEPS = FIXTURES / "edge_sweeps"
LEVELS = [1, 2, 4, 8, 16, 32, 64, 96, 128, 192]


def truth_scenario(alpha=0.65, prompt=1024, output=128):
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    dep = dep.with_efficiency(bandwidth_fraction=0.7, flops_fraction=0.6, step_overhead_s=2e-3,
                              draft_step_overhead_s=0.3e-3)
    return Scenario(dep, Speculation("eagle", 3, Acceptance.rate(alpha)), prompt + output / 2, prompt, output)


def synthetic(sc, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    c = evaluate(sc, LEVELS)
    jit = lambda: float(np.exp(rng.normal(0, noise))) if noise else 1.0  # noqa: E731
    return [Observation(b, float(c.tokens_per_s_off[i]) * jit(), float(c.tokens_per_s_on[i]) * jit())
            for i, b in enumerate(LEVELS)]


def default_scenario(truth):
    dep = Deployment(model=truth.deployment.model, hardware=truth.deployment.hardware, tp=1)
    return Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.5)), truth.context, truth.prompt_len,
                    truth.output_len)


def test_calibration_recovers_the_parameters_of_a_synthetic_sweep():
    truth = truth_scenario()
    fit = calibrate(default_scenario(truth), synthetic(truth), fit_acceptance=True, bootstrap=0)
    p = {n: v["value"] for n, v in fit.parameters().items()}
    assert p["acceptance"] == pytest.approx(0.65, abs=0.02)
    assert p["bandwidth_fraction"] == pytest.approx(0.7, rel=0.05)
    assert p["step_overhead_ms"] == pytest.approx(2.0, abs=0.3)
    for r in fit.residuals:
        assert abs(r["tokens_per_s_off"]["ln_ratio"]) < 0.01 and abs(r["tokens_per_s_on"]["ln_ratio"]) < 0.01


def test_crossover_with_bootstrap_interval_brackets_the_truth():
    # a mix whose speedup falls steeply through 1 (at 1024/128 the prefill share flattens the curve
    # near 1, where 3% noise moves a crossing by tens of sequences)
    truth = truth_scenario(alpha=0.55, prompt=256, output=256)
    true_cross = __import__("crossover.analysis.curves", fromlist=["x"]).find_crossings(truth, 400)[0].batch
    fit = calibrate(default_scenario(truth), synthetic(truth, noise=0.03), fit_acceptance=True, bootstrap=40)
    lo, hi = fit.crossover_interval
    assert lo <= fit.crossover <= hi
    assert fit.crossover == pytest.approx(true_cross, rel=0.25)
    assert all(e >= 0 for e in fit.stderr)


def test_apply_and_saved_calibration_round_trip(tmp_path):
    truth = truth_scenario()
    fit = calibrate(default_scenario(truth), synthetic(truth), fit_acceptance=True, bootstrap=0)
    import yaml

    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(fit.to_yaml_dict()))
    loaded = load_calibration(path)
    assert loaded["acceptance"] == pytest.approx(fit.parameters()["acceptance"]["value"])
    s = apply(default_scenario(truth), list(loaded), np.array(list(loaded.values())))
    assert s.deployment.efficiency.step_overhead_s == pytest.approx(loaded["step_overhead_ms"] / 1e3)
    bad = tmp_path / "bad.yaml"
    bad.write_text("crossover_calibration: 1\nparameters: {bandwidth_fraction: {value: 3}}\n")
    with pytest.raises(CrossoverError, match="outside"):
        load_calibration(bad)
    with pytest.raises(CrossoverError, match="not a crossover calibration"):
        load_calibration(tmp_path / "cal.yaml" if False else _write(tmp_path / "x.yaml", "a: 1\n"))


def _write(path, text):
    path.write_text(text)
    return path


def test_physics_check_flags_points_that_beat_the_roofline():
    sc = truth_scenario()

    class P:
        def __init__(self, arm, load, tput):
            self.arm, self.load, self.output_throughput, self.acceptance_length, self.source = arm, load, tput, None, "x"

    checks = check(sc, [P("off", 1, 100.0), P("off", 1, 500.0)])
    # batch-1 decode of an 8B bf16 model on an H100 cannot beat ~3.35e12 / 15e9 = 223 tokens/s
    assert 200 < checks[0].bound < 240
    assert not checks[0].beats_physics and checks[1].beats_physics
    assert checks[0].fraction == pytest.approx(100.0 / checks[0].bound)


def test_measured_and_calibrate_cli(tmp_path):
    # the fixture sweeps were written against the generic efficiency defaults (not the distilled ones)
    base = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--method", "eagle3", "--no-distilled"]
    m = run_cli("measured", "--files", str(MEASURED / "sweep.csv"), "--json")
    assert m.returncode == 0, m.stderr
    d = json.loads(m.stdout)
    assert d["load_axis"] == "concurrency" and d["bracketed"] is True and 32 < d["crossover"] < 128
    assert [p["level"] for p in d["points"]] == [1, 8, 32, 128]
    out = tmp_path / "cal.yaml"
    # --force: written whether or not the model reproduces this hand-made sweep within |ln| 0.1
    c = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), *base,
                "--out", str(out), "--json", "--bootstrap", "20", "--force")
    assert c.returncode == 0, c.stderr
    cal = json.loads(c.stdout)
    # three levels identify at most two parameters; the rest are held at their defaults or bounds, with why
    assert set(cal["parameters"]) | set(cal["fixed_at_default"]) | set(cal["at_bound"]) >= {
        "bandwidth_fraction", "flops_fraction", "step_overhead_ms"}
    assert 1 <= len(cal["parameters"]) < 3  # which one the levels identify depends on the model's shape
    assert "acceptance" not in cal["parameters"]  # the files report the acceptance length: not fitted
    assert all(set(v) >= {"value", "stderr"} for v in cal["parameters"].values())
    assert len(cal["residuals"]) == 3 and "crossover_interval" in cal
    assert out.exists()
    again = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), *base,
                    "--out", str(out))
    assert_one_line_error(again, "--force")
    p = run_cli("predict", "--model", "llama-3.1-8b", "--calibration", str(out), "--json")
    assert p.returncode == 0, p.stderr
    eff = json.loads(p.stdout)["inputs"]["efficiency"]
    for name, v in {**cal["parameters"], **cal["at_bound"]}.items():  # each fitted or bound value reaches it
        key, scale = ((name[:-3] + "_s", 1e-3) if name.endswith("_ms") else ("spec_overhead_per_seq_s", 1e-6)
                      if name == "spec_per_seq_us" else (name, 1.0))
        assert eff[key] == pytest.approx(v["value"] * scale)


@pytest.mark.parametrize("args,needle", [
    (["measured", "--on", "nope.json", "--off", "nope2.json"], "no such file"),
    (["measured", "--on", str(MEASURED / "vllm_on")], "--off"),
    (["measured", "--on", str(MEASURED / "broken")], "--off"),
    (["calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_on")], "spec_decode"),
])
def test_measured_bad_input_is_one_line_exit_2(args, needle):
    assert_one_line_error(run_cli(*args), needle)


def test_measured_latency_crossovers_by_hand():
    m = run_cli("measured", "--files", str(MEASURED / "sweep.csv"), "--json")
    lat = json.loads(m.stdout)["latency"]
    rows = [r for r in (MEASURED / "sweep.csv").read_text().splitlines() if r and not r.startswith(("#", "arm"))]
    by = {(r.split(",")[0], float(r.split(",")[1])): r.split(",") for r in rows}
    levels = sorted({lv for _, lv in by})
    # median TPOT off/on at each level, straight from the file (column 5)
    want = [float(by["off", lv][4]) / float(by["on", lv][4]) for lv in levels]
    assert lat["median_tpot_ms"]["ratios"] == pytest.approx(want, abs=1e-4)
    i = next(j for j in range(len(want) - 1) if (want[j] - 1) * (want[j + 1] - 1) < 0)
    assert lat["median_tpot_ms"]["bracketed"] and levels[i] < lat["median_tpot_ms"]["crossover"] < levels[i + 1]
    # speculation costs TTFT at every level: not bracketed, higher with it on
    assert lat["median_ttft_ms"]["bracketed"] is False and lat["median_ttft_ms"]["side"] == "off"
    text = run_cli("measured", "--files", str(MEASURED / "sweep.csv")).stdout
    assert "latency, off/on per level" in text and "median_tpot_ms" in text


def test_measured_with_a_model_lays_the_prediction_beside_the_measurement():
    from crossover.model.scenario import Scenario
    from crossover.analysis.curves import evaluate
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation

    args = ["measured", "--files", str(MEASURED / "sweep.csv"), "--json"]
    bare = json.loads(run_cli(*args).stdout)
    assert "predicted_crossover" not in bare and "predicted_speedup" not in bare["points"][0]
    d = json.loads(run_cli(*args, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1",
                           "--method", "eagle3").stdout)
    # the same closed form by hand: the files' mean tau, concurrency as batch; the CSV records no
    # token totals, so pure decode at the default 2048-token context
    taus = [2.62, 2.55, 2.46, 2.38]
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    sc = Scenario(dep, Speculation("eagle3", 3, Acceptance.mean_length(sum(taus) / 4)), 2048)
    c = evaluate(sc, [1, 8, 32, 128])
    for i, p in enumerate(d["points"]):
        assert p["predicted_off_output_throughput"] == pytest.approx(c.tokens_per_s_off[i], rel=1e-3)
        assert p["predicted_speedup"] == pytest.approx(c.speedup[i], rel=1e-3)
    assert "predicted_crossover" in d


RATE_CSV = """arm,request_rate,output_throughput,mean_e2el_ms,median_tpot_ms,total_input_tokens,total_output_tokens,completed
off,1,120,2600,20.1,102400,12800,100
on,1,120,1500,11.2,102400,12800,100
off,8,950,3600,27.0,102400,12800,100
on,8,930,4200,31.0,102400,12800,100
"""


def test_request_rate_points_are_bounded_at_the_requests_in_flight(tmp_path):
    # 1 request/s of 128 output tokens, each in the system 2.6 s: ~2.6 requests in flight, not 1.
    # Bounding at "batch = 1 request/s" would flag this honest 120 tokens/s as beating physics.
    f = tmp_path / "rates.csv"
    f.write_text(RATE_CSV)
    d = json.loads(run_cli("measured", "--files", str(f), "--model", "llama-3.1-70b", "--hardware", "h100-sxm",
                           "--tp", "4", "--method", "eagle", "--json").stdout)
    phys = {(p["arm"], p["level"]): p for p in d["physics"]}
    assert phys["off", 1.0]["in_flight"] == pytest.approx(2.6) and phys["on", 8.0]["in_flight"] == pytest.approx(33.6)
    assert not any(p["beats_physics"] for p in d["physics"])
    # the prediction beside a request-rate sweep comes from the serving simulator: latency off/on
    assert d["load_axis"] == "request_rate"
    assert all(p["predicted_speedup"] > 0 for p in d["points"]) and "predicted_crossover" in d
    png = tmp_path / "rates.png"  # drawn as mean e2e latency against the rate, simulated levels over it
    r = run_cli("measured", "--files", str(f), "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4",
                "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_request_rate_bound_without_latency_falls_back_to_the_kv_capacity():
    from crossover.model import memory
    from crossover.analysis.bounds import in_flight

    sc = truth_scenario()

    class P:
        arm, load, load_axis, metrics, output_throughput, acceptance_length, source = "off", 2.0, "request_rate", {}, 1.0, None, ""

    peak = sc.prompt_len + sc.output_len if sc.mixed else sc.context
    assert in_flight(P(), sc) == memory.max_batch(sc.deployment, peak)


def test_calibrate_a_request_rate_sweep_on_tpot_at_the_requests_in_flight(tmp_path):
    # a synthetic rate sweep from the model itself: at each rate, both arms' requests in flight and
    # TPOT come from the truth scenario; the fit must find them again
    from crossover.analysis.calibration import Observation, calibrate
    from crossover.analysis.curves import evaluate

    sc = truth_scenario()
    off_b, on_b = [2.0, 9.0, 30.0, 70.0], [1.5, 6.0, 24.0, 90.0]
    c_off, c_on = evaluate(sc, off_b), evaluate(sc, on_b)
    tau = sc.speculation.tau
    obs = [Observation(b, 1.0, 1.0, float(c_off.step_off[i]) * 1e3, float(c_on.step_on[i]) * 1e3 / tau,
                       load_on=on_b[i], use_throughput=False) for i, b in enumerate(off_b)]
    start = Scenario(sc.deployment.with_efficiency(bandwidth_fraction=0.6, step_overhead_s=3e-3), sc.speculation,
                     sc.context, sc.prompt_len, sc.output_len)
    fit = calibrate(start, obs, fit_acceptance=False, load_axis="in_flight", bootstrap=0,
                    fix={"flops_fraction": 0.6, "draft_step_overhead_ms": 0.3})
    assert all(abs(r["mean_tpot_ms_off"]["ln_ratio"]) < 1e-3 and abs(r["mean_tpot_ms_on"]["ln_ratio"]) < 1e-3
               for r in fit.residuals)
    got = dict(zip(fit.names, fit.values))
    assert got["bandwidth_fraction"] == pytest.approx(0.7, rel=1e-3) and got["step_overhead_ms"] == pytest.approx(2.0, rel=1e-2)
    assert "tokens_per_s_off" not in fit.residuals[0] and fit.residuals[0]["in_flight_on"] == 1.5
    # through the CLI: in flight = rate x mean e2e latency per arm
    f = tmp_path / "rates.csv"
    f.write_text("arm,request_rate,output_throughput,mean_e2el_ms,mean_tpot_ms\n"
                 "off,1,120,2600,20.1\non,1,120,1500,11.2\noff,4,480,2900,22.0\non,4,478,1900,14.5\n"
                 "off,8,950,3600,27.0\non,8,930,4200,31.0\noff,12,1410,5200,38.0\non,12,1300,9800,70.0\n")
    d = json.loads(run_cli("calibrate", "--files", str(f), "--model", "llama-3.1-70b", "--hardware", "h100-sxm",
                           "--tp", "4", "--method", "eagle", "--bootstrap", "5", "--json").stdout)
    assert d["load_axis"] == "in_flight"
    assert [r["in_flight"] for r in d["residuals"]] == pytest.approx([2.6, 11.6, 28.8, 62.4])
    assert [r["in_flight_on"] for r in d["residuals"]] == pytest.approx([1.5, 7.6, 33.6, 117.6])


def test_measured_checks_a_saved_calibration_against_another_sweep(tmp_path):
    base = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--method", "eagle3", "--no-distilled"]
    fit = tmp_path / "fit.yaml"
    c = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), *base,
                "--out", str(fit), "--bootstrap", "0", "--force")  # (3 levels: one stays beyond |ln| 0.1)
    assert c.returncode == 0, c.stderr
    plain = json.loads(run_cli("measured", "--files", str(MEASURED / "sweep.csv"), *base, "--json").stdout)
    held = json.loads(run_cli("measured", "--files", str(MEASURED / "sweep.csv"), *base, "--calibration", str(fit),
                              "--json").stdout)
    params = yaml.safe_load(fit.read_text())["parameters"]
    off_plain = plain["points"][0]["predicted_off_output_throughput"]
    off_held = held["points"][0]["predicted_off_output_throughput"]
    assert off_held != off_plain
    # batch 1: faster with more bandwidth (default 0.8) or less step overhead (vLLM V1's 1.0 ms)
    if "bandwidth_fraction" in params:
        assert (off_held > off_plain) == (params["bandwidth_fraction"]["value"] > 0.8)
    if "step_overhead_ms" in params and "bandwidth_fraction" not in params:
        assert (off_held > off_plain) == (params["step_overhead_ms"]["value"] < 1.0)
    r = run_cli("measured", "--files", str(MEASURED / "sweep.csv"), "--calibration", str(fit))
    assert_one_line_error(r, "--model")


# --------------------------------------------------------------------------- calibration inputs
# no silent model, no negative bootstrap, tau reported per file

def test_negative_bootstrap_is_refused_in_one_line():
    r = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), "--model",
                "llama-3.1-8b", "--tp", "1", "--bootstrap", "-1")
    assert_one_line_error(r, "--bootstrap")


def test_calibrate_without_model_takes_the_files_model_id():
    r = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), "--tp", "1",
                "--bootstrap", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"]["model"] == "llama-3.1-8b"
    none = run_cli("calibrate", "--files", str(EDGE_SWEEPS / "zigzag.csv"), "--tp", "1", "--bootstrap", "0")
    assert_one_line_error(none, "--model")


def test_a_tau_beyond_k_plus_1_is_reported_for_its_file_not_as_an_average():
    for verb in (["calibrate", "--bootstrap", "0"], ["measured", "--hardware", "h100-sxm"]):
        r = run_cli(*verb, "--files", str(EDGE_SWEEPS / "taus.csv"), "--tp", "1")
        assert_one_line_error(r, "taus.csv:4", "tau) 9")
        assert "5.8" not in r.stderr
