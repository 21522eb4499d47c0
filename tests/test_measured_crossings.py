"""Crossings of measured sweeps (issue 12): every sign change, no crossover for equal arms, levels sorted
by load, and the physics check beside them (the model from the files, --strict)."""

import json

import pytest

from conftest import FIXTURES, assert_one_line_error, run_cli
from crossover.analysis.crossings import level_crossings

HERE = FIXTURES / "edge_sweeps"


def test_identical_arms_have_no_crossover():
    r = run_cli("measured", "--files", str(HERE / "identical_arms.csv"))
    assert r.returncode == 0, r.stderr
    assert "crosses at" not in r.stdout
    assert "equal within noise" in r.stdout
    d = json.loads(run_cli("measured", "--files", str(HERE / "identical_arms.csv"), "--json").stdout)
    assert d["crossover"] is None and d["bracketed"] is False and d["crossings"] == [] and d["side"] == "equal"
    for lat in d["latency"].values():
        assert lat["crossover"] is None and lat["side"] == "equal" and lat["crossings"] == []


def test_every_sign_change_is_listed_and_the_crossover_is_the_first_sustained_one():
    d = json.loads(run_cli("measured", "--files", str(HERE / "zigzag.csv"), "--json").stdout)
    assert [p["level"] for p in d["points"]] == [1, 4, 16, 64, 128]
    assert [c["direction"] for c in d["crossings"]] == ["down", "up", "down"]
    lo = [c["level"] for c in d["crossings"]]
    assert 1 < lo[0] < 4 < lo[1] < 16 < lo[2] < 64
    assert d["crossover"] == pytest.approx(lo[2])  # 0.9 at 4 is followed by 1.2: not sustained
    text = run_cli("measured", "--files", str(HERE / "zigzag.csv")).stdout
    assert "changes side 3 times" in text


def test_level_crossings_ignore_ratios_within_noise_and_sort_by_load():
    lc = level_crossings([32, 1, 8], [0.8, 1.3, 1.004])
    assert lc.crossover == pytest.approx(lc.crossings[0][0]) and 1 < lc.crossover < 32
    assert lc.crossings[0][1] == "down" and len(lc.crossings) == 1
    assert level_crossings([1, 2, 4], [1.0, 1.0, 1.0]).side == "equal"
    assert level_crossings([1, 2, 4], [1.0, 1.2, 1.3]).side == "on"
    single = level_crossings([1, 2, 4, 8], [1.2, 0.8, 1.2, 1.3])
    assert [d for _, d in single.crossings] == ["down", "up"] and single.crossover == single.crossings[1][0]


def test_physics_rows_come_out_by_load():
    r = run_cli("measured", "--files", str(HERE / "zigzag.csv"), "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["physics"]
    assert [(c["level"], c["arm"]) for c in rows] == sorted(((c["level"], c["arm"]) for c in rows),
                                                             key=lambda t: (t[0], t[1] != "off"))


def test_the_physics_check_takes_the_model_from_the_files():
    r = run_cli("measured", "--files", str(HERE / "impossible.csv"), "--hardware", "h100-sxm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [c["beats_physics"] for c in d["physics"]] == [False, True, False, False]
    assert d["crossover_on_impossible_point"] is True
    assert d["predicted_crossover"] is not None or "predicted_crossover" in d  # the model ran beside it


def test_without_hardware_the_check_is_skipped_in_one_line_naming_the_flag():
    r = run_cli("measured", "--files", str(HERE / "impossible.csv"))
    assert r.returncode == 0
    assert r.stderr.count("\n") == 1 and "skipped" in r.stderr and "--hardware" in r.stderr
    r = run_cli("measured", "--files", str(HERE / "zigzag.csv"))
    assert r.stderr.count("\n") == 1 and "skipped" in r.stderr and "--model" in r.stderr


def test_strict_fails_on_a_point_beyond_the_speed_of_light_and_the_headline_says_so():
    r = run_cli("measured", "--files", str(HERE / "impossible.csv"), "--hardware", "h100-sxm")
    assert r.returncode == 0
    assert "rests on a physically impossible point" in r.stdout and "BEATS PHYSICS" in r.stdout
    r = run_cli("measured", "--files", str(HERE / "impossible.csv"), "--hardware", "h100-sxm", "--strict")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "error: 1 measured point(s) beyond the speed of light" in r.stderr.strip().splitlines()[-1]
    ok = run_cli("measured", "--files", str(HERE / "zigzag.csv"), "--model", "llama-3.1-8b", "--hardware",
                 "h100-sxm", "--strict")
    assert ok.returncode == 0, ok.stderr


def test_files_naming_two_models_are_an_error_without_model():
    r = run_cli("measured", "--files", str(HERE / "two_models.csv"), "--hardware", "h100-sxm")
    assert_one_line_error(r, "--model")
    assert run_cli("measured", "--files", str(HERE / "two_models.csv"), "--model", "llama-3.1-8b", "--hardware",
                   "h100-sxm").returncode == 0


def _reference_crossings(loads, ratios, rtol):
    """The plain loop over sorted levels that level_crossings' array form replaces (same arithmetic)."""
    import math

    pairs = sorted(zip((float(x) for x in loads), (float(r) for r in ratios)), key=lambda t: t[0])
    sided = [(x, r, s) for x, r in pairs if math.isfinite(r) for s in [(r - 1 > rtol) - (r - 1 < -rtol)] if s != 0]
    out, sustained = [], []
    for i in range(1, len(sided)):
        (xa, ra, sa), (xb, rb, sb) = sided[i - 1], sided[i]
        if sa != sb:
            lx = math.log(xa) + (math.log(xb) - math.log(xa)) * (ra - 1) / (ra - rb)
            out.append((math.exp(lx), "down" if sa > 0 else "up"))
            sustained.append(i + 1 >= len(sided) or sided[i + 1][2] == sb)
    cross = next((c[0] for c, ok in zip(out, sustained) if ok), None)
    side = None if out else ("equal" if not sided else ("on" if sided[0][2] > 0 else "off"))
    return tuple(out), cross, side


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 3.5, 100.0]),
                          st.one_of(st.floats(0.5, 1.5), st.sampled_from([1.0, 0.995, 1.01, float("nan"), float("inf")]))),
                max_size=12),
       st.sampled_from([0.0, 0.01]))
def test_level_crossings_equal_the_plain_loop(levels, rtol):
    """Ties in load keep their order, non-finite ratios drop, values within rtol of 1 take no side:
    the array form gives exactly the loop's crossings, crossover and side."""
    from crossover.analysis.crossings import level_crossings

    loads, ratios = [x for x, _ in levels], [r for _, r in levels]
    got = level_crossings(loads, ratios, rtol)
    assert (got.crossings, got.crossover, got.side) == _reference_crossings(loads, ratios, rtol)


def test_strict_failing_says_its_one_error_line_and_no_notes_before_it(tmp_path):
    """The fuzz campaign: SGLang bench_serving results (whose reading prints notes: the method and the
    engine profile taken from the files) with points beyond the speed of light on an L4, `--strict`:
    exit 2 used to come with the two notes and the error on stderr. Now the error line alone; the
    output (stdout) still shows the physics check it points to."""
    base = {"backend": "sglang-oai", "dataset_name": "random", "request_rate": float("inf"), "max_concurrency": 32,
            "random_input_len": 1024, "random_output_len": 128, "duration": 20.9, "completed": 320,
            "total_input_tokens": 327680, "total_output_tokens": 40960, "mean_tpot_ms": 14.96,
            "median_tpot_ms": 14.9, "mean_e2e_latency_ms": 1990.2}
    on = {**base, "output_throughput": 1959.8, "accept_length": 2.41,
          "server_info": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                          "speculative_num_draft_tokens": 4}}
    off = {**base, "output_throughput": 1398.3, "accept_length": None,
           "server_info": {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 1, "speculative_algorithm": None}}
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps(on) + "\n" + json.dumps(off) + "\n")
    args = ["measured", "--files", str(f), "--hardware", "l4", "--model", "llama-3.1-8b", "--tp", "1"]
    plain = run_cli(*args)
    assert plain.returncode == 0 and "note: engine profile sglang" in plain.stderr, plain.stderr
    r = run_cli(*args, "--strict")
    assert_one_line_error(r, "beyond the speed of light", "--strict")
    assert "BEATS PHYSICS" in r.stdout or "beats" in r.stdout.lower()
