"""Bad input on the verbs beyond predict: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error, run_cli

CASES = [
    ("policy-adaptive-ngram", ["policy", "--adaptive", "--method", "ngram"], "adaptive verification applies"),
    ("policy-threshold-1.5", ["policy", "--adaptive", "--confidence-threshold", "1.5"], "threshold must lie"),
    ("policy-concentration-0", ["policy", "--adaptive", "--confidence-concentration", "0"],
     "--confidence-concentration"),
    ("policy-batch-max-0", ["policy", "--batch-max", "0"], "--batch-max"),
    ("policy-lengths-half", ["policy", "--prompt-len", "100"], "--output-len"),
    ("plan-unknown-hardware", ["plan", "--workload", "gsm8k", "--slo-tpot-ms", "10", "--hardware", "h100-sxm,foo"],
     "unknown hardware"),
    ("plan-no-hardware", ["plan", "--workload", "gsm8k", "--slo-tpot-ms", "10", "--hardware", ","], "--hardware"),
    ("plan-unknown-workload", ["plan", "--workload", "nope", "--slo-tpot-ms", "10"], "unknown workload"),
    ("whatif-same-axes", ["whatif", "--x", "batch=1..8", "--y", "batch=1..4"], "two different axes"),
    ("whatif-unknown-axis", ["whatif", "--x", "gpus=1..8"], "unknown axis"),
    ("whatif-no-batch-axis", ["whatif", "--x", "k=1..4", "--y", "acceptance=0.5,0.6"], "batch"),
    ("whatif-points-1", ["whatif", "--points", "1"], "--points"),
    ("tree-and-k", ["predict", "--tree", "3x2", "--k", "5"], "disagrees"),
    ("tree-paths-k", ["predict", "--tree", "eagle1", "--k", "4"], "disagrees"),
    ("policy-tree-nodes-0", ["policy", "--tree-nodes", "0", "--batch-max", "8"], "--tree-nodes"),
    ("draft-kv-budget-0", ["predict", "--method", "draft", "--draft", "self", "--draft-kv-budget", "0"],
     "--draft-kv-budget must be > 0"),
    ("draft-kv-budget-text", ["predict", "--method", "draft", "--draft", "self", "--draft-kv-budget", "lots"],
     "--draft-kv-budget"),
    ("measured-calibration-no-model", ["measured", "--files", "tests/fixtures/measured/sweep.csv", "--calibration",
                                       "fit.yaml"], "give --model"),
    ("policy-tree-nodes-ngram", ["policy", "--tree-nodes", "4", "--method", "ngram", "--batch-max", "8"],
     "single chain"),
    ("tree-json-broken", ["predict", "--tree", "[[0],[1]"], "JSON list of rank lists"),
    ("tree-json-orphan", ["predict", "--tree", "[[0],[0,1,2]]"], "no parent"),
    ("tree-json-bool", ["predict", "--tree", "[[true]]"], "JSON list of rank lists"),
    ("tree-unknown-preset", ["predict", "--tree", "eagle9"], "a preset (eagle1)"),
    ("simulate-burstiness-0", ["simulate", "--workload", "gsm8k", "--request-rate", "2", "--burstiness", "0"],
     "--burstiness"),
    ("simulate-max-seqs-0", ["simulate", "--workload", "gsm8k", "--concurrency", "2", "--max-num-seqs", "0"],
     "--max-num-seqs"),
    ("calibration-missing", ["predict", "--calibration", "no/such/fit.yaml"], "no such file"),
    ("calibrate-no-files", ["calibrate", "--model", "llama-3.1-8b"], "--on"),
    # a denormal length once overflowed the KV-cache batch bound (found by tests/test_fuzz_serve.py)
    ("denormal-lengths", ["predict", "--prompt-len", "1e-320", "--output-len", "1e-320"], ">= 1 token"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    assert_one_line_error(run_cli(*args), needle)


def test_calibrate_needs_latency_and_tpot_on_a_request_rate_sweep(tmp_path):
    # throughput at a fixed request rate only echoes the offered load: without latency and TPOT there
    # is nothing to fit
    csv = tmp_path / "rate.csv"
    csv.write_text("arm,request_rate,output_throughput\noff,1,100\non,1,100\noff,4,380\non,4,390\n")
    r = run_cli("calibrate", "--files", str(csv), "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1")
    assert_one_line_error(r, "mean_e2el_ms and mean_tpot_ms")


def test_report_into_an_unwritable_place(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli("report", "--model", "llama-3.1-8b", "--batch", "1,8", "--out", str(blocker / "sub"))
    assert_one_line_error(r, "cannot write")


@pytest.mark.parametrize("argv, needle", [
    (["--batch", "1,,2"], "empty value between commas"),
    (["--kv-dtype", "int4"], "stores no int4 KV cache"),
    (["--kv-dtype", "int8", "--engine", "sglang"], "stores no int8 KV cache"),
    (["--kv-dtype", "fp4", "--engine", "vllm-0.10"], "stores no fp4 KV cache"),
    (["--kv-dtype", "int8", "--engine", "vllm-v0"], "stores no int8 KV cache"),
    (["--kv-dtype", "mxfp4", "--engine", "sglang-0.4"], "stores no mxfp4 KV cache"),
    (["--expert-parallel"], "llama-3.1-8b is dense"),
    (["--force-calibration"], "give --calibration"),
    (["--allow-vocab-mismatch"], "is for a separate draft model"),
    (["--method", "draft", "--draft", "llama-3.2-1b", "--draft-tp", "2"], "more GPUs than the target's tp 1"),
    (["--method", "eagle3", "--draft-vocab", "200000"], "outside 1..128256"),
    (["--draft-vocab", "16000"], "EAGLE-3's reduced draft vocabulary; eagle has none"),
    (["--k", "33"], "1..32"),
])
def test_a_flag_that_cannot_apply_is_one_line_not_ignored(argv, needle):
    """Each of these was priced silently before (a fuzz/QA battery): a KV dtype the engine has no setting
    for, expert parallelism on a dense model, a switch with nothing to switch, a draft TP above the
    target's, a draft vocabulary above the target's, an empty list value, k past vLLM's 32."""
    r = run_cli("predict", "--model", "llama-3.1-8b", *argv)
    assert_one_line_error(r, needle)


def test_what_those_flags_do_apply_to_still_runs_and_the_eagle3_vocabulary_is_named_assumed():
    for argv in (["--kv-dtype", "fp8"], ["--kv-dtype", "fp8", "--engine", "sglang-0.4"], ["--kv-dtype", "int4", "--engine", "hf"], ["--batch", "1,2,"],
                 ["--kv-dtype", "mxfp4", "--engine", "sglang"], ["--method", "eagle3", "--draft-vocab", "16000"],
                 ["--model", "mixtral-8x7b", "--tp", "2", "--expert-parallel"]):
        r = run_cli("predict", "--model", "llama-3.1-8b", *argv)
        assert r.returncode == 0, (argv, r.stderr)
    r = run_cli("predict", "--model", "llama-3.1-8b", "--method", "eagle3", "--batch", "1")
    assert "draft vocab 32000 (the defaults; give" in r.stdout and "--draft-vocab to replace" in r.stdout
    r = run_cli("predict", "--model", "llama-3.1-8b", "--method", "eagle3", "--draft-vocab", "16000", "--batch", "1")
    assert "draft vocab" not in r.stdout
