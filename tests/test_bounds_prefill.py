"""Issue 22 item 5: the physics check gives two bounds, named as such: decode only, and with the
sweep's prefill share (from the files' token counts or --prompt-len / --output-len); a point above
the second beats physics unless prefix caching is on.

Hand numbers for Llama-3.1-8B (bf16) on one H100 SXM (989 TFLOP/s dense bf16, 3.35 TB/s), random
1024 in / 128 out, 128 requests in flight without speculation:
- non-embedding parameters 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) = 6.98e9;
- in steady state one prompt is prefilled per step (128 requests x 1 token / 128 tokens each);
- a step then runs >= 1024 prompt tokens through the layers: >= 2 x 6.98e9 x 1024 FLOP = 14.3 TFLOP,
  >= 14.45 ms, so at most 128 / 14.45 ms = 8,857 tokens/s with the prefill share;
- and <= bytes / bandwidth + FLOPs / peak: 16.06 GB of weights + 127 x 1024 x 128 KiB of KV + 1024 x
  128 KiB written = 33.2 GB (9.9 ms) and 1151 tokens x 13.96 GFLOP + 128 x 1.05 GFLOP of logits +
  ~0.34 TFLOP of attention = 16.55 TFLOP (16.7 ms): at least 128 / 26.6 ms = 4,812 tokens/s;
- pure decode of 128 sequences at 1024 tokens takes <= 9.93 ms of bytes + 128 x 13.96 GFLOP / 989
  TFLOP/s = 1.8 ms: the decode-only bound is at least 128 / 11.7 ms = 10,900 tokens/s.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error, run_cli

from crossover.analysis.bounds import BoundCheck, BoundChecks, check

MEASURED = FIXTURES / "measured"
MODEL = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3"]


def _sweep_csv(tmp_path, off128: float, with_tokens: bool = True):
    """Two levels, 1 and 128, both arms; with the token totals of 1024 / 128 per request or without."""
    head = "arm,concurrency,output_throughput,acceptance_length"
    head += ",total_input_tokens,total_output_tokens,completed" if with_tokens else ""
    rows = [("off", 1, 140, "", 10), ("on", 1, 280, 2.6, 10), ("off", 128, off128, "", 1280), ("on", 128, 4000, 2.4, 1280)]
    f = tmp_path / "sweep.csv"
    f.write_text("\n".join([head] + [f"{arm},{c},{t},{tau}" + (f",{1024 * n},{128 * n},{n}" if with_tokens else "")
                                     for arm, c, t, tau, n in rows]) + "\n")
    return f


def test_the_bound_with_the_prefill_share_lies_where_the_hand_numbers_put_it(tmp_path):
    d = json.loads(run_cli("measured", "--files", str(_sweep_csv(tmp_path, 4000.0)), *MODEL, "--json").stdout)
    phys = {(p["arm"], p["level"]): p for p in d["physics"]}
    off = phys["off", 128.0]
    assert 4812 <= off["bound_with_prefill"] <= 8857
    assert off["bound"] >= 10_900  # decode only: the bound the issue found too generous (13,109)
    assert d["physics_bounds"]["with_prefill"] == {"prompt_len": 1024.0, "output_len": 128.0}
    for p in d["physics"]:  # the prefill share only adds work
        assert p["bound_with_prefill"] <= p["bound"] * (1 + 1e-9)
        assert p["fraction_of_bound_with_prefill"] == pytest.approx(p["measured"] / p["bound_with_prefill"], rel=1e-3)


def test_a_point_between_the_bounds_beats_physics_unless_prefix_caching_is_on(tmp_path):
    # 9,500 tokens/s off at 128: inside the decode-only bound (>= 10,900), beyond the prefill one (<= 8,857)
    f = _sweep_csv(tmp_path, 9500.0)
    d = json.loads(run_cli("measured", "--files", str(f), *MODEL, "--json").stdout)
    off = next(p for p in d["physics"] if p["arm"] == "off" and p["level"] == 128)
    assert off["beats_physics"] is False and off["beats_physics_unless_prefix_caching"] is True
    assert not any(p["beats_physics_unless_prefix_caching"] for p in d["physics"] if p is not off)
    text = run_cli("measured", "--files", str(f), *MODEL).stdout
    row = next(line for line in text.splitlines() if line.strip().startswith("off      128:"))
    assert row.endswith("BEATS PHYSICS unless prefix caching is on")
    assert "decode only: pure decode at the prompt length; with prefill: 1024 prompt tokens prefilled per 128 " \
           "output tokens" in text
    assert_one_line_error(run_cli("measured", "--files", str(f), *MODEL, "--strict"), "speed of light", "off at 128")


def test_the_lengths_come_from_the_files_or_the_flags(tmp_path):
    bare = _sweep_csv(tmp_path, 4000.0, with_tokens=False)
    d = json.loads(run_cli("measured", "--files", str(bare), *MODEL, "--json").stdout)
    assert d["physics_bounds"]["with_prefill"] is None
    assert all(p["bound_with_prefill"] is None for p in d["physics"])
    text = run_cli("measured", "--files", str(bare), *MODEL).stdout
    assert "(decode only: the files record no token counts; --prompt-len and --output-len add the bound" in text
    given = json.loads(run_cli("measured", "--files", str(bare), *MODEL, "--prompt-len", "1024", "--output-len", "128",
                               "--json").stdout)
    assert given["physics_bounds"]["with_prefill"] == {"prompt_len": 1024.0, "output_len": 128.0}
    # the vLLM result files record total_input_tokens / total_output_tokens / completed: 1024 / 128
    v = json.loads(run_cli("measured", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"),
                           *MODEL, "--json").stdout)
    assert v["physics_bounds"]["with_prefill"] == {"prompt_len": 1024.0, "output_len": 128.0}
    # the flags beat the files: a shorter prompt, a smaller prefill share, a looser bound
    short = json.loads(run_cli("measured", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"),
                               *MODEL, "--prompt-len", "128", "--output-len", "128", "--json").stdout)
    assert short["physics"][-2]["bound_with_prefill"] > v["physics"][-2]["bound_with_prefill"]
    assert_one_line_error(run_cli("measured", "--files", str(bare), *MODEL, "--prompt-len", "1024"), "--output-len")


def test_bound_checks_count_a_point_beyond_either_bound_as_impossible():
    checks = BoundChecks.of([BoundCheck("off", 1, 100.0, 200.0, "a", 1, 150.0),  # within both
                             BoundCheck("off", 8, 180.0, 200.0, "b", 8, 150.0),  # between: prefix caching
                             BoundCheck("on", 8, 250.0, 200.0, "c", 8, 150.0),  # beyond the decode-only bound
                             BoundCheck("on", 1, 180.0, 200.0, "d", 1, None)])  # no lengths: decode only
    assert checks.beats.tolist() == [False, False, True, False]
    assert checks.beats_prefill.tolist() == [False, True, False, False]
    assert [c.source for c in checks.beaten()] == ["c"]
    assert [c.source for c in checks.beaten(prefill=True)] == ["b", "c"]
    assert checks[1].beats_prefill and not checks[1].beats_physics and checks[3].bound_prefill is None


def test_check_on_points_and_on_a_table_give_the_same_prefill_bounds():
    from crossover.api.build import scenario
    from crossover.api.sweeps import read_arms

    table = read_arms(on=[MEASURED / "vllm_on"], off=[MEASURED / "vllm_off"])
    sc = scenario("llama-3.1-8b", "h100-sxm", method="eagle3", tau=2.5, prompt_len=1024, output_len=128)
    a, b = check(sc, table), check(sc, list(table))
    assert np.allclose(a.bound_prefill, b.bound_prefill) and not np.isnan(a.bound_prefill).any()
