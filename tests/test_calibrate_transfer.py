"""Issue 12 item 11 (a saved fit records its scenario; applying it elsewhere needs force) and item 18
for calibrate (an arm with output_throughput 0, denormal or absurd latencies: one line)."""

from __future__ import annotations

import pytest
import yaml
from conftest import FIXTURES, assert_one_line_error, run_cli

from crossover.analysis.calibration import check_transfer, load_calibration, saved_scenario
from crossover.errors import CrossoverError
from crossover.api.sweeps import calibrate_sweep

MEASURED = FIXTURES / "measured"
HERE = FIXTURES / "calibrate"


def _saved(tmp_path):
    res = calibrate_sweep(on=[MEASURED / "vllm_on"], off=[MEASURED / "vllm_off"], model="llama-3.1-8b",
                          hardware="h100-sxm", tp=1, method="eagle3", bootstrap=0,
                          distilled=False)  # the fixture sweep was written against the generic defaults
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(res.to_yaml_dict()))
    return path


def test_a_saved_fit_records_its_scenario(tmp_path):
    sc = saved_scenario(_saved(tmp_path))
    assert sc == {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": 1, "method": "eagle3", "k": 3,
                  "weight_dtype": "bf16", "kv_dtype": "bf16"}


def test_applying_a_fit_to_another_model_hardware_or_tp_needs_force(tmp_path):
    path = _saved(tmp_path)
    sc = saved_scenario(path)
    assert check_transfer(sc, "llama-3.1-8b", "h100-sxm", 1) is None
    for model, hw, tp, what in (("llama-3.1-70b", "h100-sxm", 1, "model llama-3.1-8b -> llama-3.1-70b"),
                                ("llama-3.1-8b", "a100-80gb-sxm", 1, "hardware h100-sxm -> a100-80gb-sxm"),
                                ("llama-3.1-8b", "h100-sxm", 2, "tp 1 -> 2")):
        with pytest.raises(CrossoverError, match="--force") as e:
            check_transfer(sc, model, hw, tp, source=path)
        assert what in str(e.value) and "\n" not in str(e.value) and str(path) in str(e.value)
        fitted = list(load_calibration(path))
        note = check_transfer(sc, model, hw, tp, force=True, transferred=fitted)
        assert what in note and all(name in note for name in fitted) and "\n" not in note
    assert check_transfer(None, "llama-3.1-70b", "h100-sxm", 8) is None  # a file from before fits recorded it


@pytest.mark.parametrize("fixed", ["'abc'", "[1, 2]", ".inf", "{bandwidth_fraction: .inf}",
                                   "{bandwidth_fraction: abc}", "{step_overhead_ms: null}"])
def test_a_fixed_section_that_is_not_numbers_in_bounds_is_one_line(tmp_path, fixed):
    path = tmp_path / "cal.yaml"
    path.write_text(f"crossover_calibration: 1\nparameters: {{}}\nfixed: {fixed}\n")
    with pytest.raises(CrossoverError, match="fixed") as e:
        load_calibration(path)
    assert "\n" not in str(e.value)


def test_a_scenario_section_that_is_no_mapping_is_one_line(tmp_path):
    path = tmp_path / "cal.yaml"
    path.write_text("crossover_calibration: 1\nparameters: {}\nscenario: llama\n")
    with pytest.raises(CrossoverError, match="scenario"):
        saved_scenario(path)


@pytest.mark.parametrize("name,needle", [
    ("zero_throughput.csv", "zero_throughput.csv:4 at concurrency 16: the off arm's output_throughput is 0"),
    # refused by the reader itself (issue 12 item 18: no latency outside 1e-6..1e12 ms), naming file, line and value
    ("denormal_tpot.csv", "denormal_tpot.csv:2: mean_tpot_ms 1e-310 ms is no measurement"),
    ("absurd_tpot.csv", "absurd_tpot.csv:2: mean_tpot_ms 1e+300 ms is no measurement"),
    ("denormal_e2el.csv", "denormal_e2el.csv:2: mean_e2el_ms"),
])
def test_calibrate_refuses_an_empty_arm_or_an_absurd_latency_in_one_line(name, needle):
    r = run_cli("calibrate", "--files", str(HERE / name), "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                "--tp", "1", "--bootstrap", "0")
    assert_one_line_error(r, needle)
    assert "not finite" not in r.stderr
