"""Capacity planning, figures and the HTML report."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, run_cli

from crossover.specs import load_hardware, load_model
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation


def test_plan_ranks_options_and_says_why_others_were_dropped():
    import crossover

    res = crossover.plan("llama-3.1-70b", "sharegpt", {"peak_rps": 10}, {"tpot_ms": 40},
                         search={"hardware": ["h100-sxm", "rtx-4090", "l4"], "tp": (1, 2, 4, 8)},
                         verification={"verify": 0, "jobs": 1})
    ranked = res.plan.ranked
    costs = [o.usd_per_month for o in ranked if o.usd_per_month is not None]
    assert costs == sorted(costs)  # cheapest fleet first, unpriced ones after
    assert all(o.screened.latency["tpot"] <= 40 + 1e-9 for o in ranked)
    reasons = {o.dropped_because for o in res.plan.dropped}
    assert any("does not fit" in r for r in reasons)  # 70B bf16 on one 24 GB card
    h100 = [o for o in ranked if o.hardware == "h100-sxm"]
    assert h100 and all(o.usd_per_million_output_tokens is not None for o in h100)
    for o in ranked:  # routing by load is never worse than always-on or always-off at the same hardware/TP
        twins = [x for x in ranked if (x.hardware, x.tp, x.weight_dtype) == (o.hardware, o.tp, o.weight_dtype)
                 and x.arm == "routed"]
        for t in twins:
            assert t.screened.requests_per_s >= o.screened.requests_per_s * (1 - 1e-9)


def test_tight_slo_drops_everything_with_the_reason():
    from crossover.planning.plan import plan
    from crossover.planning.pricing import costs
    from crossover.planning.traffic import constant
    from crossover.specs.workload import fixed

    hw = [load_hardware("l4")]
    res = plan(load_model("llama-3.1-8b"), hw, Speculation("eagle", 3, Acceptance.rate(0.7)), fixed(200, 200),
               constant(1.0), {"median_tpot_ms": 1.0}, costs(hw), prompt_len=200, output_len=200, tps=(1,), verify=0)
    assert not res.ranked and all("TPOT" in o.dropped_because for o in res.dropped)
    assert res.recommendation.startswith("no option meets the SLO; closest: l4 tp 1")


def test_plan_cli_json_and_plot(tmp_path):
    png = tmp_path / "plan.png"
    r = run_cli("plan", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--slo-tpot-ms", "20", "--slo-ttft-ms",
                "500", "--peak-rps", "10", "--hardware", "h100-sxm,l4", "--verify", "0", "--json", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["options"] and {"hardware", "tp", "speculation", "tokens_per_s_per_gpu",
                             "usd_per_million_output_tokens"} <= set(d["options"][0])
    assert png.stat().st_size > 10_000
    bad = run_cli("plan", "--workload", "gsm8k", "--slo-tpot-ms", "-5", "--peak-rps", "1")
    assert_one_line_error(bad, "--slo-tpot-ms")


@pytest.mark.parametrize("name", ["plot_speedup_family", "plot_roofline", "plot_breakdown", "plot_prediction"])
def test_each_figure_is_written_and_not_empty(tmp_path, name):
    from crossover.reporting import plots
    from crossover.cli import build_parser, scenario_from_args
    from crossover.analysis.curves import predict

    args = build_parser().parse_args(["predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"])
    sc, inputs = scenario_from_args(args)
    for suffix in (".png", ".svg"):
        path = tmp_path / f"{name}{suffix}"
        if name == "plot_prediction":
            plots.plot_prediction(predict(sc, [1, 8, 64, 256]), inputs, str(path))
        else:
            getattr(plots, name)(sc, inputs, str(path))
        assert path.stat().st_size > 5_000


@pytest.mark.slow  # simulates and draws every figure of the page: ~3 s
def test_report_writes_one_self_contained_page(tmp_path):
    out = tmp_path / "review"
    r = run_cli("report", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--concurrency", "1,8", "--num-prompts",
                "60", "--out", str(out))
    assert r.returncode == 0, r.stderr
    page = (out / "index.html").read_text()
    assert page.count("data:image/png;base64,") >= 5  # figures embedded, no side files
    assert "llama-3.1-8b" in page and "Serving simulation" in page and "speculative-config" in page
    assert list(out.iterdir()) == [out / "index.html"]
    bad = run_cli("report", "--concurrency", "1,8", "--out", str(tmp_path / "x"))
    assert_one_line_error(bad, "--workload")
