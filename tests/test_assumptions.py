"""Every answer names what it assumed (issue 23): the default acceptance and n-gram match rate, a
workload file's, with where the answer at the load in question flips and how far the crossover moves
over the input's plausible range."""

import json

import numpy as np
import pytest

import crossover
from crossover.analysis.assumptions import flip_point
from crossover.analysis.curves import evaluate
from crossover.defaults import ACCEPTANCE_RANGE, DEFAULT_ACCEPTANCE

from conftest import run_cli


def test_the_users_question_from_the_issue_flips_near_0_35():
    """'My EAGLE-3 k=3 endpoint got slower at 64 users': with the assumed 0.7 the tool says speculation
    wins at 64; the answer flips only below acceptance ~0.35 (issue 23)."""
    res = crossover.predict(crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=3),
                            batches=[64])
    (a,) = [x for x in res.assumed if x["input"] == "acceptance"]
    assert a["input"] == "acceptance" and a["value"] == DEFAULT_ACCEPTANCE and a["at_batch"] == 64
    assert 0.30 < a["flips_at"] < 0.40 and not a["flips_in_range"]
    assert a["range"] == list(ACCEPTANCE_RANGE)
    # at the flip the speedup at batch 64 is 1.0 (to the bisection's 1e-3 in acceptance)
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=3, acceptance=a["flips_at"])
    assert float(evaluate(sc, np.array([64.0])).speedup[0]) == pytest.approx(1.0, abs=0.005)
    text = res.to_text()
    assert "assumed: acceptance 0.7 is the default (not measured)" in text
    assert "below acceptance 0.3" in text
    assert res.to_dict()["assumed"] == res.assumed
    # the other defaults the answer took are named too, on one line
    assert {x["input"]: x["value"] for x in res.assumed if x["input"] != "acceptance"} == {
        "context": 2048.0, "engine": "vllm", "draft_vocab": 32000}
    assert "assumed: context 2048, engine vllm, draft vocab 32000 (the defaults; give --context, --engine, --draft-vocab to replace them)" in text


def test_a_given_acceptance_is_no_assumption(tmp_path):
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", context=1024, k=3, engine="vllm")
    assert crossover.predict(crossover.scenario(acceptance=0.7, **kw)).assumed == []
    assert crossover.predict(crossover.scenario(tau=2.5, **kw)).assumed == []
    cal = tmp_path / "fit.yaml"
    cal.write_text("crossover_calibration: 1\nparameters:\n  acceptance: {value: 0.55}\n")
    assert crossover.predict(crossover.scenario(calibration=cal, **kw)).assumed == []
    assert "assumed:" not in crossover.predict(crossover.scenario(acceptance=0.6, **kw)).to_text()
    # lengths give the context: no default context
    lengths = crossover.scenario(model="llama-3.1-8b", acceptance=0.6, prompt_len=500, output_len=100)
    assert "context" not in [a["input"] for a in crossover.predict(lengths).assumed]


def test_flip_point_is_where_the_speedup_passes_one():
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", acceptance=0.7)
    for batch in (32.0, 128.0):
        f = flip_point(sc, "acceptance", batch)
        assert f is not None
        below = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", acceptance=f - 0.01)
        above = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", acceptance=f + 0.01)
        assert evaluate(below, np.array([batch])).speedup[0] < 1 < evaluate(above, np.array([batch])).speedup[0]
    # at batch 1 speculation pays down to a very low acceptance; an answer that never flips is None
    assert flip_point(sc, "acceptance", 1.0, 0.5, 0.99) is None


def test_ngram_names_the_assumed_match_rate_and_a_workload_files_values():
    res = crossover.predict(crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=4))
    names = [a["input"] for a in res.assumed]
    assert names == ["context", "engine", "acceptance", "match_rate"]
    wl = crossover.predict(crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="ngram", k=4,
                                              acceptance=0.6, workload="cnn-dailymail"))
    (m,) = [a for a in wl.assumed if a["input"] == "match_rate"]
    assert m["input"] == "match_rate" and m["value"] == 0.8 and "workload file" in m["source"]
    assert "n-gram match rate 0.8 is the workload file's" in wl.to_text()


def test_cli_json_and_text_carry_the_assumptions():
    r = run_cli("predict", "--model", "llama-3.1-8b", "--batch", "64", "--json")
    assert r.returncode == 0
    assert "acceptance" in [a["input"] for a in json.loads(r.stdout)["assumed"]]
    r = run_cli("policy", "--model", "llama-3.1-8b", "--batch-max", "64")
    assert r.returncode == 0 and "assumed: acceptance 0.7" in r.stdout
    r = run_cli("policy", "--model", "llama-3.1-8b", "--batch-max", "64", "--acceptance", "0.7", "--context", "2048",
                "--k", "3", "--engine", "vllm", "--json")
    assert json.loads(r.stdout)["assumed"] == []


def test_plan_names_its_assumed_acceptance_and_searches_fp8_where_native():
    res = crossover.plan("llama-3.1-8b", "sharegpt", {"peak_rps": 5}, {"tpot_ms": 50},
                         search={"hardware": "h100-sxm,a100-80gb-sxm", "tp": "1"}, verification={"verify": 0})
    assert [a["input"] for a in res.inputs["assumed"]] == ["acceptance"]
    assert "assumed: acceptance 0.7" in res.to_text()
    dtypes = {(o.hardware, o.weight_dtype) for o in res.plan.options}
    assert ("h100-sxm", "fp8") in dtypes and ("h100-sxm", "bf16") in dtypes
    assert ("a100-80gb-sxm", "fp8") not in dtypes  # no fp8 tensor cores on the A100
    given = crossover.plan("llama-3.1-8b", "sharegpt", {"peak_rps": 5}, {"tpot_ms": 50},
                           search={"hardware": "h100-sxm", "tp": "1", "weight_dtype": "bf16"},
                           verification={"verify": 0}, speculation={"acceptance": 0.7})
    assert given.inputs["assumed"] == [] and {o.weight_dtype for o in given.plan.options} == {"bf16"}
