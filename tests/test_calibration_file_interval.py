"""`calibrate --out` saves the fitted crossover and its bootstrap interval with the fit, and
`sweep-plan --calibration` plans its levels around that interval (issue 24's leftover)."""

import yaml

from conftest import run_cli

SWEEP = ["--files", "tests/fixtures/measured/sweep.csv", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
         "--method", "eagle3", "--prompt-len", "1024", "--output-len", "128"]


def test_the_fit_file_carries_the_crossover_interval_and_sweep_plan_uses_it(tmp_path):
    fit = tmp_path / "fit.yaml"
    r = run_cli("calibrate", *SWEEP, "--out", str(fit), "--force", "--bootstrap", "20")
    assert r.returncode == 0, r.stderr
    data = yaml.safe_load(fit.read_text())
    assert data["load_axis"] == "concurrency"
    low, high = data["crossover_interval"]
    assert 0 < low <= data["crossover"] and (high is None or high >= data["crossover"])
    r = run_cli("sweep-plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3",
                "--prompt-len", "1024", "--output-len", "128", "--calibration", str(fit), "--json")
    assert r.returncode == 0, r.stderr
    import json

    plan = json.loads(r.stdout)
    assert "bootstrap interval" in json.dumps(plan["crossover"])
    assert plan["inside_share"] >= 0.5
