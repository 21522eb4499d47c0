"""Capacity planning (issue 13): fleet size, cost arithmetic, dtypes, arms, verification, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli

import crossover
from crossover.api.records import SLO, Demand, Pricing, Search, Verification
from crossover.model.scenario import Scenario
from crossover.analysis.curves import evaluate
from crossover.errors import CrossoverError
from crossover.planning.pricing import HOURS_PER_MONTH
from crossover.specs import load_hardware, load_model
from crossover.specs.deployment import Deployment
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation
from crossover.planning.traffic import read_traffic
from crossover.specs.workload import fixed

P, O = 512, 128
WL = fixed(P, O)


def _records(flat: dict) -> dict:
    """crossover.plan's records from flat field names (each name belongs to one record)."""
    from dataclasses import fields

    out: dict = {}
    for name, cls in (("demand", Demand), ("slo", SLO), ("search", Search), ("pricing", Pricing),
                      ("verification", Verification)):
        mine = {f.name for f in fields(cls)}
        out[name] = cls(**{k: flat.pop(k) for k in list(flat) if k in mine})
    assert not flat, f"no record has {sorted(flat)}"
    return out


def _plan(**kw):
    # the model's own bf16 weights only (the default search adds fp8 on GPUs with fp8 tensor cores)
    args = dict(tpot_ms=20, hardware=["h100-sxm"], tp=[1], weight_dtype=["bf16"], verify=0, jobs=1)
    args.update({k.removeprefix("slo_"): v for k, v in kw.items()})
    if "traffic" not in args:
        args.setdefault("peak_rps", 40)
    return crossover.plan("llama-3.1-8b", WL, **_records(args))


def test_fleet_size_by_hand_for_a_fixed_length_workload():
    res = _plan(peak_rps=40)
    opts = res.options
    assert opts
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    for o in opts:
        s = o.screened
        if o.arm != "off":
            continue
        # the capacity: the largest running batch whose TPOT (mean step, one token a step) meets 20 ms
        sc = Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7)), P + O / 2, P, O)
        b = np.arange(1, 257, dtype=float)
        c = evaluate(sc, b)
        ok = c.step_off * 1e3 <= 20
        best = int(np.argmax(np.where(ok, c.tokens_per_s_off, -1)))
        assert s.batch == best + 1
        rps = c.tokens_per_s_off[best] / O  # requests/s: output tokens/s over the output length
        assert s.requests_per_s == pytest.approx(rps, rel=1e-12)
        assert o.replicas == math.ceil(40 / rps)
    for o in opts:  # every option: replicas x capacity >= demand, one replica fewer does not
        rps = o.screened.requests_per_s
        assert o.replicas * rps >= 40 > (o.replicas - 1) * rps
        assert o.gpus == o.replicas * o.tp
        assert o.utilisation == pytest.approx(40 / (o.replicas * rps))


def test_cost_arithmetic_by_hand():
    res = _plan(peak_rps=40, price={"h100-sxm": 2.0})
    o = res.options[0]
    rent = o.gpus * 2.0 * 730.0
    assert HOURS_PER_MONTH == 730.0
    assert o.rental_usd_per_month == pytest.approx(rent)
    tokens_per_month = 40 * O * 3600 * 730
    assert o.usd_per_million_output_tokens == pytest.approx(rent / tokens_per_month * 1e6)
    one = 1 * 2.0 * 730 / (o.screened.tokens_per_s * 3600 * 730) * 1e6
    assert o.usd_per_million_at_capacity == pytest.approx(one)


def test_ownership_arithmetic_by_hand(tmp_path):
    pf = tmp_path / "prices.yaml"
    pf.write_text("h100-sxm:\n  purchase_usd_per_node: 240000\n  tdp_w: 700\n")
    res = _plan(peak_rps=40, price_file=str(pf), power_cost=0.10, pue=1.5, years=4, cost_basis="ownership")
    o = res.options[0]
    u = 40 / (o.replicas * o.screened.requests_per_s)
    capital = o.gpus * (240000 / 8) / (12 * 4)
    power = o.gpus * 0.700 * u * 1.5 * 0.10 * 730
    assert o.ownership_usd_per_month == pytest.approx(capital + power)
    assert o.usd_per_month == o.ownership_usd_per_month
    d = res.to_dict()
    assert d["costs"]["prices"]["h100-sxm"]["sources"]["purchase_usd_per_gpu"].startswith("price file")


def test_fp8_is_cheaper_per_token_than_bf16_where_the_chip_has_fp8_tensor_cores():
    # a tight TPOT keeps the batch small: decode streams the weights (bandwidth-bound), fp8 halves them
    res = _plan(slo_tpot_ms=9, weight_dtype="bf16,fp8", price={"h100-sxm": 2.99}, peak_rps=5)
    by = {(o.weight_dtype, o.arm): o for o in res.options if o.dropped_because is None}
    assert load_hardware("h100-sxm").fp8_dense_tflops
    for arm in ("off", "on"):
        fp8, bf16 = by[("fp8", arm)], by[("bf16", arm)]
        assert fp8.usd_per_million_at_capacity < bf16.usd_per_million_at_capacity
        assert fp8.screened.batch < 100  # a small batch: the bandwidth-bound side of the roofline


def test_no_duplicate_rows_and_routed_arms_really_route():
    res = crossover.plan("llama-3.1-70b", "sharegpt", Demand(peak_rps=20), SLO(tpot_ms=50),
                         search=Search(hardware=["h100-sxm", "h200"], weight_dtype="fp8"),
                         verification=Verification(verify=0, jobs=1))
    keys = [(o.hardware, o.tp, o.weight_dtype, o.kv_dtype, o.max_num_seqs, o.arm) for o in res.options]
    assert len(keys) == len(set(keys))
    for o in res.plan.ranked:
        if o.arm == "routed":
            ks = {r["k"] for r in o.screened.schedule}
            assert len(ks) >= 2  # k = 0 throughout is the off arm, one k throughout the on arm
        if o.arm == "on":
            assert o.screened.k >= 1


def test_the_finalists_are_simulated_and_a_p99_miss_demotes():
    kw = dict(slo_tpot_ms=20, slo_p99_ttft_ms=150, peak_rps=30, verify=3, burstiness=0.1, num_prompts=300,
              retry_replicas=0)
    res = _plan(**kw)
    sims = [o for o in res.plan.ranked if o.simulated]
    # every finalist up to --verify (a routed arm whose schedule keeps one k throughout is the on arm's row)
    assert len(sims) == min(3, len(res.plan.ranked)) >= 2 and all("p99_tpot_ms" in o.simulated for o in sims)
    demoted = [o for o in sims if o.demoted_because]
    assert demoted and all("p99 TTFT" in o.demoted_because for o in demoted)
    assert all(o.simulated["p99_ttft_ms"] > 150 for o in demoted)
    # --jobs: the same numbers from two processes
    par = _plan(**kw, jobs=2)
    assert [o.simulated for o in par.plan.ranked[:3]] == [o.simulated for o in res.plan.ranked[:3]]


def test_a_finalist_that_misses_in_simulation_comes_back_with_one_more_replica():
    # bursty arrivals (gamma shape 0.1) at 30 req/s: the analytic fleet (1 replica, its capacity under the
    # TPOT SLO is > 30 req/s) misses p99 TTFT 150 ms in the simulator; at 15 req/s per replica it meets it
    kw = dict(slo_tpot_ms=20, slo_p99_ttft_ms=150, peak_rps=30, verify=3, burstiness=0.1, num_prompts=300,
              price={"h100-sxm": 2.0})
    demoted = {o.arm: o for o in _plan(**kw, retry_replicas=0).plan.ranked}
    res = _plan(**kw)  # default: up to 2 more replicas
    assert res.plan.retry_replicas == 2 and res.inputs["retry_replicas"] == 2
    for o in res.plan.ranked:
        d = demoted[o.arm]
        assert d.replicas == 1 and d.demoted_because.startswith("simulated p99 TTFT")
        assert o.demoted_because is None and o.replicas_added == 1
        assert o.replicas == d.replicas + 1 == 2 and o.gpus == 2
        assert o.retried_because == d.demoted_because  # the miss at the analytic size, kept
        assert o.simulated["p99_ttft_ms"] <= 150 < d.simulated["p99_ttft_ms"]
        assert o.utilisation == pytest.approx(30 / (2 * o.screened.requests_per_s))  # the analytic capacity
        assert o.usd_per_month == pytest.approx(2 * 2.0 * 730)  # priced for the grown fleet
        assert o.usd_per_million_output_tokens == pytest.approx(2 * 2.0 * 730 / (30 * O * 3600 * 730) * 1e6)
        assert o.to_dict()["replicas_added"] == 1 and o.to_dict()["retried_because"] == d.demoted_because
    best = res.plan.ranked[0]
    assert res.recommendation.startswith("rent 2 x h100-sxm as 2 TP-1 replicas")
    assert f"(+1 replica after simulation: p99 TTFT {demoted[best.arm].simulated['p99_ttft_ms']:.1f} ms > SLO 150 ms " \
           "with 1 replica)" in res.recommendation
    rows = [r for r in res.to_text().splitlines() if r.lstrip().startswith(("1 ", "2 ", "3 "))]
    assert len(rows) == len(res.plan.ranked) >= 2
    for r in rows:
        assert r.split()[7] == "2"  # the repl column
        assert "verified, +1 replica after simulation: p99 TTFT" in r and "with 1 replica" in r
    assert "simulated again with up to 2 more replicas" in res.to_text()


def test_a_finalist_that_misses_with_every_extra_replica_is_demoted_and_the_next_is_simulated():
    # p99 TTFT 40 ms is out of reach at this burstiness even at 10 req/s per replica: one finalist asked
    # for, each demoted in turn, so the next moves up and is simulated (3 x verify at most)
    res = _plan(slo_tpot_ms=20, slo_p99_ttft_ms=40, peak_rps=30, verify=1, burstiness=0.1, num_prompts=300,
                retry_replicas=1)
    assert res.plan.verified == 3
    for o in res.plan.ranked:
        assert o.replicas_added == 0 and o.replicas == 1  # the fleet stays the analytic one
        assert "; with 1 more replica: simulated p99 TTFT" in o.demoted_because
        assert "at 15 req/s per replica" in o.demoted_because  # 30 req/s over 1 + 1 replicas
    assert "no option passed the simulator" in res.recommendation
    assert "the best 1 simulated at the peak (burstiness 0.1; 3 in all as options moved up)" in res.to_text()


def test_unpriced_options_are_named_in_one_line_with_the_flags_that_price_them(tmp_path):
    res = _plan(hardware=["h100-sxm", "b200", "l40s"], slo_tpot_ms=30, peak_rps=10)
    unpriced = [o for o in res.plan.ranked if o.usd_per_month is None]
    assert unpriced and {o.hardware for o in unpriced} == {"b200", "l40s"}  # hardware/*.yaml: null, with why
    line = res.plan.unpriced
    assert line == (f"unpriced: {len(unpriced)} of {len(res.plan.ranked)} options (no rental price in "
                    "hardware/*.yaml for b200, l40s; cost shown as -); price them with --price b200=USD,l40s=USD "
                    "(per GPU-hour) or --price-file FILE")
    assert line in res.to_text().splitlines() and res.to_dict()["unpriced"] == line
    assert _plan(hardware=["h100-sxm", "b200"], slo_tpot_ms=30, peak_rps=10, price={"b200": 5.0}).plan.unpriced is None
    pf = tmp_path / "p.yaml"
    pf.write_text("h100-sxm:\n  purchase_usd_per_gpu: 25000\n")
    own = _plan(hardware=["h100-sxm", "b200"], slo_tpot_ms=30, peak_rps=10, cost_basis="ownership",
                price_file=str(pf)).plan.unpriced
    assert own.endswith("(no purchase price in hardware/*.yaml for b200; cost shown as -); price them with "
                        "--price-file FILE (purchase_usd_per_gpu per GPU name)")


def test_a_traffic_trace_sizes_for_the_peak_and_costs_the_whole_trace(tmp_path):
    f = tmp_path / "day.csv"
    f.write_text("time,requests\n0,3600\n3600,36000\n7200,7200\n10800,0\n")
    tr = read_traffic(f)
    assert tr.peak_rps == 10 and tr.mean_rps == pytest.approx(46800 / 14400)
    res = _plan(traffic=str(f), price={"h100-sxm": 2.0})
    o = res.options[0]
    rps = o.screened.requests_per_s
    assert o.replicas == math.ceil(10 / rps)
    per = np.maximum(1, np.ceil(np.array([1, 10, 2, 0]) / rps - 1e-9))
    assert o.autoscaled_replica_hours_share == pytest.approx(1 - per.mean() / o.replicas)
    assert o.usd_per_million_output_tokens == pytest.approx(
        o.rental_usd_per_month / (46800 / 14400 * O * 3600 * 730) * 1e6)


def test_an_slo_no_option_meets_names_the_closest_and_why():
    res = _plan(slo_tpot_ms=0.5)
    assert not res.plan.ranked
    assert res.recommendation.startswith("no option meets the SLO; closest: h100-sxm tp 1")
    assert "TPOT" in res.recommendation and "> SLO 0.5 ms" in res.recommendation
    r = run_cli("plan", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--slo-tpot-ms", "0.5", "--peak-rps", "1",
                "--hardware", "h100-sxm", "--tp", "1", "--verify", "0")
    assert_one_line_error(r, "closest")


def _bad(tmp_path, *extra):
    return run_cli("plan", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--slo-tpot-ms", "30",
                   "--hardware", "h100-sxm", "--tp", "1", "--verify", "0", *extra)


@pytest.mark.parametrize("extra, words", [
    (["--peak-rps", "5", "--price", "h100-sxmm=2"], "'h100-sxmm' is not one of this plan's accelerators"),
    (["--peak-rps", "5", "--price", "h100-sxm"], "expected GPU=USD_PER_GPU_HOUR"),
    (["--peak-rps", "5", "--price", "h100-sxm=-1"], "must be a finite number > 0"),
    (["--peak-rps", "0"], "--peak-rps must be > 0"),
    (["--peak-rps", "-3"], "--peak-rps must be > 0"),
    (["--peak-output-tokens-per-s", "0"], "--peak-output-tokens-per-s must be > 0"),
    ([], "give the demand once"),
    (["--peak-rps", "5", "--peak-output-tokens-per-s", "5"], "give the demand once"),
    (["--traffic", "GAP"], "a gap"),
    (["--traffic", "NEG"], "expected a finite number >= 0"),
    (["--traffic", "COLS"], "expected exactly time,requests"),
    (["--traffic", "missing.csv"], "missing.csv"),  # the file named, one line (crossover.files words it)
    (["--peak-rps", "5", "--cost-basis", "ownership", "--years", "0"], "--years must be > 0"),
    (["--peak-rps", "5", "--retry-replicas", "-1"], "--retry-replicas must be a whole number >= 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, extra, words):
    files = {"GAP": "time,requests\n0,5\n60,5\n180,5\n", "NEG": "time,requests\n0,5\n60,-1\n",
             "COLS": "minute,count\n0,5\n1,5\n"}
    args = []
    for a in extra:
        if a in files:
            (tmp_path / f"{a}.csv").write_text(files[a])
            a = str(tmp_path / f"{a}.csv")
        elif a == "missing.csv":
            a = str(tmp_path / a)
        args.append(a)
    assert_one_line_error(_bad(tmp_path, *args), words)


def test_library_errors_are_crossover_errors():
    with pytest.raises(CrossoverError, match="at least one latency SLO"):
        crossover.plan("llama-3.1-8b", WL, Demand(peak_rps=1), search=Search(hardware=["h100-sxm"], tp=[1]),
                       verification=Verification(verify=0))
    with pytest.raises(CrossoverError, match="unknown weight dtype"):
        _plan(weight_dtype="fp7")


def test_plan_cli_json_keys_and_plot(tmp_path):
    png = tmp_path / "plan.png"
    r = run_cli("plan", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--slo-tpot-ms", "20", "--peak-rps", "20",
                "--hardware", "h100-sxm,l4", "--tp", "1", "--verify", "1", "--num-prompts", "200", "--json",
                "--plot", str(png))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["recommendation"].startswith("rent ")
    o = d["options"][0]
    assert {"hardware", "tp", "weight_dtype", "speculation", "k_schedule", "replicas", "gpus", "utilisation",
            "usd_per_month", "usd_per_million_output_tokens", "simulated", "dropped_because"} <= set(o)
    assert o["simulated"]["p99_tpot_ms"] > 0
    assert png.stat().st_size > 10_000


def test_report_plan_adds_the_plan_to_the_page(tmp_path):
    out = tmp_path / "r"
    r = run_cli("report", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--workload", "gsm8k", "--plan",
                "--plan-peak-rps", "20", "--plan-slo-tpot-ms", "20", "--out", str(out))
    assert r.returncode == 0, r.stderr
    page = (out / "index.html").read_text()
    assert "Capacity plan" in page and "<b>rent " in page and "per million output tokens" in page
    bad = run_cli("report", "--model", "llama-3.1-8b", "--plan", "--out", str(tmp_path / "x"))
    assert_one_line_error(bad, "--plan needs --workload")
