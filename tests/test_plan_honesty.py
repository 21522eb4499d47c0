"""The plan answers honestly or refuses in one line (issue 23, a fuzz campaign's findings): no
non-finite number in its JSON from finite inputs, no boolean read as a price, no fleet "verified"
whose simulated replica cannot keep up with its load, traffic files read the same in every time
zone, and the recommendation says what it left out and how close to the edge it runs."""

from __future__ import annotations

import json
import math

import pytest
from conftest import assert_one_line_error, assert_one_line_message, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_contract import numbers, strict_loads

import crossover
from crossover.api.records import SLO, Demand, Pricing, Search, Verification
from crossover.errors import CrossoverError
from crossover.specs.workload import fixed

WL = fixed(512, 128)


def _plan(demand=None, pricing=None, hardware=("h100-sxm",), tpot_ms=20, **verification):
    return crossover.plan("llama-3.1-8b", WL, Demand(**(demand or {"peak_rps": 5})), SLO(tpot_ms=tpot_ms),
                          search=Search(hardware=list(hardware), tp=[1], weight_dtype="bf16"),
                          pricing=Pricing(**(pricing or {})),
                          verification=Verification(**{"verify": 0, "jobs": 1, **verification}))


def _finite_json(res) -> dict:
    """The plan's --json as the CLI writes it, parsed strictly (no NaN/Infinity), every number finite."""
    d = strict_loads(json.dumps(res.to_dict()))
    for path, x in numbers(d):
        assert math.isfinite(x), f"{path}: {x}"
    return d


def _cli(*extra):
    return run_cli("plan", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--slo-tpot-ms", "30",
                   "--hardware", "h100-sxm", "--tp", "1", "--verify", "0", *extra)


# --------------------------------------------------------------------------- 1. finite answers, numeric prices

@pytest.mark.parametrize("extra, words", [
    (["--peak-rps", "5", "--price", "h100-sxm=1e308"], ["--price h100-sxm", "overflows"]),
    (["--peak-rps", "1e308"], ["--peak-rps", "overflows"]),
    (["--peak-output-tokens-per-s", "1.7e308"], ["--peak-output-tokens-per-s", "overflows"]),
    (["--peak-rps", "1e13", "--price", "h100-sxm=1e300"], ["--price h100-sxm", "overflows"]),  # 1e11 GPUs
    (["--peak-rps", "1e300"], ["--peak-rps 1e+300", "the fleet overflows"]),  # 1e298 replicas
])
def test_a_product_of_finite_inputs_that_overflows_is_one_line_naming_the_input(extra, words):
    assert_one_line_error(_cli(*extra), *words)


def test_an_ownership_cost_that_overflows_names_its_inputs(tmp_path):
    pf = tmp_path / "p.yaml"
    pf.write_text("h100-sxm:\n  purchase_usd_per_gpu: 30000\n  tdp_w: 700\n")
    with pytest.raises(CrossoverError) as e:  # amortised over 1e-305 years
        _plan(pricing=dict(price_file=str(pf), cost_basis="ownership", years=1e-305))
    assert_one_line_message(e, "purchase_usd_per_gpu", "--years", "overflows")
    pf.write_text("h100-sxm:\n  purchase_usd_per_gpu: 30000\n  tdp_w: 1e306\n")
    with pytest.raises(CrossoverError) as e:
        _plan(pricing=dict(price_file=str(pf), cost_basis="ownership", power_cost=1e3))
    assert_one_line_message(e, "tdp_w", "--power-cost", "overflows")


def test_a_trace_whose_totals_overflow_is_one_line_naming_the_file(tmp_path):
    f = tmp_path / "huge.csv"
    f.write_text("time,requests\n0,1e308\n60,1e308\n")
    assert_one_line_error(_cli("--traffic", str(f)), str(f), "overflow")
    f.write_text("time,requests\n0,1e300\n1e-300,0\n")  # 1e300 requests in 1e-300 s
    assert_one_line_error(_cli("--traffic", str(f)), str(f), "overflow")
    f.write_text("time,requests\n-1e308,5\n1e308,5\n")  # an interval of 2e308 s
    assert_one_line_error(_cli("--traffic", str(f)), str(f), "overflow")


def test_a_demand_that_underflows_to_zero_is_one_line():
    # 5e-324 output tokens/s over a mean output of 150 tokens is 0 req/s (found by the hypothesis test below)
    assert_one_line_error(_cli("--peak-output-tokens-per-s", "5e-324"), "--peak-output-tokens-per-s", "underflows")


@pytest.mark.parametrize("text", ["h100-sxm: true\n", "h100-sxm: yes\n", "h100-sxm:\n  price_per_hour_usd: false\n",
                                  "h100-sxm:\n  tdp_w: on\n"])
def test_a_yaml_boolean_in_a_price_file_is_not_a_price(tmp_path, text):
    pf = tmp_path / "p.yaml"
    pf.write_text(text)
    assert_one_line_error(_cli("--peak-rps", "5", "--price-file", str(pf)), str(pf), "not a number")


@pytest.mark.parametrize("price", [{"h100-sxm": True}, {"h100-sxm": "true"}, {"h100-sxm": -2.0},
                                   {"h100-sxm": math.inf}, {"h100-sxm": None}, "h100-sxm=true"])
def test_an_api_price_is_checked_as_the_flag_is(price):
    with pytest.raises(CrossoverError) as e:
        _plan(pricing=dict(price=price))
    assert_one_line_message(e, "--price h100-sxm")


@pytest.mark.parametrize("field", ["power_cost", "pue", "years"])
def test_a_boolean_is_not_a_number_for_the_cost_flags(field):
    with pytest.raises(CrossoverError) as e:
        _plan(pricing={"cost_basis": "ownership", field: True})
    assert_one_line_message(e, field.replace("_", "-"), "not a number")


MAGNITUDE = st.floats(min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(price=MAGNITUDE, peak=MAGNITUDE, purchase=MAGNITUDE, tdp=MAGNITUDE, power=MAGNITUDE,
       pue=st.floats(min_value=1.0, max_value=1e308), years=MAGNITUDE,
       basis=st.sampled_from(["rental", "ownership"]), tokens=st.booleans())
def test_finite_inputs_give_finite_json_or_a_one_line_error(tmp_path_factory, price, peak, purchase, tdp, power, pue,
                                                            years, basis, tokens):
    """The class of finding 1: any finite, positive inputs (prices, demand, power, amortisation) give a
    plan whose every JSON number is finite, or one error line."""
    pf = tmp_path_factory.mktemp("prices") / "p.yaml"
    pf.write_text(f"h100-sxm:\n  purchase_usd_per_gpu: {purchase!r}\n  tdp_w: {tdp!r}\n")
    demand = {"peak_output_tokens_per_s": peak} if tokens else {"peak_rps": peak}
    try:
        res = _plan(demand=demand, pricing=dict(price={"h100-sxm": price}, price_file=str(pf), power_cost=power,
                                                pue=pue, years=years, cost_basis=basis))
    except CrossoverError as e:
        assert_one_line_message(e)
        return
    _finite_json(res)
    assert res.plan.ranked[0].usd_per_month >= 0  # (an amortisation over 1e300 years may round to 0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(MAGNITUDE, min_size=2, max_size=6), interval=MAGNITUDE, price=MAGNITUDE)
def test_finite_traffic_gives_finite_json_or_a_one_line_error(tmp_path_factory, rows, interval, price):
    f = tmp_path_factory.mktemp("traffic") / "t.csv"
    f.write_text("time,requests\n" + "".join(f"{i * interval!r},{n!r}\n" for i, n in enumerate(rows)))
    try:
        res = _plan(demand={"traffic": str(f)}, pricing=dict(price={"h100-sxm": price}))
    except CrossoverError as e:
        assert_one_line_message(e)
        return
    _finite_json(res)


# --------------------------------------------------------------------------- 2. a verified replica keeps up

def _starved(peak_rps, max_num_batched_tokens, **verification):
    """A replica whose engine admits few tokens per step: the analytic screen (which has no token budget)
    sizes it for tens of req/s, the simulated one completes far fewer."""
    return crossover.plan("llama-3.1-8b", WL, Demand(peak_rps=peak_rps), SLO(tpot_ms=50),
                          search=Search(hardware=["h100-sxm"], tp=[1], max_num_seqs=[16], weight_dtype="bf16",
                                        max_num_batched_tokens=max_num_batched_tokens),
                          verification=Verification(**{"verify": 1, "jobs": 1, "num_prompts": 100, **verification}))


def test_a_finalist_whose_simulated_replica_cannot_keep_up_is_demoted_whatever_its_tpot():
    # the fuzz finding: --max-num-batched-tokens 1 made one prefill token a step; the run's TPOT met the
    # SLO (only decodes are timed) while the queue grew for minutes, and the plan said "verified"
    res = _starved(8, 1, retry_replicas=0)
    o = res.plan.ranked[0]
    sim = o.simulated
    assert sim["offered_request_rate"] == 8
    assert sim["capacity_request_rate"] < 0.05 * 8  # the replica completes a few percent of its load
    assert sim["median_tpot_ms"] <= 50 and sim["median_ttft_ms"] > 60_000  # the SLO alone passes it
    assert o.demoted_because.startswith("simulated replica does not keep up: it completes at most ")
    assert "of its load (its queue grows without bound; p50 TTFT" in o.demoted_because
    assert o.demoted_because.endswith("at 8 req/s per replica")
    assert "no option passed the simulator: simulated replica does not keep up" in res.recommendation
    row = next(r for r in res.to_text().splitlines() if r.lstrip().startswith("1 "))
    assert "DEMOTED: simulated replica does not keep up" in row
    d = res.to_dict()["options"][0]
    assert d["demoted_because"] == o.demoted_because and d["simulated"]["capacity_request_rate"] > 0


def test_a_replica_that_keeps_up_with_one_more_replica_comes_back_grown():
    # 64 tokens a step: a replica completes about 7.7 req/s with speculation on (11 off); 12 req/s on one
    # replica does not keep up, 6 req/s on each of two does
    res = _starved(12, 64)
    best = res.plan.ranked[0]
    assert best.demoted_because is None and best.replicas_added == 1 and best.replicas == 2
    assert best.retried_because.startswith("simulated replica does not keep up")
    assert best.simulated["offered_request_rate"] == 6
    assert 6 < best.simulated["capacity_request_rate"] < 0.95 * 12
    assert "(+1 replica after simulation: replica does not keep up" in res.recommendation


def test_every_verified_finalist_keeps_up_with_its_load():
    res = _plan(demand={"peak_rps": 40}, tpot_ms=30, verify=3, num_prompts=200)
    sims = [o for o in res.plan.ranked if o.simulated is not None]
    assert sims
    for o in sims:
        s = o.simulated
        assert s["offered_request_rate"] == pytest.approx(40 / o.replicas)
        assert o.demoted_because is None and s["capacity_request_rate"] >= 0.95 * s["offered_request_rate"]


# --------------------------------------------------------------------------- 3. traffic files: BOM, time zones

import contextlib  # noqa: E402
import os  # noqa: E402
import time as _time  # noqa: E402
from datetime import datetime, timedelta  # noqa: E402

from crossover.planning.traffic import read_traffic  # noqa: E402


@contextlib.contextmanager
def _zone(name: str):
    """The process's local time zone set to `name` (TZ + time.tzset), restored after."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = name
    _time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        _time.tzset()


ZONES = ("UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Europe/London", "Pacific/Chatham")


def test_a_csv_with_a_utf8_bom_as_excel_writes_it_is_read(tmp_path):
    f = tmp_path / "excel.csv"
    f.write_bytes("time,requests\r\n0,600\r\n60,1200\r\n".encode("utf-8-sig"))
    tr = read_traffic(f)
    assert tr.interval_s == 60 and list(tr.requests) == [600, 1200]
    r = _cli("--traffic", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["demand"]["peak_requests_per_s"] == 20


# US daylight saving starts (02:00 does not exist) and ends (01:00 happens twice) inside these traces
DST = {"start": [f"2026-03-08T{h:02d}:00" for h in range(6)], "end": [f"2026-11-01T{h:02d}:00" for h in range(6)]}


@pytest.mark.parametrize("when", sorted(DST))
def test_naive_iso_times_are_read_as_utc_in_every_local_zone(tmp_path, when):
    f = tmp_path / "day.csv"
    f.write_text("time,requests\n" + "".join(f"{t},{100 * (i + 1)}\n" for i, t in enumerate(DST[when])))
    seen = {}
    for zone in ("UTC", "America/New_York", "Asia/Kolkata"):
        with _zone(zone):
            tr = read_traffic(f)
            seen[zone] = (tr.interval_s, list(tr.requests), tr.peak_rps, tr.mean_rps)
            assert tr.naive_times == "UTC"
            d = _plan(demand={"traffic": str(f)})
    assert seen["America/New_York"] == seen["Asia/Kolkata"] == seen["UTC"] == (3600, [100, 200, 300, 400, 500, 600],
                                                                                600 / 3600, 2100 / 6 / 3600)
    assert "times without a zone read as UTC" in d.to_text()
    assert d.to_dict()["demand"]["naive_times_read_as"] == "UTC"


def test_a_trace_with_zones_says_nothing_of_utc_and_mixed_naive_and_zoned_times_are_refused(tmp_path):
    f = tmp_path / "zoned.csv"
    f.write_text("time,requests\n2026-03-08T01:00-05:00,5\n2026-03-08T03:00-04:00,5\n2026-03-08T08:00Z,5\n")
    with _zone("America/New_York"):
        tr = read_traffic(f)
    assert tr.interval_s == 3600 and tr.naive_times is None
    assert "naive_times_read_as" in _plan(demand={"traffic": tr}).to_dict()["demand"]
    f.write_text("time,requests\n2026-03-08T00:00Z,5\n2026-03-08T01:00,5\n")
    with pytest.raises(CrossoverError) as e:
        read_traffic(f)
    assert_one_line_message(e, "row 3", "no time zone", "row 2")


@settings(max_examples=40, deadline=None)
@given(start=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2037, 12, 31)),
       step=st.sampled_from([60, 900, 1800, 3600, 86400]), counts=st.lists(st.integers(0, 10**6), min_size=2,
                                                                               max_size=40),
       zone=st.sampled_from(ZONES[1:]), offset=st.sampled_from([None, "Z", "+05:30", "-04:00", "+13:45"]))
def test_the_same_trace_gives_the_same_demand_in_every_local_zone(tmp_path_factory, start, step, counts, zone, offset):
    """The class of finding 3: what a trace demands never depends on the machine's time zone, with
    naive times (read as UTC) or times with an offset."""
    counts[0] += 1  # at least one request
    stamp = (lambda t: t.isoformat()) if offset is None else (lambda t: t.isoformat() + offset)
    f = tmp_path_factory.mktemp("tz") / "t.csv"
    f.write_text("time,requests\n" + "".join(f"{stamp(start + timedelta(seconds=i * step))},{n}\n"
                                             for i, n in enumerate(counts)))
    with _zone("UTC"):
        want = read_traffic(f)
    with _zone(zone):
        got = read_traffic(f)
    assert (got.interval_s, list(got.requests), got.naive_times) == (want.interval_s, list(want.requests),
                                                                     want.naive_times)
    assert got.interval_s == step and list(got.requests) == counts
    assert got.naive_times == ("UTC" if offset is None else None)


# --------------------------------------------------------------------------- 4. what the answer leaves out

def test_the_recommendation_says_how_many_options_were_unpriced_and_ranked_after():
    # b200 and l40s have no rental price in the hardware library: the one line said nothing of them
    res = _plan(hardware=["h100-sxm", "b200", "l40s"], tpot_ms=30, demand={"peak_rps": 10})
    unpriced = [o for o in res.plan.ranked if o.usd_per_month is None]
    assert len(unpriced) == 4
    assert res.recommendation.startswith("rent 1 x h100-sxm")
    assert res.recommendation.endswith(f"; 4 of {len(res.plan.ranked)} options unpriced (b200, l40s), ranked after "
                                       "the priced ones")
    assert res.to_dict()["recommendation"] == res.recommendation == res.to_text().splitlines()[0]
    two = _plan(hardware=["h100-sxm", "b200"], tpot_ms=30, demand={"peak_rps": 10})
    assert f"; 2 of {len(two.plan.ranked)} options unpriced (b200)" in two.recommendation
    assert "unpriced" not in _plan(hardware=["h100-sxm", "b200"], tpot_ms=30, demand={"peak_rps": 10},
                                   pricing={"price": {"b200": 6.0}}).recommendation


def _capacity() -> float:
    """Requests/s one h100-sxm TP-1 replica (rank 1 at a TPOT SLO of 30 ms) serves, analytically."""
    return _plan(demand={"peak_rps": 1}, tpot_ms=30).plan.ranked[0].screened.requests_per_s


def test_a_recommended_fleet_above_85_percent_of_its_capacity_at_the_peak_is_warned():
    cap = _capacity()
    res = _plan(demand={"peak_rps": 0.93 * cap}, tpot_ms=30)
    o = res.plan.ranked[0]
    assert o.replicas == 1 and o.utilisation == pytest.approx(0.93)
    warn = ("warning: little headroom: rank 1 runs at 93% of its fleet's capacity at the peak (above 85%); 8% more "
            f"load than planned exceeds it (one more replica: {o.utilisation / 2:.0%})")  # 0.93 / 2, at the rounding edge
    assert res.plan.warnings == [warn]
    assert res.to_text().splitlines()[:2] == [res.recommendation, warn]
    assert res.to_dict()["warnings"] == [warn]
    assert _plan(demand={"peak_rps": 0.8 * cap}, tpot_ms=30).to_dict()["warnings"] == []


def test_a_simulated_latency_within_5_percent_of_its_slo_is_warned():
    # k up to 2: the best k at the loose SLO's capacity (205 running) and at the tight one's (32) is then
    # the same, and so is the fleet (at k <= 3 the tight SLO's small batch takes k = 3, the loose one k = 2)
    search = Search(hardware=["h100-sxm"], tp=[1], weight_dtype="bf16", k_max=2)
    verification = Verification(verify=1, jobs=1, num_prompts=200)
    loose = crossover.plan("llama-3.1-8b", WL, Demand(peak_rps=20), SLO(tpot_ms=30), search=search,
                           verification=verification).plan.ranked[0]
    p99 = loose.simulated["p99_tpot_ms"]
    assert loose.utilisation < 0.85
    # the same fleet under a p99 TPOT SLO 3% above what it was simulated at: it passes, with no headroom
    res = crossover.plan("llama-3.1-8b", WL, Demand(peak_rps=20), SLO(tpot_ms=30, p99_tpot_ms=p99 / 0.97),
                         search=search, verification=verification)
    o = res.plan.ranked[0]
    assert o.label == loose.label and o.simulated == loose.simulated and o.demoted_because is None
    assert res.plan.warnings == [f"warning: little headroom: rank 1's simulated p99 TPOT {p99:.1f} ms is within 5% of "
                                 f"its SLO {p99 / 0.97:g} ms (97% of it)"]
    assert res.plan.warnings[0] in res.to_text().splitlines()
    far = crossover.plan("llama-3.1-8b", WL, Demand(peak_rps=20), SLO(tpot_ms=30, p99_tpot_ms=p99 / 0.9),
                         search=search, verification=verification)
    assert far.plan.warnings == []
