"""Input limits of the CLI (issue 12): what the CLI fuzz test (tests/test_fuzz_cli.py) found, one
focused test per class, and the input rules of items 17, 18 and 21: only regular files are read, up
to a size limit; deep nesting, denormal measurements and a missing matplotlib are one line; --json is
strict JSON and numpy's RuntimeWarnings never reach stderr."""

from __future__ import annotations

import builtins
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli, run_process
from json_contract import strict_loads

from crossover.errors import CrossoverError
from crossover.files import MAX_INPUT_ENV, max_input_bytes, read_text, set_max_input_mb

# The command runs in-process (run_cli), where numpy's RuntimeWarnings are errors: none may leak.


# --------------------------------------------------------------------------- item 17: what is read

@pytest.fixture(autouse=True)
def _default_limit(monkeypatch):
    monkeypatch.delenv(MAX_INPUT_ENV, raising=False)
    set_max_input_mb(None)
    yield
    set_max_input_mb(None)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "results.csv"
    os.mkfifo(fifo)  # no writer: open() for reading would block forever
    r = run_cli("measured", "--files", str(fifo))
    assert_one_line_error(r, "FIFO", "not a regular file")


@pytest.mark.parametrize("argv", [["measured", "--files"], ["predict", "--calibration"], ["simulate", "--concurrency", "1",
                                                                                          "--workload"]])
def test_dev_zero_is_refused(argv):
    r = run_cli(*argv, "/dev/zero")
    assert_one_line_error(r, "/dev/zero", "not a regular file")


def test_a_directory_given_as_a_file_is_one_line(tmp_path):
    r = run_cli("predict", "--calibration", str(tmp_path))
    assert_one_line_error(r, "directory")


def test_size_limit_default_environment_and_flag(tmp_path, monkeypatch):
    assert max_input_bytes() == 512_000_000
    f = tmp_path / "sweep.csv"
    f.write_text("arm,concurrency,output_throughput\noff,1,100\non,1,150\n" + "# padding\n" * 200_000)
    monkeypatch.setenv(MAX_INPUT_ENV, "1")
    r = run_cli("measured", "--files", str(f))
    assert_one_line_error(r, "over the input size limit of 1 MB", "--max-input-mb", MAX_INPUT_ENV)
    r = run_cli("measured", "--files", str(f), "--max-input-mb", "5", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["points"][0]["speedup"] == 1.5
    monkeypatch.setenv(MAX_INPUT_ENV, "-3")
    r = run_cli("measured", "--files", str(f))
    assert_one_line_error(r, MAX_INPUT_ENV, "> 0")


@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf", "x"])
def test_bad_max_input_mb_is_one_line(value, tmp_path):
    r = run_cli("predict", f"--max-input-mb={value}")
    assert_one_line_error(r, "--max-input-mb")


def test_read_text_keeps_universal_newlines(tmp_path):
    f = tmp_path / "x.csv"
    f.write_bytes(b"a,b\r\n1,2\r3,4\n")
    assert read_text(f, "a CSV") == "a,b\n1,2\n3,4\n"
    with pytest.raises(CrossoverError, match="not a UTF-8 text file"):
        (tmp_path / "y").write_bytes(b"\xff\xfe\x00")
        read_text(tmp_path / "y", "a CSV")


def test_other_inputs_go_through_the_same_rules(tmp_path):
    # traffic, price and empirical-lengths files used to call Path.read_text directly
    r = run_cli("plan", "--workload", "sharegpt", "--traffic", "/dev/zero", "--slo-tpot-ms", "50")
    assert_one_line_error(r, "not a regular file")
    r = run_cli("plan", "--workload", "sharegpt", "--peak-rps", "1", "--slo-tpot-ms", "50",
                     "--price-file", str(tmp_path))
    assert_one_line_error(r, "directory")
    wl = tmp_path / "w.yaml"
    wl.write_text("name: w\nprompt_len: {dist: empirical, file: /dev/zero}\noutput_len: {dist: fixed, value: 8}\n")
    r = run_cli("simulate", "--workload", str(wl), "--concurrency", "1", "--quiet")
    assert_one_line_error(r, "not a regular file")


# --------------------------------------------------------------------------- deep nesting (RecursionError)

def test_deeply_nested_json_result_is_one_line(tmp_path):
    f = tmp_path / "r.json"
    f.write_text("[" * 100_000)
    r = run_cli("calibrate", "--model", "llama-3.1-8b", "--files", str(f))
    assert_one_line_error(r, "nested too deeply")
    r = run_cli("measured", "--files", str(f))
    assert_one_line_error(r, "nested too deeply")


def test_deeply_nested_yaml_spec_is_one_line(tmp_path):
    f = tmp_path / "hw.yaml"
    f.write_text("[" * 1200 + "]" * 1200)
    r = run_cli("hardware", "show", str(f))
    assert_one_line_error(r, "nested too deeply")
    r = run_cli("predict", "--calibration", str(f))
    assert_one_line_error(r, "nested too deeply")


def test_deeply_nested_config_json_and_tree_are_one_line(tmp_path):
    f = tmp_path / "config.json"
    f.write_text('{"a":' * 50_000)
    r = run_cli("models", "import", str(f))
    assert_one_line_error(r, "nested too deeply")
    r = run_cli("predict", "--tree", "[" * 5000)
    assert_one_line_error(r, "tree")


def test_deeply_nested_price_file_is_one_line(tmp_path):
    f = tmp_path / "prices.yaml"
    f.write_text("[" * 1200 + "]" * 1200)
    r = run_cli("plan", "--workload", "sharegpt", "--peak-rps", "1", "--slo-tpot-ms", "50",
                     "--price-file", str(f))
    assert_one_line_error(r, "nested too deeply")


# --------------------------------------------------------------------------- items 18 / 21: measured values

def _csv(tmp_path, text: str) -> Path:
    f = tmp_path / "sweep.csv"
    f.write_text(text)
    return f


@pytest.mark.parametrize("cell", ["1e-310", "5e-324", "1e-300", "1e300"])
def test_denormal_or_absurd_latency_is_refused_not_a_fake_crossover(tmp_path, cell):
    # A denormal median TPOT made the off/on ratio 0.0 and printed "crosses at concurrency 10.0".
    f = _csv(tmp_path, "arm,concurrency,output_throughput,median_tpot_ms\n"
                       f"off,1,100,{cell}\non,1,150,4.7\noff,16,1000,10\non,16,1800,8.3\n")
    r = run_cli("measured", "--files", str(f), "--json")
    assert_one_line_error(r, f"{f}:2", "median_tpot_ms", "no measurement")


def test_denormal_latency_in_a_vllm_json_is_refused(tmp_path, fixtures):
    src = next((fixtures / "measured/vllm_on").glob("*concurrency16*0.json"))
    obj = json.loads(src.read_text())
    obj["p99_tpot_ms"] = 5e-324
    f = tmp_path / "on.json"
    f.write_text(json.dumps(obj))
    off = next((fixtures / "measured/vllm_off").glob("*concurrency16*.json"))
    r = run_cli("measured", "--on", str(f), "--off", str(off))
    assert_one_line_error(r, "p99_tpot_ms", "no measurement")


@pytest.mark.parametrize("cell", ["1e-310", "1e300"])
def test_denormal_or_absurd_throughput_is_refused(tmp_path, cell):
    # 1e300 / 1e-310 overflowed in the table's ratio (a RuntimeWarning on stderr) and printed inf.
    f = _csv(tmp_path, f"arm,concurrency,output_throughput\noff,1,{cell}\non,1,150\noff,16,1000\non,16,1800\n")
    r = run_cli("measured", "--files", str(f))
    assert_one_line_error(r, "output_throughput", "no measurement")


def test_zero_latency_and_throughput_are_still_accepted(tmp_path):
    f = _csv(tmp_path, "arm,concurrency,output_throughput,std_tpot_ms\noff,1,0,0\non,1,150,0\noff,16,1000,0.5\n"
                       "on,16,1800,0.4\n")
    r = run_cli("measured", "--files", str(f), "--json")
    assert r.returncode == 0, r.stderr
    strict_loads(r.stdout)


# --------------------------------------------------------------------------- item 21: --plot without matplotlib

def test_plot_without_matplotlib_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    out = tmp_path / "fig.png"
    r = run_cli("predict", "--plot", str(out))
    assert_one_line_error(r, "matplotlib", "pip install")
    assert not out.exists()


# --------------------------------------------------------------------------- models import

@pytest.mark.parametrize("value", ["Infinity", "3", "[1, 2]", '"fp8"'])
def test_config_json_whose_quantization_config_is_not_an_object_is_one_line(tmp_path, fixtures, value):
    # AttributeError: 'float' object has no attribute 'get' (found by the fuzz test)
    cfg = json.loads((fixtures / "deepseek-v3.config.json").read_text())
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg)[:-1] + f', "quantization_config": {value}}}')
    r = run_cli("models", "import", str(f))
    assert_one_line_error(r, "quantization_config must be a JSON object")


# --------------------------------------------------------------------------- simulate: a clock that loses its steps

def test_a_request_rate_so_low_the_clock_loses_its_steps_is_refused():
    # --request-rate 1e-300 printed TTFT 0.0 ms and TPOT p50 0.00 ms: arrivals ~1e300 s apart, and
    # adding a millisecond step to such a clock changes nothing
    r = run_cli("simulate", "--workload", "sharegpt", "--model", "llama-3.2-1b", "--num-prompts", "5",
                     "--request-rate", "1e-300", "--quiet")
    assert_one_line_error(r, "request rate 1e-300", "give a rate >=")


def test_a_low_but_representable_request_rate_still_runs():
    r = run_cli("simulate", "--workload", "sharegpt", "--model", "llama-3.2-1b", "--num-prompts", "5",
                       "--request-rate", "1e-7", "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    level = strict_loads(r.stdout)["levels"][0]
    assert level["off"]["median_tpot_ms"] > 0 and level["off"]["median_ttft_ms"] > 0


@pytest.mark.parametrize("argv", [
    ["predict", "--acceptance", "1e-300", "--batch", "1,8"],
    ["whatif", "--y", "acceptance=1e-300..0.9", "--points", "4"],
    ["policy", "--acceptance", "1e-300", "--k-max", "8"],
    ["predict", "--acceptance", "0.999999999999", "--k", "16"],
])
def test_extreme_values_print_no_runtime_warning(argv):
    r = run_cli(*argv, "--json")  # in-process, a RuntimeWarning is an error: a traceback and exit 1
    assert r.returncode in (0, 2) and "Warning" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:
        strict_loads(r.stdout)


# --------------------------------------------------------------------------- item 18: over-long paths, a full disk

@pytest.mark.parametrize("argv", [["measured", "--files", "{long}.csv"], ["predict", "--plot", "{long}.png"],
                                  ["predict", "--calibration", "{long}.yaml"]])
def test_an_over_long_path_is_one_line(argv, tmp_path):
    long = str(tmp_path / ("a" * 300))  # ENAMETOOLONG from the first stat(), wherever it happens
    assert_one_line_error(run_cli(*(a.format(long=long) for a in argv)), "File name too long")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_stdout_on_a_full_disk_is_one_line(json_flag):
    import subprocess

    # a real process: its stdout is the file descriptor of /dev/full, flushed at exit
    with open("/dev/full", "w") as full:
        r = run_process("predict", *json_flag, stdout=full, stderr=subprocess.PIPE, timeout=300)
    assert r.returncode == 2 and r.stderr == "crossover: error: cannot write the output: No space left on device\n", r.stderr


# --------------------------------------------------------------------------- k, k-max, max-num-seqs beyond any engine

HUGE = "9" * 40


@pytest.mark.parametrize("argv", [
    ["predict", "--k", HUGE],  # ValueError: Maximum allowed size exceeded (np.arange(1, k + 1))
    ["predict", "--k", "33"],
    ["policy", "--k-max", "100000"],
    ["plan", "--workload", "sharegpt", "--peak-rps", "10", "--slo-tpot-ms", "50", "--verify", "0", "--jobs", "1",
     "--k-max", HUGE],  # OverflowError: Python int too large to convert to C ssize_t
    ["plan", "--workload", "sharegpt", "--peak-rps", "10", "--slo-tpot-ms", "50", "--verify", "0", "--jobs", "1",
     "--max-num-seqs", HUGE],  # ValueError: Maximum allowed dimension exceeded
    ["simulate", "--workload", "sharegpt", "--concurrency", "1", "--max-num-seqs", HUGE],
])
def test_k_k_max_and_max_num_seqs_have_upper_bounds(argv):
    r = run_cli(*argv)
    assert_one_line_error(r, "must be")
    assert "1..32" in r.stderr or "65536" in r.stderr, r.stderr
