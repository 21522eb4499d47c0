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
    with warnings.catch_warnings(), np.errstate(all="raise"):
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
        with warnings.catch_warnings(), np.errstate(all="raise"):
            warnings.simplefilter("error")
            p, o = wl.sample(np.random.default_rng(0), 50, base)
    except CrossoverError as exc:
        assert not ok, exc
        assert_one_line_message(exc)
        return
    assert ok and p.dtype == np.int64 and set(p.tolist()) <= set(values)
