"""Issue 22 item 4: one verdict per sweep with its evidence (crossover.comparison.diagnosis), only
causes that can apply to the engine that ran, no diagnosis at a level with an impossible point, rate
sweeps judged on latency with the Kong et al. load fit.

The synthetic sweeps are written by the step model under a known configuration (Llama-3.1-8B on one
H100, EAGLE-3 k = 3, tau 2.5 at every level, pure decode at 2048 tokens) and then diagnosed with the
default vLLM profile: the verdict must name what was changed, and nothing that was not."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, REPO, assert_one_line_error, run_cli

import crossover
from crossover.analysis.curves import evaluate
from crossover.model.acceptance import Acceptance
from crossover.model.scenario import Scenario
from crossover.model.speculation import Speculation
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.loader import load_engine

LEVELS = [1, 8, 32, 64, 128, 256]
KW = dict(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=3)


def _sweep(tmp_path, name: str, engine: str = "vllm", on_scale=lambda c: 1.0, tau: float = 2.5, levels=LEVELS,
           sampling=None):
    profile = load_engine(engine) if sampling is None else load_engine(engine).configured(sampling=sampling)
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1, engine=profile)
    sc = Scenario(dep, Speculation("eagle3", 3, Acceptance.mean_length(tau)), 2048)
    c = evaluate(sc, levels)
    rows = ["arm,concurrency,output_throughput,mean_tpot_ms,acceptance_length"]
    for i, b in enumerate(levels):
        s = on_scale(b)
        rows += [f"off,{b},{c.tokens_per_s_off[i]:.2f},{c.step_off[i] * 1e3:.4f},",
                 f"on,{b},{c.tokens_per_s_on[i] * s:.2f},{c.step_on[i] * 1e3 / tau / s:.4f},{tau}"]
    f = tmp_path / f"{name}.csv"
    f.write_text("\n".join(rows) + "\n")
    return str(f)


def test_a_sweep_the_engine_runs_as_its_profile_says_is_physics_with_its_crossover(tmp_path):
    # tau 1.6: the default profile's own curves cross at ~98.6 (find_crossings), between 64 and 128
    res = crossover.measured(files=[_sweep(tmp_path, "phys", tau=1.6)], **KW)
    d = res.diagnosis
    assert d["verdict"] == "physics" and res.verdict == "physics"
    assert d["message"].startswith("above your crossover (physics): measured crossover ")
    x = d["measured_crossover"]
    assert 64 < x < 128 and f"measured crossover {x:.1f}" in d["message"]
    assert d["expectation"]["predicted_crossover"] == pytest.approx(98.6, rel=0.03)
    assert "the on arm within 0% of what this engine can do" in d["message"]
    assert all(abs(r["ln_shortfall"]) < 1e-3 for r in d["levels"])
    assert d["judged_on"].startswith("output throughput and mean TPOT")


def test_a_v0_sweep_diagnosed_with_the_v1_profile_names_batch_expansion(tmp_path):
    d = crossover.measured(files=[_sweep(tmp_path, "v0", engine="vllm-v0")], **KW).diagnosis
    assert d["verdict"] == "configuration"
    assert "below the expectation at concurrency" in d["message"] and "batch-expansion scorer" in d["message"]
    be = next(c for c in d["causes"] if c["cause"] == "batch_expansion")
    assert be["explains"] and abs(be["ln_worst_after"]) <= 0.15
    assert {c["cause"] for c in d["causes"]} <= {"piecewise_graphs", "cuda_graphs_none", "batch_expansion"}


def test_an_on_arm_short_of_every_setting_is_the_engine_with_what_to_report(tmp_path):
    # the on arm at 70% of what the profile gives from concurrency 32 up: no setting the model knows does that
    d = crossover.measured(files=[_sweep(tmp_path, "reg", on_scale=lambda c: 0.7 if c >= 32 else 1.0)], **KW).diagnosis
    assert d["verdict"] == "engine"
    assert d["message"].startswith("the engine does worse than its own profile allows: likely a regression or a bug")
    assert "30% below the expectation" in d["message"]  # 1 - 0.7
    assert all(not c["explains"] for c in d["causes"] if c["checked"])
    report = " ".join(d["report"])
    assert "vLLM V1" in report and "eagle3 k=3" in report and "concurrency 128: on" in report
    assert "--speculative-config" in report
    below = [r["level"] for r in d["levels"] if r["ln_shortfall"] > 0.15]
    assert below == [32, 64, 128, 256]  # ln(1 / 0.7) = 0.357 there, ~0 below


def test_a_method_that_turns_async_scheduling_off_is_named_on_vllm_v1_only():
    # vllm/config/vllm.py (0.14.1): async scheduling stays on with eagle, eagle3 and MTP drafts only
    from crossover.comparison.engine_effects import async_lost

    v1, v010, v0, sg = (load_engine(n) for n in ("vllm", "vllm-0.10", "vllm-v0", "sglang"))
    assert [m for m in ("draft", "eagle", "eagle3", "medusa", "ngram", "mtp") if async_lost(v1, m)] == \
        ["draft", "medusa", "ngram"]
    # 0.10 leaves it off in both arms (opt-in), V0 and SGLang have none
    assert not any(async_lost(e, m) for e in (v010, v0, sg) for m in ("draft", "ngram", "medusa"))


def test_a_draft_model_sweep_short_on_vllm_v1_names_the_async_scheduling_it_lost(tmp_path):
    f = _sweep(tmp_path, "reg", on_scale=lambda c: 0.7 if c >= 32 else 1.0)
    kw = dict(KW, method="draft", draft="llama-3.2-1b")
    d = crossover.measured(files=[f], **kw).diagnosis
    cause = next(c for c in d["causes"] if c["cause"] == "async_scheduling_off")
    assert cause["checked"] is False and cause["setting"].startswith("the draft proposer turns vLLM V1's async")
    d = crossover.measured(files=[f], **KW).diagnosis  # EAGLE-3 keeps it
    assert "async_scheduling_off" not in {c["cause"] for c in d["causes"]}


def test_an_impossible_point_is_the_verdict_and_no_level_with_one_is_diagnosed(tmp_path):
    f = tmp_path / "bad.csv"
    base = _sweep(tmp_path, "ok", tau=1.6)
    rows = (tmp_path / "ok.csv").read_text().splitlines()
    # on at 8: 90,000 tok/s, far beyond the speed of light of an 8B model at 8 sequences (~3,400)
    rows = [",".join(["on", "8", "90000", r.split(",")[3], r.split(",")[4]]) if r.startswith("on,8,") else r
            for r in rows]
    f.write_text("\n".join(rows) + "\n")
    res = crossover.measured(files=[str(f)], **KW)
    d = res.diagnosis
    assert d["verdict"] == "impossible" and base
    assert d["message"].startswith("an impossible point: the data are wrong, fix them first (on at 8: 90000.0 tok/s "
                                   "above the decode-only bound")
    assert "no further diagnosis at concurrency 8" in d["message"]
    assert [r["status"] for r in d["levels"] if r["level"] == 8] == ["impossible"]
    assert "causes" not in d and "report" not in d
    assert [(c.arm, c.load) for c in res.impossible] == [("on", 8.0)]
    text = run_cli("measured", "--files", str(f), *sum(([f"--{k}", str(v)] for k, v in KW.items()), [])).stdout
    assert "  verdict: an impossible point: the data are wrong, fix them first" in text
    r = run_cli("measured", "--files", str(f), *sum(([f"--{k}", str(v)] for k, v in KW.items()), []), "--strict")
    assert_one_line_error(r, "speed of light", "on at 8")


def test_only_causes_of_the_engine_that_ran_are_named(tmp_path):
    # a CSV priced with the vLLM profile (above 48 in flight): no SGLang cap anywhere
    res = crossover.measured(files=[_sweep(tmp_path, "v0b", engine="vllm-v0")], **KW)
    said = json.dumps({"effects": res.engine_effects, "diagnosis": res.diagnosis})
    assert "SGLang" not in said and "running requests" not in said and "spec_running_cap" not in said
    assert res.diagnosis["engine"]["framework"] == "vllm"
    # SGLang bench_serving files (EAGLE3 on and off at concurrency 32 and 128): SGLang, no vLLM cause
    fixture = (FIXTURES / "measured" / "sglang_runs.jsonl").read_text().splitlines()
    sg = tmp_path / "sg.jsonl"
    sg.write_text("\n".join(fixture[:4]) + "\n")
    res = crossover.measured(files=[str(sg)], **KW)
    d = res.diagnosis
    assert d["engine"] == {"framework": "sglang", "label": "SGLang 0.5.x",
                           "source": "the files (SGLang bench_serving server_info)",
                           "sampling": "requests greedy (assumed: the files do not say; --temperature, --top-p)"}
    causes = {c["cause"] for c in d.get("causes", [])}
    assert not causes & {"batch_expansion", "piecewise_graphs", "async_scheduling_off"}
    effects = json.dumps(res.engine_effects or {})
    assert "V0" not in effects and "vllm PR" not in effects and "PIECEWISE" not in effects


def test_a_rate_sweep_is_judged_on_latency_with_the_load_fit(tmp_path):
    # throughput on/off says 0.95 at every rate (it only tracks the offered rate); latency off/on 1.73 and
    # 1.53 says speculation is faster. No token totals: no simulator beside it, the load fit only.
    f = tmp_path / "rates.csv"
    f.write_text("arm,request_rate,output_throughput,mean_e2el_ms\n"
                 "off,1,120,2600\non,1,114,1500\noff,4,480,2900\non,4,456,1900\noff,8,950,3600\non,8,902,4200\n")
    m = json.loads(run_cli("measured", "--files", str(f), "--json").stdout)
    assert [p["speedup"] for p in m["points"]] == pytest.approx([2600 / 1500, 2900 / 1900, 3600 / 4200], abs=1e-4)
    d = crossover.measured(files=[str(f)], model="llama-3.1-8b", hardware="h100-sxm").diagnosis
    assert d["judged_on"].startswith("mean e2e latency off/on") and d["verdict"] == "inconclusive"
    # 1 / L (1/s) over QPS 1, 4, 8: off 0.384615, 0.344828, 0.277778 -> least squares slope -0.0153436,
    # intercept 0.402230: C1 = 1 / 0.402230 = 2.48614 s, C2 = 0.0153436 / 0.402230 = 0.0381463 s
    off = d["load_fit"]["off"]
    assert off["c1_ms"] == pytest.approx(2486.14, abs=0.05) and off["c2_ms_per_request"] == pytest.approx(38.146, abs=0.01)
    lf = d["load_fit"]
    assert lf["c2_ratio"] == pytest.approx(lf["on"]["c2_ms_per_request"] / off["c2_ms_per_request"])
    # break-even by the stated formula: r* = (1 - C1_R) / (C2_R - C1_R), QPS* = r* / C2_off
    c1r, c2r = lf["c1_ratio"], lf["c2_ratio"]
    assert lf["r_star"] == pytest.approx((1 - c1r) / (c2r - c1r))
    assert lf["qps"] == pytest.approx(lf["r_star"] / (off["c2_ms_per_request"] / 1e3))
    assert 4 < lf["qps"] < 8 and 4 < m["crossover"] < 8  # both between the levels where latency turns
    text = run_cli("measured", "--files", str(f), "--model", "llama-3.1-8b", "--hardware", "h100-sxm").stdout
    assert "load fit (Kong et al., L = C1 / (1 - QPS C2)): off C1 2486.1 ms, C2 38.15 ms/request" in text
    # without latency in the files a rate sweep has no speedup and no diagnosis
    bare = tmp_path / "bare.csv"
    bare.write_text("arm,request_rate,output_throughput\noff,1,120\non,1,110\noff,8,950\non,8,900\n")
    m = json.loads(run_cli("measured", "--files", str(bare), "--json").stdout)
    assert all(p["speedup"] is None for p in m["points"]) and m["crossover"] is None
    d = crossover.measured(files=[str(bare)], model="llama-3.1-8b", hardware="h100-sxm").diagnosis
    assert d["verdict"] == "inconclusive" and "judged on latency" in d["message"]


def test_the_decision_procedure_is_documented_in_the_guide():
    guide = (REPO / "docs" / "guide" / "measured-and-calibrate.md").read_text()
    for verdict in ("impossible", "physics", "configuration", "engine", "model", "inconclusive"):
        assert f"`{verdict}`" in guide, verdict
    assert "## Diagnosis" in guide and "0.15" in guide and "C1 / (1 - QPS C2)" in guide
    from crossover.comparison.diagnosis import TOLERANCE

    assert TOLERANCE == 0.15
