"""Measured sweeps: vLLM / SGLang / CSV readers, the measured table, acceptance from logs and /metrics,
and what real files carry (zero throughput, a UTF-8 BOM, negative latencies)."""

from __future__ import annotations

import ast
import hashlib
import json
import math
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, assert_one_line_error, assert_one_line_message, run_cli

from crossover.errors import CrossoverError
from crossover.measurements import (
    MeasuredPoint,
    MeasuredTable,
    parse_prometheus,
    parse_spec_decode_log,
    read_acceptance,
    read_measurements,
)

M = FIXTURES / "measured"
PKG = REPO / "crossover" / "measurements"
VLLM_ON, VLLM_OFF = M / "vllm_on", M / "vllm_off"
LEGACY = M / "vllm_legacy_benchmark_serving.json"
APPEND = M / "vllm_append.jsonl"
SWEEP = M / "vllm_sweep" / "SERVE-eagle3-BENCH-c32"
SGLANG = M / "sglang_runs.jsonl"
CSV = M / "sweep.csv"
LOG = M / "vllm_specdecode.log"
PROM, PROM_V0 = M / "vllm_metrics.prom", M / "vllm_v0_metrics.prom"
EXAMPLE_1_4 = json.loads(APPEND.read_text().splitlines()[1])  # the result JSON of formats.md 1.4


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def vllm_variant(tmp_path: Path, name: str = "r.json", drop: tuple[str, ...] = (), **changes) -> Path:
    """The formats.md 1.4 example with keys dropped or changed, written to tmp_path."""
    obj = {k: v for k, v in EXAMPLE_1_4.items() if k not in drop}
    obj.update(changes)
    return write(tmp_path, name, json.dumps(obj))


# --------------------------------------------------------------------------- vLLM bench serve (current)

def test_vllm_on_directory_reads_arm_load_throughput_and_acceptance():
    pts = read_measurements([VLLM_ON])
    assert len(pts) == 3  # the *.pytorch.json companion is skipped
    assert [p.arm for p in pts] == ["on"] * 3
    by_load = {p.load: p for p in pts}
    assert sorted(by_load) == [1.0, 16.0, 64.0]
    assert {p.load_axis for p in pts} == {"concurrency"}
    p16 = by_load[16.0]
    assert p16.output_throughput == 2428.84
    assert p16.acceptance_length == 2.48
    assert p16.acceptance_rate == pytest.approx(0.4933)  # 49.33 % in the file
    assert p16.per_position == (0.77, 0.45, 0.2601)
    assert p16.k == 3  # length of the per-position list
    assert p16.metrics["median_tpot_ms"] == 5.8
    assert p16.metrics["total_token_throughput"] == 21859.6
    assert p16.metrics["spec_decode_num_drafts"] == 8194
    assert "tp" not in p16.metrics and "request_rate" not in p16.metrics and "latencies" not in p16.metrics
    assert "spec_decode_acceptance_length" not in p16.metrics
    assert p16.mean_input_len == 1024 and p16.mean_output_len == 128
    assert p16.warnings == ()
    assert Path(p16.source).parent == VLLM_ON


def test_failed_requests_are_flagged():
    p64 = next(p for p in read_measurements([VLLM_ON]) if p.load == 64)
    assert any("failed > 0" in w for w in p64.warnings)
    assert any("completed != num_prompts" in w for w in p64.warnings)
    assert p64.mean_output_len == 128  # total_output_tokens / completed (638), not / num_prompts


def test_vllm_off_directory_needs_the_flag_and_pairs_with_on():
    with pytest.raises(CrossoverError) as exc:
        read_measurements([VLLM_OFF])
    assert_one_line_message(exc, "vllm_off", "cannot tell whether speculation was on; pass it under --on or --off", "spec_decode_")
    off = read_measurements([VLLM_OFF], arm="off")
    assert [p.arm for p in off] == ["off"] * 3
    assert all(p.acceptance_length is None and p.acceptance_rate is None and p.k is None for p in off)
    table = MeasuredTable(off + read_measurements([VLLM_ON], arm="on"))
    assert table.load_axis == "concurrency"
    pairs = table.pairs()
    assert [load for load, _, _ in pairs] == [1.0, 16.0, 64.0]
    speedups = [on.output_throughput / off_.output_throughput for _, off_, on in pairs]
    assert speedups[0] == pytest.approx(279.6 / 137.89)
    assert speedups[0] > speedups[1] > speedups[2] > 1.0


def test_append_result_jsonl_gives_one_point_per_line():
    pts = read_measurements([APPEND])
    assert [p.source for p in pts] == [f"{APPEND}:1", f"{APPEND}:2"]
    assert [p.load for p in pts] == [8.0, 32.0]
    last = pts[1]  # formats.md 1.4
    assert (last.arm, last.output_throughput, last.acceptance_length) == ("on", 1913.1, 2.31)
    assert last.acceptance_rate == pytest.approx(0.4367)
    assert last.per_position == (0.71, 0.42, 0.18)
    assert last.metrics["p90_e2el_ms"] == 2071.5


def test_legacy_benchmark_serving_json():
    with pytest.raises(CrossoverError) as exc:
        read_measurements([LEGACY])
    assert_one_line_message(exc, LEGACY.name, "pass it under --on or --off")
    (p,) = read_measurements([LEGACY], arm="off")
    assert (p.arm, p.load_axis, p.load, p.output_throughput) == ("off", "request_rate", 4.0, 797.48)
    assert p.metrics["p99_tpot_ms"] == 8.64 and p.metrics["total_token_throughput"] == 1680.75
    assert "request_goodput:" not in p.metrics and "input_lens" not in p.metrics
    assert p.source == str(LEGACY)


def test_legacy_goodput_key_with_colon_is_read_as_request_goodput(tmp_path):
    path = write(tmp_path, "legacy.json", LEGACY.read_text().replace('"request_goodput:": null',
                                                                       '"request_goodput:": 3.12'))
    (p,) = read_measurements([path], arm="off")
    assert p.metrics["request_goodput"] == 3.12


def test_sweep_summary_list_and_directory_without_double_counting():
    listed = read_measurements([SWEEP / "summary.json"])
    assert [p.source for p in listed] == [f"{SWEEP / 'summary.json'}[{i}]" for i in range(3)]
    assert all(p.arm == "on" and p.k == 3 and p.load == 32 for p in listed)  # from speculative_config
    assert [p.output_throughput for p in listed] == [1965.55, 1977.41, 1951.89]
    scanned = read_measurements([SWEEP])
    assert sorted(Path(p.source).name for p in scanned) == ["run=0.json", "run=1.json", "run=2.json"]
    assert sorted(p.output_throughput for p in scanned) == sorted(p.output_throughput for p in listed)


def test_repeated_runs_at_one_load_are_represented_by_the_median_run():
    runs = read_measurements([SWEEP])
    off = [MeasuredPoint(**{**vars(p), "arm": "off", "acceptance_length": None, "acceptance_rate": None,
                            "per_position": None, "k": None}) for p in runs]
    ((load, p_off, p_on),) = MeasuredTable(runs + off).pairs()
    assert load == 32
    assert p_on.output_throughput == 1965.55 and p_off.output_throughput == 1965.55  # median of the three


def test_inf_request_rate_without_cap_uses_measured_concurrency_with_a_warning(tmp_path):
    path = vllm_variant(tmp_path, max_concurrency=None, max_concurrent_requests=320)
    (p,) = read_measurements([path])
    assert (p.load_axis, p.load) == ("concurrency", 320.0)
    assert len(p.warnings) == 1 and "max_concurrent_requests=320" in p.warnings[0]
    # no measured concurrency either: Little's law on the kept latencies
    path = vllm_variant(tmp_path, "little.json", drop=("max_concurrent_requests",), max_concurrency=None)
    (p,) = read_measurements([path])
    assert p.load == pytest.approx((2.013 + 1.998 + 2.041) / 21.41)
    assert "Little" in p.warnings[0]


def test_finite_request_rate_is_the_axis_when_no_cap(tmp_path):
    (p,) = read_measurements([vllm_variant(tmp_path, max_concurrency=None, request_rate=12.5)])
    assert (p.load_axis, p.load, p.warnings) == ("request_rate", 12.5, ())


# --------------------------------------------------------------------------- SGLang

def test_sglang_jsonl_reads_arms_axes_names_and_acceptance():
    pts = read_measurements([SGLANG])
    assert [p.source for p in pts] == [f"{SGLANG}:{i}" for i in range(1, 7)]
    assert [p.arm for p in pts] == ["on", "off", "on", "off", "on", "off"]
    assert [(p.load_axis, p.load) for p in pts] == [
        ("concurrency", 32.0), ("concurrency", 32.0), ("concurrency", 128.0), ("concurrency", 128.0),
        ("concurrency", 320.0), ("request_rate", 8.0)]
    first = pts[0]  # the example line of formats.md 2.2 (request_rate Infinity, max_concurrency 32)
    assert first.output_throughput == 1959.8
    assert first.acceptance_length == 2.41 and first.acceptance_rate is None
    assert first.k == 3  # speculative_num_draft_tokens 4 - 1, a chain (topk 1)
    assert first.metrics["mean_e2el_ms"] == 1990.2 and first.metrics["p95_e2el_ms"] == 2062.8
    assert first.metrics["total_token_throughput"] == 17638.7
    assert "mean_e2e_latency_ms" not in first.metrics and "total_throughput" not in first.metrics
    assert first.mean_input_len == 1024
    assert pts[1].acceptance_length is None and pts[1].k is None
    assert pts[3].metrics["total_input_tokens"] == 327680  # spelled total_input in that line
    assert pts[3].metrics["total_output_tokens"] == 40960
    assert pts[4].warnings and "request_rate is inf" in pts[4].warnings[0]
    assert pts[5].warnings == ()


def test_sglang_off_line_contradicts_on_flag():
    with pytest.raises(CrossoverError) as exc:
        read_measurements([SGLANG], arm="on")
    assert_one_line_message(exc, f"{SGLANG.name}:2", "server_info.speculative_algorithm", "--on")


def test_sglang_without_server_info_needs_a_flag(tmp_path):
    line = json.loads(SGLANG.read_text().splitlines()[1])
    line["server_info"] = None
    path = write(tmp_path, "noinfo.jsonl", json.dumps(line) + "\n")
    with pytest.raises(CrossoverError) as exc:
        read_measurements([path])
    assert_one_line_message(exc, "noinfo.jsonl:1", "cannot tell whether speculation was on", "speculative_algorithm")
    (p,) = read_measurements([path], arm="off")
    assert p.arm == "off"


def test_mixed_axes_name_both_files():
    table = MeasuredTable(read_measurements([SGLANG]))
    with pytest.raises(CrossoverError) as exc:
        table.load_axis
    assert_one_line_message(exc, f"{SGLANG.name}:1", f"{SGLANG.name}:6", "request_rate")


def test_forced_load_axis():
    pts = read_measurements([SGLANG], load_axis="concurrency")
    assert [p.load for p in pts][-1] == 17.0  # measured max_concurrent_requests of the 8 req/s run
    assert "max_concurrent_requests=17" in pts[-1].warnings[0]
    with pytest.raises(CrossoverError) as exc:
        read_measurements([SGLANG], load_axis="request_rate")
    assert_one_line_message(exc, f"{SGLANG.name}:1", "'request_rate'", "inf")
    with pytest.raises(CrossoverError) as exc:
        read_measurements([CSV], load_axis="batch")
    assert_one_line_message(exc, CSV.name, "'batch'")
    with pytest.raises(CrossoverError) as exc:
        read_measurements([CSV], load_axis="qps")
    assert_one_line_message(exc, "load_axis", "'qps'")


# --------------------------------------------------------------------------- CSV

def test_csv_reads_both_arms_with_line_numbers():
    pts = read_measurements([CSV])
    assert len(pts) == 8
    assert pts[0].source == f"{CSV}:4" and pts[3].source == f"{CSV}:9"  # comments and blank lines skipped
    table = MeasuredTable(pts)
    assert table.load_axis == "concurrency"
    assert [p.load for p in table.arm("on")] == [1, 8, 32, 128]
    assert [p.output_throughput for p in table.arm("off")] == [142.6, 1008.3, 2604.9, 4452.0]
    on1 = table.arm("on")[0]
    assert (on1.acceptance_length, on1.acceptance_rate, on1.k) == (2.62, 0.54, 3)
    assert on1.metrics == {"median_ttft_ms": 23.9, "median_tpot_ms": 3.3, "p99_tpot_ms": 4.12, "mean_e2el_ms": 443.0}
    off1 = table.arm("off")[0]
    assert (off1.acceptance_length, off1.acceptance_rate, off1.k) == (None, None, None)
    speedup = [on.output_throughput / off.output_throughput for _, off, on in table.pairs()]
    assert [s > 1 for s in speedup] == [True, True, True, False]  # crossover between 32 and 128


def test_csv_arm_column_against_flag_and_without_column(tmp_path):
    with pytest.raises(CrossoverError) as exc:
        read_measurements([CSV], arm="on")
    assert_one_line_message(exc, f"{CSV.name}:4", "'arm'", "--on")
    path = write(tmp_path, "noarm.csv", "concurrency,output_throughput\n4,500.5\n16,1500\n")
    with pytest.raises(CrossoverError) as exc:
        read_measurements([path])
    assert_one_line_message(exc, "noarm.csv:2", "pass it under --on or --off", "'arm'")
    pts = read_measurements([path], arm="off")
    assert [(p.arm, p.load, p.output_throughput) for p in pts] == [("off", 4, 500.5), ("off", 16, 1500)]


@pytest.mark.parametrize("text, needles", [
    ("arm,concurrency,output_throughput\non,4,fast\n", ["bad.csv:2", "'output_throughput'", "'fast'"]),
    ("arm,concurrency,output_throughput\non,4,-3\n", ["bad.csv:2", "'output_throughput'", "negative"]),
    ("arm,concurrency,output_throughput\nmaybe,4,300\n", ["bad.csv:2", "'arm'", "'maybe'"]),
    ("arm,concurrency,output_throughput,acceptance_rate\non,4,300,43.7\n", ["bad.csv:2", "'acceptance_rate'", "fraction"]),
    ("arm,concurrency,output_throughput,k\non,4,300,2.5\n", ["bad.csv:2", "'k'"]),
    ("arm,concurrency,output_throughput\non,0,300\n", ["bad.csv:2", "'concurrency'"]),
    ("arm,concurrency,output_throughput\non,4\n", ["bad.csv:2", "fields"]),
    ("arm,concurrency,mean_ttft_ms\non,4,30\n", ["bad.csv", "'output_throughput'"]),
    ("arm,output_throughput\non,300\n", ["bad.csv", "'concurrency'", "'batch'"]),
    ("arm,concurrency,request_rate,output_throughput\non,4,2,300\n", ["bad.csv", "several load columns"]),
])
def test_bad_csv_rows_name_the_line_and_column(tmp_path, text, needles):
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(CrossoverError) as exc:
        read_measurements([path])
    assert_one_line_message(exc, *needles)


# --------------------------------------------------------------------------- flags against the file

def test_flag_agreeing_with_file_is_accepted(tmp_path):
    assert [p.arm for p in read_measurements([VLLM_ON], arm="on")] == ["on"] * 3
    off_rows = [line for line in CSV.read_text().splitlines() if not line.startswith("on,")]
    path = write(tmp_path, "off.csv", "\n".join(off_rows) + "\n")
    assert [p.arm for p in read_measurements([path], arm="off")] == ["off"] * 4
    sglang_on = [line for line in SGLANG.read_text().splitlines() if '"EAGLE3"' in line]
    path = write(tmp_path, "on.jsonl", "\n".join(sglang_on) + "\n")
    assert [p.arm for p in read_measurements([path], arm="on")] == ["on"] * 3


def test_flag_contradicting_vllm_spec_decode_keys():
    with pytest.raises(CrossoverError) as exc:
        read_measurements([APPEND], arm="off")
    assert_one_line_message(exc, f"{APPEND.name}:1", "--off", "spec_decode_")


def test_bad_arm_argument():
    with pytest.raises(CrossoverError) as exc:
        read_measurements([CSV], arm="yes")
    assert_one_line_message(exc, "'yes'", "'on' or 'off'")


# --------------------------------------------------------------------------- broken files

@pytest.mark.parametrize("name, needles", [
    ("truncated.json", ["truncated JSON", "line 61, column 18", "'p90_itl_ms'"]),
    ("missing_output_throughput.json", ["missing required key 'output_throughput'"]),
    ("string_throughput.json", ["'output_throughput'", "must be a number", "'1913.1'"]),
    ("nan_throughput.json", ["'output_throughput'", "NaN"]),
])
def test_broken_fixture_gives_one_line_error_naming_file_and_key(name, needles):
    path = M / "broken" / name
    with pytest.raises(CrossoverError) as exc:
        read_measurements([path])
    assert_one_line_message(exc, name, *needles)


@pytest.mark.parametrize("changes, needles", [
    ({"output_throughput": -12.0}, ["'output_throughput'", "negative"]),
    ({"output_throughput": None}, ["'output_throughput'"]),
    ({"mean_tpot_ms": "15.2"}, ["'mean_tpot_ms'", "must be a number"]),
    ({"completed": [320]}, ["'completed'", "a list"]),
    ({"max_concurrency": "32"}, ["'max_concurrency'", "must be a number"]),
    ({"request_rate": "fast"}, ["'request_rate'", "'fast'"]),
    ({"spec_decode_acceptance_rate": 143.7}, ["'spec_decode_acceptance_rate'", "percentage"]),
    ({"spec_decode_acceptance_length": 0.8}, ["'spec_decode_acceptance_length'", ">= 1"]),
    ({"spec_decode_per_position_acceptance_rates": [0.7, 1.4]}, ["spec_decode_per_position_acceptance_rates[1]"]),
])
def test_wrong_values_name_the_key(tmp_path, changes, needles):
    path = vllm_variant(tmp_path, "bad.json", **changes)
    with pytest.raises(CrossoverError) as exc:
        read_measurements([path])
    assert_one_line_message(exc, "bad.json", *needles)


@pytest.mark.parametrize("name, text, needles", [
    ("notes.txt", "just some notes\n", ["notes.txt", "unknown format"]),
    ("other.json", '{"schema_version": "1.0", "records": {}}', ["other.json", "unknown format", "AIPerf"]),
    ("scalar.json", "3.5", ["scalar.json", "unknown format"]),
    ("empty.json", "  \n", ["empty.json", "empty file"]),
    ("list.json", "[1, 2]", ["list.json[0]", "a JSON object"]),
    ("lines.jsonl", '{"endpoint_type": "openai", "output_throughput": 10, "max_concurrency": 1}\n{"endpoint_type": ',
     ["lines.jsonl", "line 2", "'endpoint_type'"]),
])
def test_unreadable_content(tmp_path, name, text, needles):
    path = write(tmp_path, name, text)
    with pytest.raises(CrossoverError) as exc:
        read_measurements([path], arm="off")
    assert_one_line_message(exc, *needles)


def test_missing_paths_and_empty_directory(tmp_path):
    with pytest.raises(CrossoverError) as exc:
        read_measurements([tmp_path / "nope.json"])
    assert_one_line_message(exc, "nope.json", "no such file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CrossoverError) as exc:
        read_measurements([tmp_path / "empty"])
    assert_one_line_message(exc, "empty", "no *.json")


def test_inputs_are_byte_identical_after_reading():
    files = sorted(p for p in M.rglob("*") if p.is_file())
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    read_measurements([VLLM_ON, APPEND, SWEEP, SWEEP / "summary.json", SGLANG, CSV])
    read_measurements([VLLM_OFF, LEGACY], arm="off")
    for broken in (M / "broken").iterdir():
        with pytest.raises(CrossoverError):
            read_measurements([broken])
    for path in (LOG, PROM, PROM_V0):
        read_acceptance(path)
    assert sorted(p for p in M.rglob("*") if p.is_file()) == files
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == before


# --------------------------------------------------------------------------- the table

def point(arm: str, load: float, tput: float = 100.0, axis: str = "concurrency", src: str = "x") -> MeasuredPoint:
    return MeasuredPoint(source=src, arm=arm, load_axis=axis, load=load, output_throughput=tput, metrics={})


def test_pairs_match_loads_within_relative_tolerance():
    table = MeasuredTable([point("on", 32 * (1 + 1e-12)), point("off", 32), point("on", 64), point("off", 64.001),
                           point("off", 8)])
    pairs = table.pairs()
    assert [load for load, _, _ in pairs] == [32]
    assert pairs[0][1].arm == "off" and pairs[0][2].arm == "on"
    assert [p.load for p in table.arm("off")] == [8, 32, 64.001]


def test_mean_lengths_per_completed_request():
    table = MeasuredTable(read_measurements([VLLM_ON]) + read_measurements([LEGACY], arm="off"))
    prompt, output = table.mean_lengths()
    # vllm_on: (32 + 160 + 638) requests x 1024 / 128 tokens; legacy: 44870 / 40512 tokens over 200 requests
    assert prompt == pytest.approx((830 * 1024 + 44870) / 1030)
    assert output == pytest.approx((830 * 128 + 40512) / 1030)
    assert MeasuredTable(read_measurements([CSV])).mean_lengths() == (None, None)


def test_point_validation_and_empty_table():
    with pytest.raises(CrossoverError) as exc:
        point("maybe", 4, src="hand.csv:3")
    assert_one_line_message(exc, "hand.csv:3", "arm")
    with pytest.raises(CrossoverError) as exc:
        point("on", 4, tput=float("nan"), src="hand.csv:4")
    assert_one_line_message(exc, "hand.csv:4", "output_throughput")
    with pytest.raises(CrossoverError) as exc:
        MeasuredTable([]).load_axis
    assert_one_line_message(exc, "no measured points")
    with pytest.raises(CrossoverError):
        MeasuredTable([point("on", 1)]).arm("both")


def test_measurements_layer_imports_only_errors_and_stdlib():
    # yaml: GuideLLM writes its reports as YAML too (PyYAML is a core dependency, read lazily there)
    allowed_top = {"__future__", "csv", "dataclasses", "io", "json", "math", "pathlib", "re", "typing", "numpy",
                   "yaml"}
    for path in PKG.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2:
                assert node.module in ("errors", "files"), f"{path.name} imports crossover.{node.module}"
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] in allowed_top, f"{path.name} imports {node.module}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in allowed_top, f"{path.name} imports {alias.name}"


# --------------------------------------------------------------------------- acceptance: logs

def _log_lines() -> list[str]:
    lines = LOG.read_text().splitlines()
    return [line for line in lines if "SpecDecoding metrics" in line or "Speculative metrics" in line]


def test_log_early_v1_format():
    out = parse_spec_decode_log(_log_lines()[0])
    assert (out["accepted"], out["drafted"]) == (2511, 4659)
    assert out["acceptance_rate"] == pytest.approx(2511 / 4659)  # logged as 53.9 %
    assert out["acceptance_length"] is None and out["per_position"] is None


def test_log_v09_format():
    out = parse_spec_decode_log(_log_lines()[1])  # verbatim from vllm-project/vllm#19254
    assert (out["accepted"], out["drafted"]) == (150, 387)
    assert out["acceptance_rate"] == pytest.approx(150 / 387)  # 38.8 %
    assert out["acceptance_length"] == pytest.approx(2.16)
    assert out["per_position"] == pytest.approx((0.543, 0.357, 0.264))
    assert out["k"] == 3


def test_log_current_format():
    out = parse_spec_decode_log(_log_lines()[2])
    assert (out["accepted"], out["drafted"]) == (15192, 30816)  # not the "Accepted throughput" values
    assert out["acceptance_rate"] == pytest.approx(0.49299, abs=1e-5)  # "Avg Draft acceptance rate: 49.3%"
    assert out["acceptance_length"] == pytest.approx(2.48)
    assert out["per_position"] == pytest.approx((0.770, 0.450, 0.259))


def test_log_v0_format():
    out = parse_spec_decode_log(_log_lines()[3])
    assert (out["accepted"], out["drafted"], out["k"]) == (1735, 2648, 4)
    assert out["acceptance_rate"] == pytest.approx(0.655, abs=5e-4)  # a fraction in V0, not a percentage
    # 2648 draft tokens / k=4 = 662 verify steps emitting 2149 tokens
    assert out["acceptance_length"] == pytest.approx(2149 / 662)


def test_log_aggregate_over_all_lines():
    out = read_acceptance(LOG)
    assert out["lines"] == 4
    assert (out["accepted"], out["drafted"]) == (19588, 38510)
    assert out["acceptance_rate"] == pytest.approx(19588 / 38510)
    # lengths weighted by drafts: 387/3 = 129, 30816/3 = 10272, V0 2648/4 = 662 (tau 2149/662)
    assert out["acceptance_length"] == pytest.approx((129 * 2.16 + 10272 * 2.48 + 2149) / (129 + 10272 + 662))
    assert out["per_position"][0] == pytest.approx((129 * 0.543 + 10272 * 0.770) / (129 + 10272))
    assert out["per_position"][2] == pytest.approx((129 * 0.264 + 10272 * 0.259) / (129 + 10272))
    assert out["k"] is None  # k 3 and k 4 both appear


def test_log_field_order_does_not_matter_and_errors_are_one_line():
    shuffled = ("SpecDecoding metrics: Drafted: 300 tokens, Per-position acceptance rate: 0.600, 0.300, "
                "Accepted: 135 tokens, Mean acceptance length: 1.90")
    out = parse_spec_decode_log(shuffled)
    assert (out["accepted"], out["drafted"], out["acceptance_length"]) == (135, 300, 1.9)
    assert out["per_position"] == pytest.approx((0.6, 0.3))
    with pytest.raises(CrossoverError) as exc:
        parse_spec_decode_log("INFO nothing to see\n", origin="server.log")
    assert_one_line_message(exc, "server.log", "SpecDecoding")
    with pytest.raises(CrossoverError) as exc:
        parse_spec_decode_log("x\nSpecDecoding metrics: Mean acceptance length: 2.0\n", origin="server.log")
    assert_one_line_message(exc, "server.log:2", "'Accepted'")


# --------------------------------------------------------------------------- acceptance: Prometheus

def test_prometheus_v1_counters_summed_over_engines():
    out = read_acceptance(PROM)
    assert (out["num_drafts"], out["drafted"], out["accepted"], out["k"]) == (17593, 52779, 23047, 3)
    assert out["acceptance_rate"] == pytest.approx(23047 / 52779)  # 43.67 %, as in formats.md 1.4
    assert out["acceptance_length"] == pytest.approx(1 + 23047 / 17593)  # 2.31
    assert out["per_position"] == pytest.approx((13209 / 17593, 6473 / 17593, 3365 / 17593))


def test_prometheus_v0_gauges_and_counters():
    out = parse_prometheus(PROM_V0.read_text())
    assert out["acceptance_rate"] == pytest.approx(1735 / 2648)
    assert out["k"] == 4  # efficiency 2149 / (662 x 5)
    assert out["acceptance_length"] == pytest.approx(2149 / 662)
    assert out["system_efficiency"] == pytest.approx(0.6492447)
    gauge_only = "\n".join(ln for ln in PROM_V0.read_text().splitlines() if "acceptance_rate" in ln)
    assert parse_prometheus(gauge_only)["acceptance_rate"] == pytest.approx(0.6552114803625377)


def test_prometheus_labels_and_models():
    text = ('vllm:spec_decode_num_drafts_total{model_name="a",engine="0"} 10\n'
            'vllm:spec_decode_num_accepted_tokens_total{model_name="a",engine="0"} 15\n'
            'vllm:spec_decode_num_drafts_total{model_name="b",engine="0"} 4\n'
            'vllm:spec_decode_num_accepted_tokens_total{model_name="b",engine="0"} 2\n')
    with pytest.raises(CrossoverError) as exc:
        parse_prometheus(text, origin="scrape.txt")
    assert_one_line_message(exc, "scrape.txt", "a, b", "model_name")
    assert parse_prometheus(text, model_name="a")["acceptance_length"] == 2.5
    assert parse_prometheus(text, model_name="b")["acceptance_length"] == 1.5
    with pytest.raises(CrossoverError) as exc:
        parse_prometheus("vllm:num_requests_running 3\n", origin="scrape.txt")
    assert_one_line_message(exc, "scrape.txt", "vllm:spec_decode_")


def test_read_acceptance_rejects_other_text(tmp_path):
    with pytest.raises(CrossoverError) as exc:
        read_acceptance(write(tmp_path, "x.txt", "hello\n"))
    assert_one_line_message(exc, "x.txt", "SpecDecoding", "vllm:spec_decode_")
    with pytest.raises(CrossoverError) as exc:
        read_acceptance(tmp_path / "absent.log")
    assert_one_line_message(exc, "absent.log", "no such file")
    assert math.isclose(read_acceptance(LOG)["accepted"], 19588)


# --------------------------------------------------------------------------- what real files carry
# zero throughput, a UTF-8 BOM, negative latencies (through `crossover measured`); JSON stays JSON


def test_zero_off_throughput_is_no_crash_and_the_json_has_no_bare_nan(tmp_path):
    f = write(tmp_path, "sweep.csv", "arm,concurrency,output_throughput\noff,1,0\non,1,150\noff,8,1000\non,8,900\n")
    r = run_cli("measured", "--files", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout
    d = json.loads(r.stdout)
    assert d["points"][0]["speedup"] is None and d["points"][1]["speedup"] == 0.9
    text = run_cli("measured", "--files", str(f))
    assert text.returncode == 0 and "Traceback" not in text.stderr


def test_a_csv_that_starts_with_a_utf8_bom_is_read(tmp_path):
    f = write(tmp_path, "sweep.csv", "\ufeffarm,concurrency,output_throughput\noff,1,100\non,1,150\n")
    assert f.read_bytes().startswith(b"\xef\xbb\xbfarm,")
    r = run_cli("measured", "--files", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["points"][0]["speedup"] == 1.5


def test_negative_latencies_are_refused_in_one_line(tmp_path):
    f = write(tmp_path, "sweep.csv", "arm,concurrency,output_throughput,median_tpot_ms\noff,1,100,7\non,1,150,-4\n")
    r = run_cli("measured", "--files", str(f))
    assert_one_line_error(r, "median_tpot_ms must be >= 0")
