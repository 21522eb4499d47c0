"""Readers for the benchmark tools users run besides `vllm bench serve` (issue 22, item 1): GuideLLM
reports (v0.3 to v0.7; JSON, YAML, CSV), AIPerf profile exports, inference-perf stage files, and
vLLM's spec_decode_* / SGLang's accept_length wherever present (by key, never by version).

The fixtures under tests/fixtures/measured/{guidellm,aiperf,inference_perf}/ are hand-built from the
documented layouts (/work/shared/docs/benchmark_formats_2026.md) and carry the numbers of BASE: one
three-level sweep, speculation off and on. Each tool's files must give the table the equivalent
vLLM bench-serve files give, and a number must mean what vLLM means by its name (a TPOT is a TPOT).
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import FIXTURES, assert_one_line_error, assert_one_line_message, run_cli

from crossover.errors import CrossoverError
from crossover.measurements import read_columns, read_measurements
from crossover.measurements import guidellm
from crossover.measurements.fields import sglang_acceptance, sglang_arm

M = FIXTURES / "measured"
G, A, I = M / "guidellm", M / "aiperf", M / "inference_perf"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LEVELS = (1, 16, 64)  # concurrency (GuideLLM's concurrent profile, AIPerf)
RATES = (2, 8, 32)  # requests/s (inference-perf's stages)
_PCT = {"p0.1": 0.8, "p1": 0.82, "p5": 0.86, "p10": 0.9, "p25": 0.95, "p50": 1.0, "p75": 1.05, "p90": 1.12,
        "p95": 1.18, "p99": 1.27, "p99.9": 1.4, "min": 0.78, "max": 1.45}


def stats(median: float) -> dict[str, float]:
    """A latency distribution around its median (ms): mean, median, std, min, max and percentiles."""
    out = {k: round(median * f, 4) for k, f in _PCT.items()}
    out.update(median=median, p50=median, mean=round(median * 1.02, 4), std=round(median * 0.08, 4))
    return out


# (arm, level index) -> output tok/s, median TPOT ms, median TTFT ms, tokens per streamed chunk
_RUNS = {("off", 0): (137.89, 6.78, 22.0, 1.0), ("off", 1): (1516.69, 9.64, 48.5, 1.0),
         ("off", 2): (3288.97, 17.25, 160.2, 1.0), ("on", 0): (279.6, 3.24, 23.6, 2.62),
         ("on", 1): (2428.84, 5.8, 52.8, 2.48), ("on", 2): (3372.7, 16.56, 178.9, 2.41)}
_COMPLETED = (32, 64, 256)


def _base() -> dict[str, dict[float, dict]]:
    out: dict[str, dict[float, dict]] = {"off": {}, "on": {}}
    for (arm, i), (tput, tpot, ttft, chunk) in _RUNS.items():
        n, in_len, out_len = _COMPLETED[i], 1024, 128
        duration = round(n * out_len / tput, 6)
        run = {"output_throughput": tput, "completed": n, "input_len": in_len, "output_len": out_len,
               "duration": duration, "request_throughput": round(n / duration, 6),
               "total_token_throughput": round(n * (in_len + out_len) / duration, 4),
               "tpot": stats(tpot), "ttft": stats(ttft), "itl": stats(round(tpot * chunk, 4)),
               "e2el": stats(round(ttft + (out_len - 1) * tpot, 4)), "chunk_tokens": chunk}
        out[arm][LEVELS[i]] = {**run, "measured_concurrency": round(LEVELS[i] * 0.985, 4)}
        out[arm][RATES[i]] = {**run, "measured_concurrency": round(RATES[i] * 0.41, 4)}
    return out


BASE = _base()


def vllm_result(arm: str, level: float, axis: str = "concurrency", itl: bool = True) -> dict:
    """The vllm bench serve result JSON of BASE's run at `level` (no spec_decode_* keys: the tools'
    files carry none either; the arm is the --on / --off they are passed under)."""
    b = BASE[arm][level]
    obj = {"date": "20260301-101500", "endpoint_type": "openai", "backend": "openai", "model_id": MODEL,
           "tokenizer_id": MODEL, "num_prompts": b["completed"],
           "request_rate": level if axis == "request_rate" else "inf", "burstiness": 1.0,
           "max_concurrency": level if axis == "concurrency" else None, "duration": b["duration"],
           "completed": b["completed"], "failed": 0, "total_input_tokens": b["completed"] * b["input_len"],
           "total_output_tokens": b["completed"] * b["output_len"], "request_throughput": b["request_throughput"],
           "request_goodput": None, "output_throughput": b["output_throughput"],
           "total_token_throughput": b["total_token_throughput"]}
    for name in ("ttft", "tpot", "itl", "e2el") if itl else ("ttft", "tpot", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p90", "p99"):
            obj[f"{stat}_{name}_ms"] = b[name][stat]
    return obj


def vllm_sweep(tmp_path: Path, levels=LEVELS, axis: str = "concurrency", itl: bool = True) -> tuple[Path, Path]:
    for arm in ("off", "on"):
        (tmp_path / f"vllm_{arm}").mkdir()
        for c in levels:
            (tmp_path / f"vllm_{arm}" / f"c{c}.json").write_text(json.dumps(vllm_result(arm, c, axis, itl)))
    return tmp_path / "vllm_on", tmp_path / "vllm_off"


def table(*args: str) -> dict:
    """`crossover measured ARGS --json`'s level table and latency crossings (exit 0)."""
    r = run_cli("measured", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _write(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


def _assert_base(points, arm: str, levels, itl: bool):
    """Every point is BASE's run at its level, in vLLM's names and units."""
    assert sorted(p.load for p in points) == sorted(levels)
    for p in points:
        b = BASE[arm][p.load]
        assert p.arm == arm and p.output_throughput == pytest.approx(b["output_throughput"])
        for name in ("tpot", "ttft", "e2el"):
            for stat in ("mean", "median", "p99"):
                assert p.metrics[f"{stat}_{name}_ms"] == pytest.approx(b[name][stat], rel=1e-9), (p.source, name, stat)
        assert ("median_itl_ms" in p.metrics) == itl
        if itl:
            assert p.metrics["median_itl_ms"] == pytest.approx(b["itl"]["median"])
        assert p.metrics["completed"] == b["completed"]
        assert p.metrics["total_input_tokens"] == pytest.approx(b["completed"] * b["input_len"])
        assert p.metrics["total_output_tokens"] == pytest.approx(b["completed"] * b["output_len"])
        assert p.mean_input_len == pytest.approx(1024) and p.mean_output_len == pytest.approx(128)
        assert p.acceptance_length is None and p.k is None
        assert p.warnings == ()


# --------------------------------------------------------------------------- GuideLLM reports

GUIDELLM_FILES = {  # fixture -> (layout, arm)
    "v0.3_off.json": ("v0.3", "off"), "v0.3_on.yaml": ("v0.3", "on"),
    "v0.4_off.json": ("v0.4", "off"), "v0.4_on.json": ("v0.4", "on"),
    "v0.6_off.json": ("v0.5-v0.6", "off"), "v0.5_on.yaml": ("v0.5-v0.6", "on"),
    "v0.7_off.json": ("v0.7+", "off"), "v0.7_on.json": ("v0.7+", "on"), "v0.7_off.yaml": ("v0.7+", "off"),
}


@pytest.mark.parametrize("name", sorted(GUIDELLM_FILES))
def test_every_guidellm_layout_reads_base_in_vllm_names(name):
    form, arm = GUIDELLM_FILES[name]
    path = G / name
    obj = guidellm.load_yaml(path, path.read_text()) if name.endswith(".yaml") else json.loads(path.read_text())
    assert guidellm.layout(name, obj) == form
    cols = read_columns([path], arm=arm)
    assert cols.formats == {"guidellm"}
    points = cols.points()
    _assert_base(points, arm, LEVELS, itl=False)
    for p in points:
        assert p.load_axis == "concurrency" and p.model_id == MODEL
        assert p.source.startswith(str(path)) and "benchmarks[" in p.source
        assert p.metrics["duration"] == pytest.approx(BASE[arm][p.load]["duration"])
        assert p.metrics["num_prompts"] == p.metrics["completed"] and p.metrics["failed"] == 0
        # the proxy of tau is kept under GuideLLM's own name (v0.4+), never as the acceptance length
        if form != "v0.3":
            assert p.metrics["iter_tokens_per_iteration"] == BASE[arm][p.load]["chunk_tokens"]


def test_guidellm_tpot_is_its_inter_token_latency_not_its_time_per_output_token():
    """v0.4+'s time_per_output_token_ms includes TTFT (and v0.3's divides by every output token):
    neither is vLLM's TPOT; inter_token_latency_ms is."""
    report = json.loads((G / "v0.7_on.json").read_text())
    bench = report["benchmarks"][2]
    itl = bench["metrics"]["inter_token_latency_ms"]["successful"]["median"]
    gtpot = bench["metrics"]["time_per_output_token_ms"]["successful"]["median"]
    assert gtpot > itl * 1.05  # the fixture keeps them apart
    p = max(read_measurements([G / "v0.7_on.json"], arm="on"), key=lambda p: p.load)
    assert p.metrics["median_tpot_ms"] == itl
    assert gtpot not in p.metrics.values()
    seconds = bench["metrics"]["request_latency"]["successful"]["median"]
    assert p.metrics["median_e2el_ms"] == pytest.approx(seconds * 1e3)


@pytest.mark.parametrize("off, on", [("v0.3_off.json", "v0.3_on.yaml"), ("v0.4_off.json", "v0.4_on.json"),
                                     ("v0.6_off.json", "v0.5_on.yaml"), ("v0.7_off.json", "v0.7_on.json"),
                                     ("v0.7_off.yaml", "v0.4_on.json")])
def test_a_guidellm_sweep_gives_the_table_of_the_same_vllm_files(tmp_path, off, on):
    v_on, v_off = vllm_sweep(tmp_path, itl=False)  # GuideLLM measures no gap between chunks (vLLM's ITL)
    want = table("--on", str(v_on), "--off", str(v_off))
    got = table("--on", str(G / on), "--off", str(G / off))
    assert got == want
    assert [p["level"] for p in got["points"]] == list(LEVELS) and "median_tpot_ms" in got["latency"]


def test_a_guidellm_output_folder_is_read_once(tmp_path):
    """GuideLLM writes benchmarks.json, .yaml, .csv and .html into its output folder: one report,
    read from the JSON; a YAML that is no report (a config) is no result."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(G / "v0.7_off.json", run / "benchmarks.json")
    shutil.copy(G / "v0.7_off.yaml", run / "benchmarks.yaml")
    shutil.copy(G / "v0.7_sync_throughput.csv", run / "benchmarks.csv")
    (run / "benchmarks.html").write_text("<html></html>")
    (run / "scenario.yaml").write_text("target: http://localhost:8000\nprofile: concurrent\n")
    points = read_measurements([run], arm="off")
    assert len(points) == 3 and {p.source.split(" ")[0] for p in points} == {str(run / "benchmarks.json")}
    (run / "benchmarks.json").unlink()  # the YAML alone is the report then
    assert len(read_measurements([run], arm="off")) == 3 + 2  # benchmarks.yaml, benchmarks.csv


def _one_benchmark(strategy: dict, **metrics) -> dict:
    report = json.loads((G / "v0.7_off.json").read_text())
    report["benchmarks"] = report["benchmarks"][:1]
    report["benchmarks"][0]["config"]["strategy"] = strategy
    report["benchmarks"][0]["metrics"].update(metrics)
    return report


@pytest.mark.parametrize("strategy, axis, load, warned", [
    ({"type_": "synchronous"}, "concurrency", 1, False),
    ({"type_": "concurrent", "streams": 8, "max_concurrency": None}, "concurrency", 8, False),
    ({"type_": "constant", "rate": 4.5, "max_concurrency": None}, "request_rate", 4.5, False),
    ({"type_": "poisson", "rate": 4.5, "max_concurrency": 32, "random_seed": 42}, "concurrency", 32, False),
    ({"type_": "throughput", "max_concurrency": 128}, "concurrency", 128, False),
    ({"type_": "throughput", "max_concurrency": None}, "concurrency", BASE["off"][1]["measured_concurrency"], True),
])
def test_each_guidellm_strategy_gives_its_load(tmp_path, strategy, axis, load, warned):
    (p,) = read_measurements([_write(tmp_path / "r.json", _one_benchmark(strategy))], arm="off")
    assert (p.load_axis, p.load) == (axis, load)
    assert bool(p.warnings) == warned
    if warned:
        assert "measured metrics.request_concurrency.successful.mean" in p.warnings[0]


# --------------------------------------------------------------------------- GuideLLM CSV

def test_the_guidellm_csv_of_three_header_rows_is_read_by_header_text():
    """v0.4+: the Strategy column holds the type only; synchronous is concurrency 1, throughput the
    measured concurrency (a warning); only the successful statuses' columns exist where the others
    have no requests, so columns are found by their header, not their place."""
    cols = read_columns([G / "v0.7_sync_throughput.csv"], arm="off")
    assert cols.formats == {"guidellm"}
    sync, thr = cols.points()
    assert (sync.load_axis, sync.load, sync.warnings) == ("concurrency", 1.0, ())
    assert thr.load == 61.2 and "measured" in thr.warnings[0]
    assert sync.source.endswith("v0.7_sync_throughput.csv:4")
    assert sync.output_throughput == 137.89 and thr.output_throughput == 3301.5
    assert sync.metrics["median_tpot_ms"] == 6.78 and sync.metrics["mean_tpot_ms"] == 6.9156
    assert sync.metrics["p99_tpot_ms"] == 8.6106 and sync.metrics["p90_ttft_ms"] == 24.64
    assert sync.metrics["median_e2el_ms"] == pytest.approx(883.06)  # Request Latency in seconds
    assert sync.metrics["completed"] == 32 and sync.metrics["total_input_tokens"] == 32 * 1024
    assert sync.metrics["iter_tokens_per_iteration"] == 1.0
    assert "p50_tpot_ms" not in sync.metrics  # GuideLLM's percentile cell has no p50
    assert 7.5 not in sync.metrics.values()  # its Time per Output Token (TTFT included) is not read


def test_the_guidellm_v03_flat_csv_takes_the_load_from_args():
    points = read_measurements([G / "v0.3_off.csv"], arm="off")
    _assert_base(points, "off", LEVELS, itl=False)


def test_a_guidellm_csv_without_the_level_points_to_the_json(tmp_path):
    text = (G / "v0.7_sync_throughput.csv").read_text().replace(",synchronous,", ",concurrent,")
    f = _write(tmp_path / "benchmarks.csv", text)
    r = run_cli("measured", "--on", str(f), "--off", str(G / "v0.7_off.json"))
    assert_one_line_error(r, f"{f}:4", "'concurrent'", "streams", "benchmarks.json")


# --------------------------------------------------------------------------- AIPerf

def _aiperf(arm: str) -> list[Path]:
    return [A / arm / f"concurrency{c}" for c in LEVELS]


@pytest.mark.parametrize("arm", ["off", "on"])
def test_aiperf_exports_read_base_in_vllm_names(arm):
    """off: a v0.1 export (input_config.loadgen.concurrency, latencies in ms); on: a schema 1.4 export
    of a sweep (run_info.variation_values, latencies in ns). inter_token_latency is vLLM's TPOT,
    inter_chunk_latency its ITL."""
    cols = read_columns(_aiperf(arm), arm=arm)
    assert cols.formats == {"aiperf"}
    points = cols.points()
    _assert_base(points, arm, LEVELS, itl=True)
    for p in points:
        assert p.load_axis == "concurrency" and p.model_id == MODEL
        assert p.source.endswith("profile_export_aiperf.json")
        assert p.metrics["duration"] == pytest.approx(BASE[arm][p.load]["duration"])
        assert p.metrics["p90_tpot_ms"] == pytest.approx(BASE[arm][p.load]["tpot"]["p90"])


def test_an_aiperf_sweep_gives_the_table_of_the_same_vllm_files(tmp_path):
    v_on, v_off = vllm_sweep(tmp_path)
    want = table("--on", str(v_on), "--off", str(v_off))
    got = table("--on", *map(str, _aiperf("on")), "--off", *map(str, _aiperf("off")))
    assert got == want and "median_itl_ms" in got["latency"]


def test_an_aiperf_artifact_folder_reads_its_export_only(tmp_path):
    run = tmp_path / "concurrency16"
    shutil.copytree(A / "off" / "concurrency16", run)
    (run / "inputs.json").write_text('{"data": [{"session_id": "a", "payloads": []}]}')
    (run / "profile_export.jsonl").write_text((A / "profile_export.jsonl").read_text())
    (run / "profile_export_aiperf.csv").write_text((A / "profile_export_aiperf.csv").read_text())
    (p,) = read_measurements([run], arm="off")
    assert p.load == 16 and p.source == str(run / "profile_export_aiperf.json")


# --------------------------------------------------------------------------- inference-perf

@pytest.mark.parametrize("arm", ["off", "on"])
def test_inference_perf_stages_read_base_in_vllm_names(arm):
    """Seconds read as ms; time_per_output_token is vLLM's TPOT; inter_token_latency (per-token gaps,
    zeros inside a streamed chunk: its median is 0 on the speculative arm) is no vLLM ITL and is
    not read; the folder's summary and server scrape are skipped."""
    cols = read_columns([I / arm], arm=arm)
    assert cols.formats == {"inference-perf"}
    points = cols.points()
    _assert_base(points, arm, RATES, itl=False)
    assert [p.source for p in points] == [str(I / arm / f"stage_{i}_lifecycle_metrics.json") for i in range(3)]
    for p in points:
        assert p.load_axis == "request_rate" and p.model_id is None
        assert p.metrics["request_throughput"] == BASE[arm][p.load]["request_throughput"]
        assert p.metrics["p99.9_tpot_ms"] == pytest.approx(BASE[arm][p.load]["tpot"]["p99.9"])
    stage = json.loads((I / "on" / "stage_0_lifecycle_metrics.json").read_text())
    assert stage["successes"]["latency"]["inter_token_latency"]["median"] == 0  # the trap is in the fixture


def test_an_inference_perf_run_gives_the_table_of_the_same_vllm_files(tmp_path):
    v_on, v_off = vllm_sweep(tmp_path, RATES, "request_rate", itl=False)
    want = table("--on", str(v_on), "--off", str(v_off))
    got = table("--on", str(I / "on"), "--off", str(I / "off"))
    assert got == want and got["load_axis"] == "request_rate"


def test_an_inference_perf_stage_driven_by_concurrency(tmp_path):
    stage = json.loads((I / "off" / "stage_1_lifecycle_metrics.json").read_text())
    stage["load_summary"].update(concurrency=16, requested_rate=None)
    (p,) = read_measurements([_write(tmp_path / "stage_0_lifecycle_metrics.json", stage)], arm="off")
    assert (p.load_axis, p.load) == ("concurrency", 16)
    with pytest.raises(CrossoverError) as exc:
        read_measurements([tmp_path], arm="off", load_axis="request_rate")
    assert_one_line_message(exc, "stage_0_lifecycle_metrics.json", "request_rate", "load_summary.concurrency")


# --------------------------------------------------------------------------- bad input: one line, exit 2

def _edited(obj: dict, path: str, value) -> dict:
    """obj with the value at a dotted path (ints index lists) set, or deleted when value is ...."""
    *head, last = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = obj
    for k in head:
        node = node[k]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return obj


@pytest.mark.parametrize("source, path, value, needles", [
    ("v0.7_off.json", "metadata.version", 3, ["metadata.version", "3", "1 (v0.5-v0.6) and 2 (v0.7+)"]),
    ("v0.4_off.json", "args", ..., ["unknown GuideLLM report layout", "benchmarks[0].run_stats"]),
    ("v0.7_off.json", "benchmarks", [], ["empty 'benchmarks'"]),
    ("v0.7_off.json", "benchmarks.1.metrics.output_tokens_per_second", ...,
     ["benchmarks[1]", "metrics.output_tokens_per_second.successful.mean"]),
    ("v0.7_off.json", "benchmarks.0.config.strategy", ..., ["benchmarks[0]", "config.strategy"]),
    ("v0.3_off.json", "benchmarks.2.args.strategy.streams", ..., ["benchmarks[2]", "args.strategy.streams"]),
    ("v0.7_off.json", "benchmarks.0.config.strategy.type_", "trace", ["trace replay", "no load level"]),
    ("v0.7_off.json", "benchmarks.0.config.strategy.streams", -4, ["config.strategy.streams", "> 0"]),
    ("v0.7_off.json", "benchmarks.0.metrics.inter_token_latency_ms.successful.median", "6.7",
     ["inter_token_latency_ms.successful.median", "must be a number"]),
    ("v0.7_off.json", "benchmarks.0.metrics.time_to_first_token_ms.successful", [1], ["distribution summary"]),
    ("v0.7_off.json", "benchmarks.0.type_", "generative_text", ["type_", "generative_benchmark"]),
])
def test_a_broken_guidellm_report_is_one_line(tmp_path, source, path, value, needles):
    f = _write(tmp_path / "report.json", _edited(json.loads((G / source).read_text()), path, value))
    r = run_cli("measured", "--on", str(f), "--off", str(G / "v0.7_off.json"))
    assert_one_line_error(r, str(f), *needles)


@pytest.mark.parametrize("text, needles", [
    ("benchmarks:\n  - type_: generative_benchmark\n    config: [unclosed\n", ["malformed YAML", "line"]),
    ("benchmarks: {}\n", ["YAML file that is no GuideLLM report"]),
    ("target: http://localhost:8000\nprofile: sweep\n", ["YAML file that is no GuideLLM report"]),
    ("benchmarks:\n" + "  - " * 1 + "[" * 200 + "\n", ["YAML"]),
    ("benchmarks:\n- a: 2025-13-45\n", ["YAML value that is no measurement"]),
])
def test_a_yaml_that_is_no_guidellm_report_is_one_line(tmp_path, text, needles):
    f = _write(tmp_path / "benchmarks.yaml", text)
    r = run_cli("measured", "--on", str(f), "--off", str(G / "v0.7_off.json"))
    assert_one_line_error(r, str(f), *needles)


@pytest.mark.parametrize("arm, tag, key, value, needles", [
    ("off", "concurrency1", "output_token_throughput", ..., ["output_token_throughput.avg"]),
    ("off", "concurrency1", "time_to_first_token.unit", "fortnights", ["time_to_first_token.unit", "'fortnights'"]),
    ("off", "concurrency1", "time_to_first_token.unit", ..., ["time_to_first_token.unit"]),
    ("off", "concurrency1", "output_token_throughput.unit", "tokens/fortnight", ["output_token_throughput.unit"]),
    ("off", "concurrency1", "input_config.loadgen.concurrency", None, ["cannot tell the load level", "AIPerf"]),
    ("on", "concurrency16", "run_info", ..., ["input_config.loadgen.concurrency", "is a list"]),
    ("off", "concurrency1", "inter_token_latency", 6.8, ["inter_token_latency", "metric block"]),
])
def test_a_broken_aiperf_export_is_one_line(tmp_path, arm, tag, key, value, needles):
    obj = json.loads((A / arm / tag / "profile_export_aiperf.json").read_text())
    f = _write(tmp_path / "profile_export_aiperf.json", _edited(obj, key, value))
    other = "--off" if arm == "on" else "--on"
    r = run_cli("measured", f"--{arm}", str(f), other, *map(str, _aiperf("on" if arm == "off" else "off")))
    assert_one_line_error(r, str(f), *needles)


@pytest.mark.parametrize("name, needles", [
    ("profile_export.jsonl", ["unknown format", "per-request", "profile_export_aiperf.json"]),
    ("profile_export_aiperf.csv", ["unknown format", "AIPerf", "no load level"]),
])
def test_the_aiperf_files_that_are_no_aggregate_say_which_to_read(name, needles):
    r = run_cli("measured", "--on", str(A / name), "--off", *map(str, _aiperf("off")))
    assert_one_line_error(r, str(A / name), *needles)


@pytest.mark.parametrize("key, value, needles", [
    ("successes.throughput.output_tokens_per_sec", ..., ["successes.throughput.output_tokens_per_sec"]),
    ("successes.throughput.output_tokens_per_sec", -3, ["negative"]),
    ("load_summary.requested_rate", ..., ["cannot tell the load level", "inference-perf"]),
    ("load_summary.requested_rate", 1e300, ["load_summary.requested_rate", "no load level"]),
    ("successes.latency", "fast", ["successes.latency", "an object"]),
    ("successes.latency.time_to_first_token.median", -0.5, ["median_ttft_ms", ">= 0"]),
])
def test_a_broken_inference_perf_stage_is_one_line(tmp_path, key, value, needles):
    obj = json.loads((I / "off" / "stage_0_lifecycle_metrics.json").read_text())
    f = _write(tmp_path / "stage_0_lifecycle_metrics.json", _edited(obj, key, value))
    r = run_cli("measured", "--off", str(f), "--on", str(I / "on"))
    assert_one_line_error(r, str(f), *needles)


@pytest.mark.parametrize("path", ["guidellm/v0.7_on.json", "aiperf/on/concurrency1", "inference_perf/on"])
def test_a_tool_file_under_files_needs_its_arm_in_one_line(path):
    """The tools' results carry no speculative-decoding fields: the arm is --on or --off."""
    r = run_cli("measured", "--files", str(M / path))
    assert_one_line_error(r, "cannot tell whether speculation was on", "--on or --off", "speculative-decoding")


def test_a_tool_file_under_load_axis_batch_is_one_line():
    r = run_cli("measured", "--on", str(G / "v0.7_on.json"), "--off", str(G / "v0.7_off.json"), "--load-axis", "batch")
    assert_one_line_error(r, "load_axis 'batch'", "GuideLLM")


# --------------------------------------------------------------------------- vLLM spec_decode_*, SGLang accept_length

def test_vllm_spec_decode_counters_alone_give_tau_rate_and_the_arm(tmp_path):
    """By key: a result with only the counters (no acceptance_length / rate keys) is the on arm,
    its tau 1 + accepted / drafts and its rate accepted / draft tokens."""
    obj = vllm_result("on", 16)
    obj.update(spec_decode_num_drafts=1000, spec_decode_draft_tokens=3000, spec_decode_accepted_tokens=1480)
    f = _write(tmp_path / "on.json", obj)
    (p,) = read_measurements([f])
    assert p.arm == "on" and p.acceptance_length == pytest.approx(2.48)
    assert p.acceptance_rate == pytest.approx(1480 / 3000)
    r = run_cli("measured", "--off", str(f), "--on", str(f))
    assert_one_line_error(r, "passed under --off", "spec_decode_")


def test_sglang_accept_length_wherever_present():
    line = {"backend": "sglang", "max_concurrency": 8, "output_throughput": 900.0, "total_output_tokens_retokenized": 1}
    # bench_serving without server_info: accept_length is null with speculation off
    assert sglang_arm({**line, "accept_length": 2.4})[0] == "on"
    assert sglang_acceptance("x", {**line, "accept_length": 2.4}) == 2.4
    assert sglang_arm({**line, "accept_length": None}) == (None, "")
    # PD disaggregation: the decode server's info, as bench_serving reads it
    pd = {**line, "server_info": {"decode": [{"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                                              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                                              "internal_states": [{"avg_spec_accept_length": 2.7}]}],
                                  "prefill": [{"speculative_algorithm": None}]}}
    assert sglang_arm(pd)[0] == "on" and sglang_acceptance("x", pd) == 2.7
    # bench_one_batch_server: acc_length (-1 without speculation), spec_accept_length
    assert sglang_arm({**line, "acc_length": -1})[0] == "off"
    assert sglang_acceptance("x", {**line, "acc_length": -1}) is None
    assert sglang_acceptance("x", {**line, "spec_accept_length": 3.1}) == 3.1


def test_sglang_pd_and_accept_length_lines_through_the_reader(tmp_path):
    base = json.loads((M / "sglang_runs.jsonl").read_text().splitlines()[0])
    info = base.pop("server_info")
    plain = {**base, "accept_length": 2.41}  # no server_info: the acceptance length says the arm
    pd = {**base, "accept_length": None, "server_info": {"decode": [info]}}
    f = _write(tmp_path / "runs.jsonl", json.dumps(plain) + "\n" + json.dumps(pd) + "\n")
    a, b = read_measurements([f])
    assert (a.arm, a.acceptance_length, a.k) == ("on", 2.41, None)
    assert (b.arm, b.acceptance_length, b.k) == ("on", 2.41, 3)
    r = run_cli("measured", "--off", str(f), "--on", str(M / "sglang_runs.jsonl"))
    assert_one_line_error(r, "passed under --off", "accept_length")


# --------------------------------------------------------------------------- any value anywhere: read or one line

def _leaves(obj, path=()):
    """Every (path, value) of a JSON document's leaves and containers, lists cut to their first item."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list) and obj:
        yield from _leaves(obj[0], (*path, 0))


_TOOL_FILES = [G / "v0.7_off.json", G / "v0.3_off.json", A / "on" / "concurrency16" / "profile_export_aiperf.json",
               I / "on" / "stage_1_lifecycle_metrics.json"]
_DOCS = {f: json.loads(f.read_text()) for f in _TOOL_FILES}
_PATHS = {f: [p for p, _ in _leaves(doc) if p] for f, doc in _DOCS.items()}
_HOSTILE = st.one_of(st.sampled_from([None, "", "12", "inf", [], {}, [1, 2], {"a": 1}, True, -1, 0, 1e308, -1e308,
                                      10**400, float("nan"), float("inf"), 5e-324, "trace", "ns", "concurrent"]),
                     st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30))


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_any_value_anywhere_in_a_tool_file_is_read_or_one_line(tmp_path_factory, data):
    f = data.draw(st.sampled_from(_TOOL_FILES))
    doc = json.loads(json.dumps(_DOCS[f]))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_PATHS[f]))
        try:
            _edited(doc, ".".join(map(str, path)), data.draw(_HOSTILE))
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced a container on the way
            pass
    out = tmp_path_factory.mktemp("any") / f.name
    out.write_text(json.dumps(doc))  # NaN / Infinity as Python writes them
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            points = read_measurements([out], arm="on")
        except CrossoverError as exc:
            assert_one_line_message(exc)
            return
    for p in points:
        assert math.isfinite(p.load) and p.load > 0 and math.isfinite(p.output_throughput)
        assert all(math.isfinite(v) for v in p.metrics.values())
