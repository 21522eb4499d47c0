"""The `crossover` command (in-process through crossover.cli.main, tests/conftest.py run_cli): exit
codes, stdout and one-line errors on stderr."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import yaml
from conftest import FIXTURES, assert_one_line_error, run_cli

import crossover
from crossover.defaults import DEFAULT_BATCHES
from crossover.analysis.curves import evaluate

POINT_KEYS = {"batch", "step_ms_off", "step_ms_on", "tokens_per_s_off", "tokens_per_s_on", "speedup"}
INPUT_KEYS = {"model", "hardware", "tp", "k", "context"}
REGIMES = {"crosses", "always_faster", "never_faster"}


def _parse(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _check_prediction(d: dict) -> None:
    """The --json contract and its internal arithmetic."""
    assert d["regime"] in REGIMES
    cb = d["crossover_batch"]
    assert cb is None or (isinstance(cb, (int, float)) and not isinstance(cb, bool) and cb > 0)
    assert (cb is None) == (d["regime"] != "crosses")
    for key in ("max_batch_off", "max_batch_on"):
        assert isinstance(d[key], int) and not isinstance(d[key], bool) and d[key] >= 0
    assert d["max_batch_on"] <= d["max_batch_off"]  # speculation never frees memory
    assert INPUT_KEYS <= set(d["inputs"])
    tau = d["tau"]
    assert 1.0 <= tau <= d["inputs"]["k"] + 1
    assert d["points"], "no points"
    for p in d["points"]:
        assert POINT_KEYS <= set(p), set(p)
        for key in POINT_KEYS:
            assert isinstance(p[key], (int, float)) and math.isfinite(p[key]) and p[key] > 0, (key, p)
        assert p["speedup"] == pytest.approx(p["tokens_per_s_on"] / p["tokens_per_s_off"], rel=1e-3)
        assert p["tokens_per_s_off"] == pytest.approx(p["batch"] * 1e3 / p["step_ms_off"], rel=1e-3)
        assert p["tokens_per_s_on"] == pytest.approx(p["batch"] * tau * 1e3 / p["step_ms_on"], rel=1e-3)
        assert p["step_ms_on"] > p["step_ms_off"]  # a speculative step does strictly more work


# --------------------------------------------------------------------------- shared runs

@pytest.fixture(scope="module")
def default_text(cli):
    return cli("predict")


@pytest.fixture(scope="module")
def default_json(cli):
    return cli("predict", "--json")


@pytest.fixture(scope="module")
def three_batches_json(cli):
    return cli("predict", "--json", "--batch", "1,8,64")


# --------------------------------------------------------------------------- predict: defaults

def test_predict_default_table(default_text):
    assert default_text.returncode == 0, default_text.stderr
    assert default_text.stderr == ""
    out = default_text.stdout
    for needle in ("llama-3.1-70b", "4 x h100-sxm", "eagle", "k=3", "crossover"):
        assert needle in out, f"{needle!r} missing from:\n{out}"
    rows = [ln for ln in out.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    assert [int(r.split()[0]) for r in rows] == list(DEFAULT_BATCHES)


def test_predict_json_contract(default_json):
    d = _parse(default_json)
    assert default_json.stderr == ""
    _check_prediction(d)
    assert [p["batch"] for p in d["points"]] == list(DEFAULT_BATCHES)
    inp = d["inputs"]
    assert (inp["model"], inp["hardware"], inp["tp"], inp["k"], inp["context"]) == (
        "llama-3.1-70b", "h100-sxm", 4, 3, 2048)
    assert inp["method"] == "eagle" and inp["tp_auto"] is True
    assert d["tau"] == pytest.approx((1 - 0.7 ** 4) / (1 - 0.7), abs=1e-3)
    off = [p["tokens_per_s_off"] for p in d["points"]]
    assert off == sorted(off), "throughput without speculation must grow with batch"


def test_predict_json_agrees_with_table(default_text, default_json):
    d = _parse(default_json)
    text = default_text.stdout
    assert f"memory limit: batch {d['max_batch_off']} without speculation, {d['max_batch_on']} with it" in text
    if d["regime"] == "crosses":
        assert f"crossover: batch {d['crossover_batch']:.1f}" in text
    else:
        assert f"crossover: none in batch 1..{DEFAULT_BATCHES[-1]}" in text and f"({d['regime']})" in text


def test_predict_three_batches(three_batches_json):
    d = _parse(three_batches_json)
    _check_prediction(d)
    assert len(d["points"]) == 3
    assert [p["batch"] for p in d["points"]] == [1, 8, 64]


def test_predict_batch_range_syntax(cli):
    d = _parse(cli("predict", "--json", "--batch", "1..4,16"))
    assert [p["batch"] for p in d["points"]] == [1, 2, 3, 4, 16]


def test_predict_crossover_is_a_root_of_speedup(cli):
    """A scenario that crosses: speedup > 1 below the crossover, < 1 above, ~1 at it."""
    args = ("predict", "--json", "--model", "llama-3.1-8b", "--tp", "1", "--acceptance", "0.3")
    d = _parse(cli(*args))
    _check_prediction(d)
    assert d["regime"] == "crosses"
    cb = d["crossover_batch"]
    assert d["crossings"][0]["direction"] == "down"
    for p in d["points"]:
        if p["batch"] < cb:
            assert p["speedup"] > 1, p
        else:
            assert p["speedup"] < 1, p
    # the curve is continuous in batch: the library evaluates it at the fractional root (the CLI
    # takes whole batches only, the loads an engine runs)
    sc = crossover.scenario(model="llama-3.1-8b", tp=1, acceptance=0.3)
    assert float(evaluate(sc, [cb]).speedup[0]) == pytest.approx(1.0, abs=2e-3)
    frac = cli(*args, "--batch", f"1,{cb}")
    assert_one_line_error(frac, "whole number")
    text = cli(*args[:1], *args[2:])
    assert text.returncode == 0 and f"crossover: batch {cb:.1f}" in text.stdout


# --------------------------------------------------------------------------- predict: variants

VARIANTS = {
    "tau": ["--tau", "2.5"],
    "per-position": ["--acceptance-per-position", "0.8,0.6,0.4"],
    "draft": ["--method", "draft", "--draft", "llama-3.2-1b"],
    "ngram": ["--method", "ngram", "--match-rate", "0.5"],
    "medusa": ["--method", "medusa"],
    "eagle3": ["--method", "eagle3"],
    "mtp": ["--method", "mtp", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8"],
}


@pytest.fixture(scope="module")
def variant_runs(cli):
    return {k: cli("predict", "--json", "--batch", "1,8,64", *v) for k, v in VARIANTS.items()}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_predict_variants_exit_0(variant_runs, name):
    proc = variant_runs[name]
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    d = json.loads(proc.stdout)
    _check_prediction(d)
    assert len(d["points"]) == 3


def test_predict_variant_inputs(variant_runs):
    d = {k: json.loads(p.stdout) for k, p in variant_runs.items()}
    assert d["tau"]["tau"] == pytest.approx(2.5, abs=1e-4)
    assert d["tau"]["inputs"]["acceptance_kind"] == "tau"
    assert d["per-position"]["tau"] == pytest.approx(1 + 0.8 + 0.6 + 0.4, abs=1e-4)
    assert d["per-position"]["inputs"]["acceptance"] == [0.8, 0.6, 0.4]
    assert d["draft"]["inputs"]["method"] == "draft" and d["draft"]["inputs"]["draft"] == "llama-3.2-1b"
    assert d["ngram"]["inputs"]["match_rate"] == 0.5
    assert d["ngram"]["verify_width"] == pytest.approx(1 + 0.5 * 3)
    assert d["ngram"]["tau"] == pytest.approx(1 + 0.5 * (0.7 + 0.49 + 0.343), abs=1e-4)
    assert d["medusa"]["inputs"]["method"] == "medusa"
    assert d["eagle3"]["inputs"]["method"] == "eagle3"
    mtp = d["mtp"]["inputs"]
    assert (mtp["model"], mtp["hardware"], mtp["tp"], mtp["tp_auto"]) == ("deepseek-v3", "h200", 8, False)
    assert mtp["weight_dtype"] == "fp8"
    # a separate draft model costs memory beyond EAGLE's single layer
    assert d["draft"]["max_batch_on"] < d["draft"]["max_batch_off"]


# --------------------------------------------------------------------------- predict: bad input

BAD = [
    # id, args, substrings the one error line must contain
    ("unknown-model", ["--model", "llama-3.1-7b"], ["unknown model", "did you mean", "llama-3.1-8b"]),
    ("unknown-hardware", ["--hardware", "h100"], ["unknown hardware", "did you mean", "h100-sxm"]),
    ("substring-model", ["--model", "llama"], ["unknown model"]),
    ("acceptance-1", ["--acceptance", "1.0"], ["acceptance"]),
    ("acceptance-negative", ["--acceptance", "-0.1"], ["acceptance"]),
    ("acceptance-abc", ["--acceptance", "abc"], ["--acceptance", "abc"]),
    ("acceptance-nan", ["--acceptance", "nan"], ["--acceptance"]),
    ("k-0", ["--k", "0"], ["--k"]),
    ("k-1.5", ["--k", "1.5"], ["--k"]),
    ("batch-empty", ["--batch", ""], ["--batch"]),
    ("batch-negative", ["--batch", "-4"], ["--batch"]),
    ("batch-0", ["--batch", "0"], ["--batch"]),
    ("batch-backwards", ["--batch", "8..2"], ["--batch"]),
    ("tau-9", ["--tau", "9"], ["tau"]),
    ("tau-0.5", ["--tau", "0.5"], ["tau"]),
    ("per-position-increasing", ["--acceptance-per-position", "0.5,0.7"], ["increase"]),
    ("per-position-too-few", ["--acceptance-per-position", "0.8", "--k", "3"], ["k = 3"]),
    ("method-foo", ["--method", "foo"], ["foo"]),
    ("draft-without-model", ["--method", "draft"], ["--draft"]),
    ("mtp-on-llama", ["--method", "mtp", "--model", "llama-3.1-8b"], ["llama-3.1-8b", "MTP"]),
    ("match-rate-not-ngram", ["--match-rate", "0.5"], ["ngram"]),
    ("tp-0", ["--tp", "0"], ["--tp"]),
    ("context-negative", ["--context", "-1"], ["--context"]),
    ("acceptance-and-tau", ["--acceptance", "0.5", "--tau", "2"], ["not allowed"]),
    ("weight-dtype-unknown", ["--weight-dtype", "fp7"], ["fp7"]),
    ("malformed-yaml-model", ["--model", "tests/fixtures/malformed.yaml"], ["malformed.yaml", "malformed YAML"]),
    ("missing-model-file", ["--model", "tests/fixtures/no-such-model.yaml"], ["no-such-model.yaml", "no such file"]),
    ("bad-hardware-file", ["--hardware", "tests/fixtures/hw-negative-bandwidth.yaml"],
     ["hw-negative-bandwidth.yaml", "memory_bandwidth_gb_s"]),
    ("unknown-flag", ["--bogus"], ["--bogus"]),
]


@pytest.fixture(scope="module")
def bad_runs(cli):
    return {case: cli("predict", *args) for case, args, _ in BAD}


@pytest.mark.parametrize("case, needles", [
    pytest.param(case, needles, id=case)
    for case, _, needles in BAD
])
def test_predict_bad_input_is_one_line_exit_2(bad_runs, case, needles):
    proc = bad_runs[case]
    assert_one_line_error(proc, *needles)
    assert proc.stdout == ""


# --------------------------------------------------------------------------- hardware / models

def test_hardware_list(cli, hardware_names):
    proc = cli("hardware", "list")
    assert proc.returncode == 0, proc.stderr
    assert "h100-sxm" in proc.stdout and "mi300x" in proc.stdout
    listed = {ln.split()[0] for ln in proc.stdout.splitlines() if ln.strip()}
    assert listed == hardware_names


def test_hardware_list_json(cli, hardware_names):
    specs = _parse(cli("hardware", "list", "--json"))
    assert {s["name"] for s in specs} == hardware_names


def test_hardware_show_json(cli):
    d = _parse(cli("hardware", "show", "h100-sxm", "--json"))
    assert d["name"] == "h100-sxm"
    assert d["memory_bandwidth_gb_s"] == 3350
    assert d["memory_gb"] == 80
    assert "memory_bandwidth_gb_s" in d["sources"]


def test_hardware_show_text(cli):
    proc = cli("hardware", "show", "mi300x")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["memory_bandwidth_gb_s"] == 5300


def test_models_list(cli, model_names):
    proc = cli("models", "list")
    assert proc.returncode == 0, proc.stderr
    listed = {ln.split()[0] for ln in proc.stdout.splitlines() if ln.strip()}
    assert listed == model_names
    line = next(ln for ln in proc.stdout.splitlines() if ln.split()[0] == "llama-3.1-70b")
    assert "70.55" in line


def test_models_show(cli):
    proc = cli("models", "show", "llama-3.1-70b")
    assert proc.returncode == 0, proc.stderr
    d = yaml.safe_load(proc.stdout)
    assert d["name"] == "llama-3.1-70b" and d["hidden_size"] == 8192 and d["num_key_value_heads"] == 8
    j = _parse(cli("models", "show", "llama-3.1-70b", "--json"))
    assert j["num_hidden_layers"] == 80


@pytest.mark.parametrize("args, needle", [
    (["models", "show", "llama"], "unknown model"),
    (["hardware", "show", "h100"], "h100-sxm"),
    (["hardware"], "list"),
    (["models", "frobnicate"], "frobnicate"),
    (["models", "import", "tests/fixtures/malformed.config.json"], "malformed JSON"),
    (["models", "import", "tests/fixtures/no-hidden-size.config.json"], "hidden_size"),
    (["models", "import", "tests/fixtures/nope.json"], "no such file"),
])
def test_spec_verbs_bad_input(cli, args, needle):
    assert_one_line_error(cli(*args), needle)


def test_user_spec_path_reaches_the_cli(cli, cli_env, tmp_path):
    shutil.copy(FIXTURES / "hw-valid.yaml", tmp_path / "hw-valid.yaml")
    env = cli_env(CROSSOVER_SPEC_PATH=str(tmp_path))
    listing = cli("hardware", "list", env=env)
    assert listing.returncode == 0 and "hw-valid" in listing.stdout
    d = _parse(cli("predict", "--json", "--hardware", "hw-valid", "--model", "llama-3.1-8b", "--batch", "1,8",
                   env=env))
    assert d["inputs"]["hardware"] == "hw-valid"


# --------------------------------------------------------------------------- models import

def test_models_import_round_trips_through_predict(cli, tmp_path):
    proc = cli("models", "import", "tests/fixtures/llama-3.1-8b.config.json", "--name", "x")
    assert proc.returncode == 0, proc.stderr
    spec = yaml.safe_load(proc.stdout)
    assert spec["name"] == "x" and spec["hidden_size"] == 4096
    path = tmp_path / "x.yaml"
    path.write_text(proc.stdout)
    mine = _parse(cli("predict", "--json", "--model", str(path), "--batch", "1,8,64"))
    assert mine["inputs"]["model"] == "x"
    shipped = _parse(cli("predict", "--json", "--model", "llama-3.1-8b", "--batch", "1,8,64"))
    assert mine["points"] == shipped["points"]  # same architecture, same prediction


def test_models_import_out_writes_file(cli, tmp_path):
    out = tmp_path / "ds.yaml"
    proc = cli("models", "import", "tests/fixtures/deepseek-v3.config.json", "--name", "ds", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert str(out) in proc.stderr
    assert yaml.safe_load(out.read_text())["mla"]["kv_lora_rank"] == 512
    d = _parse(cli("predict", "--json", "--model", str(out), "--method", "mtp", "--hardware", "h200", "--tp", "8",
                   "--batch", "1,8"))
    assert d["inputs"]["model"] == "ds" and d["inputs"]["weight_dtype"] == "fp8"


def test_models_import_refuses_to_overwrite(cli, tmp_path):
    out = tmp_path / "existing.yaml"
    out.write_bytes(b"precious: data\n")
    assert_one_line_error(
        cli("models", "import", "tests/fixtures/mixtral-8x7b.config.json", "--name", "x", "--out", str(out)), "exists")
    assert out.read_bytes() == b"precious: data\n"


def test_models_import_out_into_missing_dir(cli, tmp_path):
    assert_one_line_error(cli("models", "import", "tests/fixtures/llama-3.1-8b.config.json",
                               "--out", str(tmp_path / "no" / "such" / "dir" / "x.yaml")))


def test_models_import_of_a_directory(cli):
    assert_one_line_error(cli("models", "import", "tests/fixtures"))


def test_models_import_of_non_utf8_file(cli, tmp_path):
    p = tmp_path / "config.json"
    p.write_bytes(b'\xff\xfe{"hidden_size": 1}')
    assert_one_line_error(cli("models", "import", str(p)))


# --------------------------------------------------------------------------- help

def test_help_exits_0(cli):
    proc = cli("--help")
    assert proc.returncode == 0
    for verb in ("predict", "hardware", "models"):
        assert verb in proc.stdout


def test_predict_help_exits_0(cli):
    proc = cli("predict", "--help")
    assert proc.returncode == 0
    assert "--acceptance-per-position" in proc.stdout and "--batch" in proc.stdout


def test_no_verb_prints_usage_and_fails(cli):
    proc = cli()
    assert proc.returncode == 2
    assert "usage" in proc.stdout.lower()


def test_weights_that_do_not_fit_are_a_one_line_error():
    r = run_cli("predict", "--model", "llama-3.1-405b", "--tp", "1")
    assert_one_line_error(r, "does not fit", "--tp")


def test_tree_preset_and_paths_in_json():
    r = run_cli("predict", "--model", "vicuna-7b", "--hardware", "rtx-3090", "--tp", "1", "--tree", "eagle1",
                "--acceptance", "0.65", "--batch", "1,4", "--json")
    assert r.returncode == 0, r.stderr
    inputs = json.loads(r.stdout)["inputs"]
    assert inputs["k"] == 5 and inputs["tree"] == [4, 8, 8, 3, 2] and len(inputs["tree_paths"]) == 25
    assert inputs["verify_width"] == 26 and inputs["tau"] == pytest.approx(3.99, abs=0.01)
    r = run_cli("predict", "--model", "vicuna-7b", "--hardware", "rtx-3090", "--tp", "1", "--tree", "[[0],[1],[0,0]]",
                "--acceptance", "0.65", "--batch", "1", "--json")
    inputs = json.loads(r.stdout)["inputs"]
    assert inputs["tree"] == [2, 1] and inputs["tau"] == pytest.approx(2.3)


def test_self_speculation_with_a_draft_kv_budget():
    # MagicDec's StreamingLLM self-speculation: the target drafts with 512 cached tokens; its weights
    # are shared, so only the budgeted KV cache is extra memory
    base = ["predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "8", "--method", "draft",
            "--draft", "self", "--k", "3", "--tau", "3.08", "--context", "32000", "--batch", "64", "--json"]
    d = json.loads(run_cli(*base, "--draft-kv-budget", "512").stdout)
    assert d["inputs"]["draft"] == "llama-3.1-8b" and d["inputs"]["draft_kv_budget"] == 512
    # per sequence the draft holds 512 + k + 1 tokens of KV beside the target's 32000 + k + 1: ~1.6% more
    assert d["max_batch_off"] * 0.97 <= d["max_batch_on"] <= d["max_batch_off"]
    full = json.loads(run_cli(*base).stdout)  # no budget: the draft attends the whole context
    assert full["max_batch_on"] <= d["max_batch_off"] // 2 + 1
    assert full["points"][0]["speedup"] < d["points"][0]["speedup"]
    r = run_cli("predict", "--draft-kv-budget", "0", "--method", "draft", "--draft", "self")
    assert_one_line_error(r, "budget")
