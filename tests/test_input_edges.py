"""Input edges of issue 23's fuzz campaign: what gave a traceback or passed with exit 0, one focused
test per finding, and hypothesis properties per class so each stays covered - huge values (beyond
int64, 1e30, 1e300) and non-finite results of finite inputs (an overflow, NaN counters) are one
line (a CrossoverError: InputError or FileError), never a traceback nor a number echoed as if valid."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from conftest import assert_one_line_error, assert_one_line_message, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crossover.errors import CrossoverError

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Finite floats from the denormals to the largest double, either sign, and integers past int64.
HUGE_INTS = st.one_of(st.integers(2**31, 2**63 + 10), st.integers(2**63, 10**400))
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
ANY_FLOATS = st.floats(allow_nan=True, allow_infinity=True)


# --------------------------------------------------------------------------- workloads (specs/workload.py)

SIMULATE = ("simulate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--concurrency", "1",
            "--num-prompts", "4")


def _workload(tmp_path, prompt: str, name: str = "w") -> str:
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"name: {name}\nprompt_len: {prompt}\noutput_len: {{dist: fixed, value: 10}}\n")
    return str(f)


@pytest.mark.parametrize("value", ["100000000000000000000000", str(2**63), str(10**400)])
def test_an_empirical_length_beyond_int64_is_one_line(tmp_path, value):
    # np.asarray(values, dtype=int64) raised OverflowError: a traceback
    r = run_cli(*SIMULATE, "--workload", _workload(tmp_path, f"{{dist: empirical, values: [100, {value}]}}"))
    assert_one_line_error(r, "prompt_len.empirical.values", "less than or equal to 1000000000")


@pytest.mark.parametrize("value", ["99999999999999999999999999", str(2**63), "1" + "0" * 300])
def test_a_lengths_file_value_beyond_int64_is_one_line(tmp_path, value):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text(f"100\n{value}\n")
    r = run_cli(*SIMULATE, "--workload", _workload(tmp_path, "{dist: empirical, file: lengths.txt}"))
    assert_one_line_error(r, str(lengths), "no request length")


@pytest.mark.parametrize("sd", ["1.0e300", "1e300", "1.0e10", ".inf"])
def test_a_lognormal_of_huge_sd_is_one_line(tmp_path, sd):
    # (sd / mean) ** 2 raised OverflowError: a traceback
    r = run_cli(*SIMULATE, "--workload", _workload(tmp_path, f"{{dist: lognormal, mean: 100, sd: {sd}}}"))
    assert_one_line_error(r, "prompt_len.lognormal.sd")


@pytest.mark.parametrize("field", ["value", "min", "max"])
def test_other_lengths_beyond_the_bound_are_one_line(tmp_path, field):
    dist = {"value": "{dist: fixed, value: 10000000000000000000000}",
            "min": "{dist: fixed, value: 10, min: 10000000000000000000000}",
            "max": "{dist: uniform, low: 1, high: 10, max: 10000000000000000000000}"}[field]
    r = run_cli(*SIMULATE, "--workload", _workload(tmp_path, dist))
    assert_one_line_error(r, f"prompt_len.{'uniform' if field == 'max' else 'fixed'}.{field}")


def _sample_quietly(dist, n: int = 200) -> np.ndarray:
    """dist.sample with any warning or floating-point overflow / invalid operation an error (an
    underflow to a denormal or 0 is harmless, and numpy ignores it by default)."""
    with warnings.catch_warnings(), np.errstate(all="raise", under="ignore"):
        warnings.simplefilter("error")
        return dist.sample(np.random.default_rng(0), n)


@PROPERTY
@given(mean=st.floats(min_value=5e-324, max_value=1e9), sd=st.floats(min_value=5e-324, max_value=1e9),
       lo=st.integers(1, 1000), width=st.integers(0, 10**6))
def test_a_lognormal_of_any_valid_mean_and_sd_samples_finite_lengths_in_range(mean, sd, lo, width):
    from crossover.specs.workload import LogNormal

    d = LogNormal(dist="lognormal", mean=mean, sd=sd, min=lo, max=lo + width)
    x = _sample_quietly(d)
    assert x.dtype == np.int64 and ((x >= lo) & (x <= lo + width)).all()


@PROPERTY
@given(field=st.sampled_from(["mean", "sd"]), value=st.one_of(st.floats(min_value=1.0000001e9), ANY_FLOATS))
def test_a_lognormal_mean_or_sd_out_of_range_is_refused(tmp_path, field, value):
    from crossover.specs.workload import MAX_LENGTH, load_workload

    ok = math.isfinite(value) and 0 < value <= MAX_LENGTH
    values = {"mean": 100.0, "sd": 30.0, field: value}
    shown = {v: (".nan" if v != v else ".inf" if v == math.inf else "-.inf" if v == -math.inf else repr(v))
             for v in values.values()}
    path = _workload(tmp_path, f"{{dist: lognormal, mean: {shown[values['mean']]}, sd: {shown[values['sd']]}}}")
    if ok:
        wl, base = load_workload(path)
        assert np.isfinite(wl.means(base=base, samples=200)).all()
        return
    with pytest.raises(CrossoverError) as e:
        load_workload(path)
    assert_one_line_message(e, f"prompt_len.lognormal.{field}")


@PROPERTY
@given(values=st.lists(st.one_of(st.integers(1, 10**9), HUGE_INTS, st.integers(max_value=0)), min_size=1, max_size=5),
       as_file=st.booleans())
def test_empirical_lengths_are_held_or_refused_in_one_line(tmp_path, values, as_file):
    from crossover.specs.workload import MAX_LENGTH, load_workload

    if as_file:
        (tmp_path / "lengths.txt").write_text("\n".join(map(str, values)))
        dist = "{dist: empirical, file: lengths.txt}"
    else:
        dist = f"{{dist: empirical, values: [{', '.join(map(str, values))}]}}"
    path = _workload(tmp_path, dist)
    ok = all(1 <= v <= MAX_LENGTH for v in values)
    try:
        wl, base = load_workload(path)
        with warnings.catch_warnings(), np.errstate(all="raise", under="ignore"):
            warnings.simplefilter("error")
            p, o = wl.sample(np.random.default_rng(0), 50, base)
    except CrossoverError as exc:
        assert not ok, exc
        assert_one_line_message(exc)
        return
    assert ok and p.dtype == np.int64 and set(p.tolist()) <= set(values)


# --------------------------------------------------------------------------- result files (measurements/fields.py)

import json  # noqa: E402

from conftest import FIXTURES  # noqa: E402
from json_contract import strict_loads  # noqa: E402

MEASURED = FIXTURES / "measured"
VLLM_ON = MEASURED / "vllm_on" / "openai-infqps-concurrency16-Llama-3.1-8B-Instruct-20260301-111600.json"
VLLM_OFF = MEASURED / "vllm_off"


def _vllm_on(tmp_path, name: str = "on.json", **changes) -> str:
    obj = json.loads(VLLM_ON.read_text())
    obj.update(changes)
    f = tmp_path / name
    f.write_text(json.dumps(obj))
    return str(f)


@pytest.mark.parametrize("key, value, named", [
    ("num_speculative_tokens", 1e30, "'num_speculative_tokens'"),
    ("num_speculative_tokens", 10**30, "'num_speculative_tokens'"),
    ("num_speculative_tokens", "1" + "0" * 30, "'num_speculative_tokens'"),
    ("speculative_config", {"num_speculative_tokens": 1e30}, "speculative_config.num_speculative_tokens"),
    ("speculative_config.num_speculative_tokens", 2**63, "speculative_config.num_speculative_tokens"),
])
def test_num_speculative_tokens_1e30_in_a_vllm_result_is_one_line(tmp_path, key, value, named):
    # int(1e30) went into the int64 k column: OverflowError, a traceback
    r = run_cli("measured", "--on", _vllm_on(tmp_path, **{key: value}), "--off", str(VLLM_OFF))
    assert_one_line_error(r, named, "no engine drafts more than 1024")


def test_per_position_rates_of_more_positions_than_any_engine_drafts_are_one_line(tmp_path):
    f = _vllm_on(tmp_path, spec_decode_per_position_acceptance_rates=[0.5] * 5000)
    r = run_cli("measured", "--on", f, "--off", str(VLLM_OFF))
    assert_one_line_error(r, "spec_decode_per_position_acceptance_rates", "5000 positions")


def test_an_sglang_draft_token_count_past_int64_is_one_line(tmp_path):
    line = json.loads((MEASURED / "sglang_runs.jsonl").read_text().splitlines()[-1])
    line["server_info"].update(speculative_algorithm="EAGLE", speculative_eagle_topk=1,
                               speculative_num_draft_tokens=10**30)
    f = tmp_path / "sglang.jsonl"
    f.write_text(json.dumps(line) + "\n")
    r = run_cli("measured", "--files", str(f))
    assert_one_line_error(r, "server_info.speculative_num_draft_tokens")


@pytest.mark.parametrize("key", ["output_throughput", "max_concurrency", "mean_tpot_ms", "spec_decode_num_drafts",
                                 "some_counter"])
def test_an_integer_past_the_largest_double_is_one_line_or_not_a_metric(tmp_path, key):
    # float(10**400) raised OverflowError: a traceback
    r = run_cli("measured", "--on", _vllm_on(tmp_path, **{key: 10**400}), "--off", str(VLLM_OFF), "--json")
    if key == "some_counter":  # not a known key: not finite, so not a metric
        assert r.returncode == 0, r.stderr
        assert "some_counter" not in r.stdout
    else:
        assert_one_line_error(r, key)


def test_an_integer_of_thousands_of_digits_is_one_line(tmp_path):
    f = tmp_path / "on.json"
    f.write_text(VLLM_ON.read_text().replace('"max_concurrency": 16', '"max_concurrency": ' + "9" * 5000))
    r = run_cli("measured", "--on", str(f), "--off", str(VLLM_OFF))
    assert_one_line_error(r, str(f), "digits")


# Keys of a vLLM result a hostile value goes into (each read by the reader, or copied as a metric).
RESULT_KEYS = ["output_throughput", "max_concurrency", "request_rate", "duration", "completed", "num_prompts",
               "total_input_tokens", "total_output_tokens", "mean_tpot_ms", "p99_tpot_ms", "mean_e2el_ms",
               "max_concurrent_requests", "spec_decode_acceptance_length", "spec_decode_acceptance_rate",
               "spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
               "num_speculative_tokens", "latencies", "spec_decode_per_position_acceptance_rates", "other_metric"]
HOSTILE = st.one_of(FLOATS, ANY_FLOATS, HUGE_INTS, st.integers(-(2**70), 2**70), st.sampled_from(
    [0, -1, 1e-310, 5e-324, 1e300, -1e300, 1.7e308, 10**400, "1" + "0" * 30, "inf", "nan"]))


@PROPERTY
@given(changes=st.dictionaries(st.sampled_from(RESULT_KEYS), st.one_of(HOSTILE, st.lists(HOSTILE, max_size=4)),
                               min_size=1, max_size=4))
def test_a_vllm_result_of_hostile_numbers_is_read_or_refused_in_one_line(tmp_path, changes):
    from crossover.measurements import read_measurements

    if "max_concurrency" in changes:
        changes.pop("max_concurrent_requests", None)  # a load must be left to read
    f = _vllm_on(tmp_path, **changes)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            points = read_measurements([f], arm="on")
    except CrossoverError as exc:
        assert_one_line_message(exc)
        return
    for p in points:
        assert math.isfinite(p.load) and p.load > 0 and math.isfinite(p.output_throughput)
        assert p.k is None or 0 <= p.k <= 1024
        assert p.acceptance_length is None or 1 <= p.acceptance_length < math.inf
        assert all(math.isfinite(v) for v in p.metrics.values())
    r = run_cli("measured", "--on", f, "--off", str(VLLM_OFF), "--json")
    if r.returncode == 0:
        strict_loads(r.stdout)
    else:
        assert_one_line_error(r)


@pytest.mark.parametrize("accepted, drafts", [(1e308, 1e-300), (1.7e308, 1e-10)])
def test_an_acceptance_length_that_overflows_from_finite_counters_is_one_line(tmp_path, accepted, drafts):
    # 1 + accepted / drafts was inf: "on_acceptance_length": Infinity in --json, exit 0
    f = _vllm_on(tmp_path, spec_decode_acceptance_length=None, spec_decode_accepted_tokens=accepted,
                 spec_decode_num_drafts=drafts)
    r = run_cli("measured", "--on", f, "--off", str(VLLM_OFF), "--json")
    assert_one_line_error(r, "spec_decode_accepted_tokens / spec_decode_num_drafts")


@PROPERTY
@given(accepted=st.one_of(FLOATS, HUGE_INTS), drafts=st.one_of(FLOATS, HUGE_INTS),
       drafted=st.one_of(st.none(), FLOATS, HUGE_INTS))
def test_acceptance_from_any_finite_counters_is_finite_or_one_line(tmp_path, accepted, drafts, drafted):
    from crossover.measurements import read_measurements

    f = _vllm_on(tmp_path, spec_decode_acceptance_length=None, spec_decode_acceptance_rate=None,
                 spec_decode_accepted_tokens=accepted, spec_decode_num_drafts=drafts,
                 spec_decode_draft_tokens=drafted)
    try:
        (p,) = read_measurements([f], arm="on")
    except CrossoverError as exc:
        assert_one_line_message(exc)
        return
    assert p.acceptance_length is None or 1 <= p.acceptance_length < math.inf
    assert p.acceptance_rate is None or 0 <= p.acceptance_rate <= 1


# --------------------------------------------------------------------------- unreadable folders (measurements/readers.py)

import os  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402


def _refused(monkeypatch, method: str, folder: pathlib.Path) -> None:
    """Path.<method> raises PermissionError in or on `folder`, as the kernel does for a folder of
    permissions 000 to a user who is not root (the tests may run as root, who reads anything)."""
    real = getattr(pathlib.Path, method)

    def refuse(self, *args, **kwargs):
        if self == folder or self.parent == folder:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, method, refuse)


def test_an_unreadable_folder_given_as_on_is_one_line(tmp_path, monkeypatch):
    # permissions 000: path.iterdir() raised PermissionError, a traceback
    on = tmp_path / "on"
    shutil.copytree(MEASURED / "vllm_on", on)
    _refused(monkeypatch, "iterdir", on)
    r = run_cli("measured", "--on", str(on), "--off", str(VLLM_OFF))
    assert_one_line_error(r, str(on), "cannot read", "Permission denied")


@pytest.mark.parametrize("method", ["iterdir", "is_file", "is_dir"])
def test_the_reader_refuses_a_folder_it_cannot_list_or_search_in_one_line(tmp_path, monkeypatch, method):
    # is_file: a folder readable but not searchable (r without x); is_dir: one inside such a folder
    from crossover.measurements import read_measurements

    on = tmp_path / "on"
    shutil.copytree(MEASURED / "vllm_on", on)
    _refused(monkeypatch, method, on)
    with pytest.raises(CrossoverError) as e:
        read_measurements([on], arm="on")
    assert_one_line_message(e, str(on), "cannot read", "Permission denied")


def test_a_folder_of_permissions_000_is_one_line(tmp_path):
    on = tmp_path / "on"
    shutil.copytree(MEASURED / "vllm_on", on)
    on.chmod(0)
    try:
        if os.access(on, os.R_OK):
            pytest.skip("this user reads a folder of permissions 000 (root)")
        r = run_cli("measured", "--on", str(on), "--off", str(VLLM_OFF))
        assert_one_line_error(r, str(on), "cannot read")
    finally:
        on.chmod(0o755)


# --------------------------------------------------------------------------- calibrate's bootstrap (api/sweeps.py, analysis/calibration.py)

CALIBRATE = ("calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(VLLM_OFF), "--hardware", "h100-sxm",
             "--tp", "1", "--method", "eagle3")


@pytest.mark.parametrize("draws", ["100000000", "10001", str(10**30), str(10**400)], ids=lambda v: v[:12])
def test_calibrate_bootstrap_1e8_is_refused_in_one_line_before_any_work(draws):
    # 1e8 refits asked numpy for a 6 GB array of noise (or hours of refits)
    r = run_cli(*CALIBRATE, "--bootstrap", draws, timeout=60)
    assert_one_line_error(r, "--bootstrap", "at most 10,000")


@pytest.mark.parametrize("draws", [1e8, 10**30, 10**400, math.inf, math.nan, -1, 2.5, "5", True],
                         ids=lambda v: repr(v)[:12])
def test_the_api_refuses_a_bootstrap_beyond_the_cap_or_not_a_count_in_one_line(draws):
    import crossover

    with pytest.raises(CrossoverError) as e:
        crossover.calibrate(on=[MEASURED / "vllm_on"], off=[VLLM_OFF], bootstrap=draws, hardware="h100-sxm", tp=1,
                            method="eagle3")
    assert_one_line_message(e, "bootstrap")


def test_the_bootstrap_check_takes_the_cap_and_refuses_one_more():
    from crossover.api.sweeps import MAX_BOOTSTRAP, check_bootstrap

    assert check_bootstrap(MAX_BOOTSTRAP) == MAX_BOOTSTRAP and check_bootstrap(0.0) == 0
    with pytest.raises(CrossoverError, match="at most 10,000"):
        check_bootstrap(MAX_BOOTSTRAP + 1)


# --------------------------------------------------------------------------- engine metrics (measurements/acceptance.py)

PROM, LOG = MEASURED / "vllm_metrics.prom", MEASURED / "vllm_specdecode.log"
ENGINE0 = '{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}'
COUNTERS = ["vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total"]


def _measured_with_metrics(*metrics: str):
    return run_cli("measured", "--on", str(MEASURED / "vllm_on"), "--off", str(VLLM_OFF), "--engine-metrics",
                   ",".join(metrics), "--json")


def _scrape(tmp_path, counter: str, value: str, name: str = "metrics.prom") -> str:
    lines = PROM.read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(counter + ENGINE0))
    lines[i] = f"{counter}{ENGINE0} {value}"
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n")
    return str(f)


def test_the_fixture_scrape_and_log_still_pass():
    for f in (PROM, LOG):
        r = _measured_with_metrics(str(f))
        assert r.returncode == 0, r.stderr
        strict_loads(r.stdout)


@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-5", "1e30"])
def test_a_nan_or_inf_counter_in_a_scrape_is_refused_in_one_line(tmp_path, counter, value):
    # NaN / Inf passed through to --json ("accepted": NaN, "num_drafts": Infinity) with exit 0
    f = _scrape(tmp_path, counter, value)
    line = assert_one_line_error(_measured_with_metrics(f), f, "counter", counter)
    assert f"{f}:" in line  # file and line


def test_a_nan_counter_in_the_scrape_taken_before_is_refused_in_one_line(tmp_path):
    before = _scrape(tmp_path, COUNTERS[2], "NaN", "before.prom")
    assert_one_line_error(_measured_with_metrics(str(PROM), before), before, COUNTERS[2])


def test_a_nan_per_position_counter_is_refused_in_one_line(tmp_path):
    counter = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    f = tmp_path / "metrics.prom"
    f.write_text(PROM.read_text().replace(f'{counter}{ENGINE0[:-1]},position="1"}} 4623.0',
                                          f'{counter}{ENGINE0[:-1]},position="1"}} NaN'))
    assert "NaN" in f.read_text()
    assert_one_line_error(_measured_with_metrics(str(f)), str(f), counter)


def test_a_per_position_counter_at_a_huge_position_is_one_line(tmp_path):
    # k = max position + 1 sized a tuple of that many rates
    counter = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    f = tmp_path / "metrics.prom"
    f.write_text(PROM.read_text() + f'{counter}{ENGINE0[:-1]},position="99999999999"}} 1.0\n')
    assert_one_line_error(_measured_with_metrics(str(f)), str(f), counter, "position")


@pytest.mark.parametrize("accepted", ["1e12", "1e17"])
def test_an_impossible_tau_from_the_counters_is_refused_in_one_line(tmp_path, accepted):
    # 1 + 1e12 / 17593 drafts: tau 5.7e7 with k = 3 was echoed with exit 0
    f = _scrape(tmp_path, COUNTERS[2], accepted)
    assert_one_line_error(_measured_with_metrics(f), f, "vllm:spec_decode_num_accepted_tokens")


def _log(tmp_path, line: str) -> str:
    f = tmp_path / "vllm.log"
    f.write_text("INFO 03-01 10:15:00 [loggers.py:116] Engine 000: Avg prompt throughput: 1.0 tokens/s\n"
                 f"INFO 03-01 10:15:30 [metrics.py:96] SpecDecoding metrics: {line}\n")
    return str(f)


@pytest.mark.parametrize("tau", ["0.5", "1e9", "4.5", "nan", "inf", "-2"])
def test_an_impossible_tau_in_a_log_is_refused_in_one_line(tmp_path, tau):
    # tau 0.5 and 1e9 were echoed with exit 0 (k = 3 from the per-position rates)
    f = _log(tmp_path, f"Mean acceptance length: {tau}, Accepted: 150 tokens, Drafted: 387 tokens, "
                       "Per-position acceptance rate: 0.543, 0.357, 0.264")
    assert_one_line_error(_measured_with_metrics(f), f"{f}:2", "acceptance length", "[1, 4]")


def test_tau_below_one_is_refused_even_without_k(tmp_path):
    f = _log(tmp_path, "Mean acceptance length: 0.5, Accepted: 150 tokens, Drafted: 387 tokens")
    assert_one_line_error(_measured_with_metrics(f), f"{f}:2", "acceptance length", ">= 1")


@pytest.mark.parametrize("rates", ["0.5, nan, 0.2", "0.5, inf, 0.2", "0.5, 1.5, 0.2", "-0.1, 0.3, 0.2"])
def test_a_nan_or_impossible_per_position_rate_in_a_log_is_refused_in_one_line(tmp_path, rates):
    # NaN and Infinity per-position rates reached --json with exit 0
    f = _log(tmp_path, f"Mean acceptance length: 2.0, Accepted: 150 tokens, Drafted: 387 tokens, "
                       f"Per-position acceptance rate: {rates}")
    assert_one_line_error(_measured_with_metrics(f), f"{f}:2", "Per-position acceptance rate")


def test_a_nan_in_a_log_line_with_nothing_drafted_is_no_measurement(tmp_path):
    f = _log(tmp_path, "Mean acceptance length: nan, Accepted: 0 tokens, Drafted: 0 tokens, "
                       "Per-position acceptance rate: nan, nan, nan")
    f2 = tmp_path / "two.log"
    f2.write_text(open(f).read() + LOG.read_text())
    r = _measured_with_metrics(str(f2))
    assert r.returncode == 0, r.stderr
    strict_loads(r.stdout)


@pytest.mark.parametrize("line, needle", [
    ("Accepted: 500 tokens, Drafted: 387 tokens", "no more tokens are accepted"),
    ("Accepted: 1 tokens, Drafted: " + "9" * 400 + " tokens", "no count"),
    ("Accepted: 10 tokens, Drafted: 30 tokens, Per-position acceptance rate: " + ", ".join(["0.1"] * 2000),
     "no engine drafts"),
])
def test_impossible_log_counts_are_refused_in_one_line(tmp_path, line, needle):
    f = _log(tmp_path, line)
    assert_one_line_error(_measured_with_metrics(f), f"{f}:2", needle)


# Prometheus sample values: finite, huge, non-finite, negative, as a scrape spells them.
PROM_VALUES = st.one_of(st.floats(min_value=0, max_value=1e6).map(lambda v: f"{v:.1f}"),
                        st.floats(allow_nan=False).map(repr),
                        st.sampled_from(["NaN", "+Inf", "-Inf", "1e308", "1e-300", "0", "-1"]))


def _finite_tree(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(map(_finite_tree, value))
    return not isinstance(value, float) or math.isfinite(value)


PROM_LINES = PROM.read_text().splitlines()
SAMPLES = [i for i, ln in enumerate(PROM_LINES) if ln.startswith("vllm:spec_decode_")]  # every engine's, per position


@PROPERTY
@given(values=st.dictionaries(st.sampled_from(SAMPLES), PROM_VALUES, min_size=1, max_size=6))
def test_a_scrape_of_any_counter_values_gives_possible_acceptance_or_one_line(values):
    from crossover.measurements import parse_prometheus

    lines = list(PROM_LINES)
    for i, value in values.items():
        lines[i] = lines[i].rsplit(" ", 1)[0] + " " + value
    try:
        out = parse_prometheus("\n".join(lines), origin="scrape")
    except CrossoverError as exc:
        assert_one_line_message(exc, "scrape")
        return
    assert _finite_tree(list(out.values())), out
    tau, k = out["acceptance_length"], out["k"]
    assert tau is None or 1 <= tau <= (k + 1) * (1 + 1e-9) if k else tau is None or tau >= 1
    assert out["acceptance_rate"] is None or 0 <= out["acceptance_rate"] <= 1


LOG_NUMBERS = st.one_of(st.floats(min_value=0, max_value=5).map(lambda v: f"{v:.3f}"),
                        st.sampled_from(["nan", "inf", "0.5", "1e9", "-1", "1e308"]))


@PROPERTY
@given(tau=LOG_NUMBERS, accepted=st.integers(0, 10**20), drafted=st.integers(0, 10**20),
       rates=st.lists(LOG_NUMBERS, min_size=0, max_size=5))
def test_a_log_line_of_any_numbers_gives_possible_acceptance_or_one_line(tau, accepted, drafted, rates):
    from crossover.measurements import parse_spec_decode_log

    line = f"SpecDecoding metrics: Mean acceptance length: {tau}, Accepted: {accepted} tokens, Drafted: {drafted} tokens"
    if rates:
        line += ", Per-position acceptance rate: " + ", ".join(rates)
    try:
        out = parse_spec_decode_log(line, origin="log")
    except CrossoverError as exc:
        assert_one_line_message(exc, "log")
        return
    assert _finite_tree(list(out.values())), out
    t, k = out["acceptance_length"], out["k"]
    assert t is None or (1 <= t <= (k + 1) * (1 + 1e-9) if k else t >= 1)
    assert all(0 <= r <= 1 for r in out["per_position"] or ())


# --------------------------------------------------------------------------- a measured CSV's k (measurements/csv_table.py)

CSV_HEADER = "arm,concurrency,output_throughput,mean_tpot_ms,acceptance_length,k\n"


def _csv_of_k(tmp_path, k: str, comment: bool = False) -> str:
    """A plain CSV (read a block at a time, no quotes, blanks or comments) unless `comment`."""
    f = tmp_path / "sweep.csv"
    f.write_text(("# a comment: read line by line\n" if comment else "") + CSV_HEADER +
                 f"off,1,100,10,,\non,1,150,6.6,2.5,{k}\noff,16,1000,16,,\non,16,1400,11,2.5,3\n")
    return str(f)


@pytest.mark.parametrize("comment", [False, True], ids=["block", "rows"])
@pytest.mark.parametrize("k", ["1e30", "1e300", "9223372036854775808", "1025"])
def test_a_csv_k_of_1e30_is_refused_as_implausible_in_one_line(tmp_path, k, comment):
    # the block path cast 1e30 to int64 (numpy's "invalid value encountered in cast", which looped in
    # warnings_as_lines), the row path raised OverflowError in the int64 column
    f = _csv_of_k(tmp_path, k, comment)
    assert_one_line_error(run_cli("measured", "--files", f), f"{f}:{4 if comment else 3}", "'k'", "1024")


@PROPERTY
@given(k=st.one_of(st.integers(0, 2048).map(str), HUGE_INTS.map(str), FLOATS.map(repr),
                   st.sampled_from(["", "nan", "inf", "-1", "2.5", "1e30"])),
       comment=st.booleans())
def test_a_csv_k_cell_is_read_as_a_plausible_k_or_refused_in_one_line(tmp_path, k, comment):
    from crossover.measurements import read_measurements

    f = _csv_of_k(tmp_path, k, comment)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            points = read_measurements([f])
    except CrossoverError as exc:
        assert_one_line_message(exc, f)
        return
    assert all(p.k is None or 0 <= p.k <= 1024 for p in points)


# --------------------------------------------------------------------------- load levels (measurements/fields.py, point.py)

MODEL = ("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1")


@pytest.mark.parametrize("axis", ["concurrency", "request_rate"])
@pytest.mark.parametrize("load", ["1e300", "1.7e308", "1e30", "5e-324", "1e-300"])
def test_a_csv_load_level_of_1e300_is_refused_in_one_line(tmp_path, axis, load):
    # the model priced a step at 1e300 sequences: numpy's overflow warnings, inf in the JSON
    f = tmp_path / "sweep.csv"
    f.write_text(f"arm,{axis},output_throughput,mean_tpot_ms,mean_e2el_ms\noff,1,100,10,500\non,{load},150,6.6,300\n"
                 "off,16,1000,16,800\non,16,1400,11,600\n")
    assert_one_line_error(run_cli("measured", "--files", str(f), "--json", *MODEL), f"{f}:3", axis, "no load level")


@pytest.mark.parametrize("key", ["max_concurrency", "request_rate", "max_concurrent_requests"])
def test_a_vllm_load_level_of_1e300_is_refused_in_one_line(tmp_path, key):
    # both arms at 1e300: the physics check priced a step at that batch (overflow warnings)
    changes = {key: 1e300} if key == "max_concurrency" else {"max_concurrency": None, key: 1e300}
    on = _vllm_on(tmp_path, **changes)
    off_obj = json.loads(next(VLLM_OFF.glob("*concurrency16*.json")).read_text())
    off_obj.update(changes)
    off = tmp_path / "off.json"
    off.write_text(json.dumps(off_obj))
    r = run_cli("measured", "--on", on, "--off", str(off), "--json", *MODEL)
    assert_one_line_error(r, key.replace("max_concurrent_requests", "concurrency"), "no load level (expected")


@PROPERTY
@given(load=st.one_of(FLOATS.filter(lambda v: v > 0), st.floats(1e-7, 1e10)), axis=st.sampled_from(["concurrency",
                                                                                                       "request_rate"]))
def test_a_load_level_is_read_in_range_or_refused_in_one_line(tmp_path, load, axis):
    from crossover.measurements import read_measurements

    f = tmp_path / "sweep.csv"
    f.write_text(f"arm,{axis},output_throughput\noff,{load!r},100\non,{load!r},150\n")
    try:
        points = read_measurements([f])
    except CrossoverError as exc:
        assert not 1e-6 <= load <= 1e9
        assert_one_line_message(exc, "no load level")
        return
    assert all(1e-6 <= p.load <= 1e9 for p in points)


# --------------------------------------------------------------------------- counts (measurements/fields.py, point.py)

COUNT_CSV = "arm,concurrency,output_throughput,mean_tpot_ms,total_output_tokens,completed,spec_decode_num_drafts,"\
            "spec_decode_accepted_tokens\n"


@pytest.mark.parametrize("comment", [False, True], ids=["block", "rows"])
def test_counts_that_sum_past_the_largest_number_are_refused_in_one_line(tmp_path, comment):
    # 1e308 drafts in two runs summed to inf in the n-gram match rate (numpy's overflow in reduce)
    f = tmp_path / "sweep.csv"
    f.write_text(("# read line by line\n" if comment else "") + COUNT_CSV +
                 "off,1,100,10,128,10,,\non,1,150,6.6,128,10,1e308,1e308\noff,16,1000,16,2048,160,,\n"
                 "on,16,1400,11,2048,160,1e308,1e308\n")
    r = run_cli("measured", "--files", str(f), "--json", *MODEL, "--method", "ngram")
    assert_one_line_error(r, f"{f}:{4 if comment else 3}", "spec_decode_num_drafts", "no count")


def test_a_vllm_count_of_1e300_is_refused_in_one_line(tmp_path):
    r = run_cli("measured", "--on", _vllm_on(tmp_path, total_output_tokens=1e300), "--off", str(VLLM_OFF))
    assert_one_line_error(r, "total_output_tokens", "no count")


COUNT_CELLS = st.one_of(st.integers(0, 10**6).map(str), FLOATS.map(repr), HUGE_INTS.map(str),
                        st.sampled_from(["", "nan", "inf", "1e18", "1e19", "1e308"]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(COUNT_CELLS, min_size=8, max_size=8))
def test_any_counts_give_a_strict_json_prediction_or_one_line(tmp_path, cells):
    tokens, done, drafts, accepted = cells[:2], cells[2:4], cells[4:6], cells[6:]
    f = tmp_path / "sweep.csv"
    f.write_text(COUNT_CSV + f"off,1,100,10,128,10,,\non,1,150,6.6,{tokens[0]},{done[0]},{drafts[0]},{accepted[0]}\n"
                 f"off,16,1000,16,2048,160,,\non,16,1400,11,{tokens[1]},{done[1]},{drafts[1]},{accepted[1]}\n")
    r = run_cli("measured", "--files", str(f), "--json", *MODEL, "--method", "ngram")
    if r.returncode == 0:
        strict_loads(r.stdout)
    else:
        assert_one_line_error(r)
