"""Issue 12, calibration inputs: no silent model, no negative bootstrap, tau reported per file."""

import json

from conftest import FIXTURES, run_cli

HERE = FIXTURES / "issue12"
MEASURED = FIXTURES / "measured"


def test_negative_bootstrap_is_refused_in_one_line():
    r = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), "--model",
                "llama-3.1-8b", "--tp", "1", "--bootstrap", "-1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--bootstrap" in r.stderr


def test_calibrate_without_model_takes_the_files_model_id():
    r = run_cli("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), "--tp", "1",
                "--bootstrap", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"]["model"] == "llama-3.1-8b"
    none = run_cli("calibrate", "--files", str(HERE / "zigzag.csv"), "--tp", "1", "--bootstrap", "0")
    assert none.returncode == 2 and none.stderr.count("\n") == 1 and "--model" in none.stderr


def test_a_tau_beyond_k_plus_1_is_reported_for_its_file_not_as_an_average():
    for verb in (["calibrate", "--bootstrap", "0"], ["measured", "--hardware", "h100-sxm"]):
        r = run_cli(*verb, "--files", str(HERE / "taus.csv"), "--tp", "1")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (verb, r.stderr)
        assert "taus.csv:4" in r.stderr and "tau) 9" in r.stderr and "5.8" not in r.stderr
