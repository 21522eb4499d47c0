"""`crossover simulate` and the prefill flags of `crossover predict`, through the command (in-process)."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import assert_one_line_error, run_cli

SMALL = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--num-prompts", "60"]


@pytest.fixture(scope="module")
def conc_json():
    r = run_cli("simulate", "--workload", "random-1024-128", "--concurrency", "1,4,16", *SMALL, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_simulate_json_contract(conc_json):
    d = conc_json
    assert d["load_axis"] == "concurrency"
    assert "crossover_concurrency" in d and d["crossover_side"] in ("on", "off", None)
    assert [lv["concurrency"] for lv in d["levels"]] == [1, 4, 16]
    for lv in d["levels"]:
        for arm in ("off", "on"):
            m = lv[arm]
            for key in ("request_throughput", "output_throughput", "total_token_throughput", "mean_ttft_ms",
                        "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
                        "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms",
                        "p99_e2el_ms"):
                assert isinstance(m[key], (int, float)), key
            assert m["p99_tpot_ms"] >= m["median_tpot_ms"]
        assert lv["speedup"] == pytest.approx(lv["on"]["output_throughput"] / lv["off"]["output_throughput"],
                                              rel=1e-3)
    assert d["inputs"]["workload"] == "random-1024-128" and d["inputs"]["prompt_len"] == 1024
    # latency crossings: off/on of each percentile, per level, from the levels' own metrics
    lat = d["latency"]["p99_tpot_ms"]
    assert lat["ratios"] == pytest.approx([lv["off"]["p99_tpot_ms"] / lv["on"]["p99_tpot_ms"] for lv in d["levels"]],
                                          abs=1e-3)
    assert (lat["crossover"] is None) == (not lat["bracketed"]) and (lat["side"] is None) == lat["bracketed"]


def test_simulate_table_rate_csv_and_plot(tmp_path):
    csv_path, png = tmp_path / "out.csv", tmp_path / "fig.png"
    runs = [
        ("simulate", "--workload", "gsm8k", "--concurrency", "1,8", *SMALL),
        ("simulate", "--workload", "gsm8k", "--request-rate", "1,4", *SMALL, "--json", "--burstiness", "0.5"),
        ("simulate", "--workload", "gsm8k", "--concurrency", "2,8", *SMALL, "--csv", str(csv_path), "--plot", str(png)),
    ]
    table, rate, files = [run_cli(*a) for a in runs]
    assert table.returncode == 0, table.stderr
    assert "output tok/s" in table.stdout and "crossover" in table.stdout
    assert rate.returncode == 0, rate.stderr
    d = json.loads(rate.stdout)
    assert d["load_axis"] == "request_rate" and "crossover_request_rate" in d
    assert [lv["request_rate"] for lv in d["levels"]] == [1.0, 4.0]
    assert files.returncode == 0, files.stderr
    rows = list(csv.DictReader(open(csv_path)))
    assert [(r["concurrency"], r["arm"]) for r in rows] == [("2", "off"), ("2", "on"), ("8", "off"), ("8", "on")]
    assert float(rows[0]["output_throughput"]) > 0
    assert png.stat().st_size > 10_000


BAD = [
    ("unknown-workload", ["--workload", "sharegtp", "--concurrency", "4"], "unknown workload"),
    ("rate-zero", ["--workload", "gsm8k", "--request-rate", "0"], "--request-rate"),
    ("rate-negative", ["--workload", "gsm8k", "--request-rate", "-2"], "--request-rate"),
    ("conc-too-big", ["--workload", "long-context", "--concurrency", "4096"], "does not fit"),
    ("conc-fraction", ["--workload", "gsm8k", "--concurrency", "2.5"], "--concurrency"),
    ("num-prompts-0", ["--workload", "gsm8k", "--concurrency", "4", "--num-prompts", "0"], "--num-prompts"),
    ("no-load", ["--workload", "gsm8k"], "--concurrency"),
    ("both-loads", ["--workload", "gsm8k", "--concurrency", "4", "--request-rate", "1"], "not allowed"),
    ("bad-plot-suffix", ["--workload", "gsm8k", "--concurrency", "4", "--plot", "fig.txt"], ".png"),
]


@pytest.mark.parametrize("name,args,needle", BAD, ids=[b[0] for b in BAD])
def test_simulate_bad_input_is_one_line_exit_2(name, args, needle):
    r = run_cli("simulate", *args, "--model", "llama-3.1-8b", "--num-prompts", args[-1] if name == "num-prompts-0"
                else "20")
    assert_one_line_error(r, needle)


def test_predict_with_prompt_and_output_lengths():
    r = run_cli("predict", "--model", "llama-3.1-8b", "--prompt-len", "1024", "--output-len", "128", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"]["prompt_len"] == 1024 and d["inputs"]["context"] == 1024 + 64
    plain = json.loads(run_cli("predict", "--model", "llama-3.1-8b", "--context", "1088", "--json").stdout)
    # the prefill share lowers the speedup (Amdahl + prefill uses the idle FLOPs) at every batch whose
    # pure verify step keeps its CUDA graph (k = 3: 4 tokens a sequence, vLLM's graphs to 512 tokens);
    # beyond it the pure on arm runs its attention outside the graph, which the mixed steps (a prompt
    # chunk in nearly all of them) do in both arms anyway
    kept = [(m, p) for m, p in zip(d["points"], plain["points"]) if m["batch"] * 4 <= 512]
    assert len(kept) >= 10
    for mixed, pure in kept:
        assert mixed["speedup"] < pure["speedup"]
    beyond = [(m, p) for m, p in zip(d["points"], plain["points"]) if m["batch"] * 4 > 512]
    assert beyond and all(p["speedup"] < kept[-1][1]["speedup"] for _, p in beyond)  # the pure arm's step down
    bad = run_cli("predict", "--prompt-len", "1024")
    assert_one_line_error(bad, "--output-len")
