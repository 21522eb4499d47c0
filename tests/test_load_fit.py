"""Kong et al.'s load fit L(QPS) = C1 / (1 - QPS C2) per arm and the break-even rate it implies
(issue 22 item 4; crossover.analysis.load_fit), on hand-computed numbers."""

from __future__ import annotations

import pytest

from crossover.analysis.load_fit import break_even, fit_load

QPS = [1.0, 2.0, 4.0]
# off: C1 = 0.5 s, C2 = 0.05 s: L = 0.5 / 0.95, 0.5 / 0.9, 0.5 / 0.8
OFF = [0.5 / 0.95, 0.5 / 0.9, 0.625]
# on: C1 = 0.3 s, C2 = 0.08 s: L = 0.3 / 0.92, 0.3 / 0.84, 0.3 / 0.68
ON = [0.3 / 0.92, 0.3 / 0.84, 0.3 / 0.68]


def test_the_fit_recovers_c1_and_c2_of_an_exact_sweep():
    off = fit_load(QPS, OFF)
    assert off.c1 == pytest.approx(0.5, rel=1e-12) and off.c2 == pytest.approx(0.05, rel=1e-12)
    assert off.r2 == pytest.approx(1.0) and off.points == 3 and off.saturation_qps == pytest.approx(20.0)
    assert off.to_dict()["c1_ms"] == pytest.approx(500.0) and off.to_dict()["c2_ms_per_request"] == pytest.approx(50.0)
    assert float(off.latency(10.0)) == pytest.approx(1.0)  # 0.5 / (1 - 0.5)
    assert float(off.latency(25.0)) == float("inf")  # beyond saturation


def test_break_even_rate_by_hand():
    # C1_R = 0.3 / 0.5 = 0.6, C2_R = 0.08 / 0.05 = 1.6: r* = (1 - 0.6) / (1.6 - 0.6) = 0.4, QPS* = 0.4 / 0.05 = 8
    b = break_even(fit_load(QPS, OFF), fit_load(QPS, ON))
    assert b["c1_ratio"] == pytest.approx(0.6) and b["c2_ratio"] == pytest.approx(1.6)
    assert b["r_star"] == pytest.approx(0.4) and b["qps"] == pytest.approx(8.0)
    # there both arms wait the same: 0.5 / (1 - 8 x 0.05) = 0.3 / (1 - 8 x 0.08) = 0.8333 s
    assert 0.5 / (1 - 8 * 0.05) == pytest.approx(0.3 / (1 - 8 * 0.08))


def test_no_break_even_below_saturation_is_said():
    # on: C1 0.3, C2 0.04: faster at zero load and cheaper per request -> r* = 0.4 / (0.8 - 0.6) = 2 > 1
    on = fit_load(QPS, [0.3 / (1 - q * 0.04) for q in QPS])
    b = break_even(fit_load(QPS, OFF), on)
    assert b["r_star"] == pytest.approx(2.0) and b["qps"] is None and "lowers the latency at every rate" in b["why"]


def test_too_few_or_saturated_levels_give_no_fit():
    assert fit_load([2.0, 2.0], [1.0, 1.1]) is None  # one distinct rate
    assert fit_load([1.0, 2.0], [float("nan"), 1.0]) is None
    # 1 / L rising with the rate: the intercept is fine, C2 < 0 (latency falls with load)
    flat = fit_load([1.0, 2.0], [1.0, 0.8])  # 1 / L = 0.75 + 0.25 QPS: C1 = 4 / 3, C2 = -1 / 3
    assert flat.c1 == pytest.approx(4 / 3) and flat.c2 == pytest.approx(-1 / 3) and flat.saturation_qps is None
    assert fit_load([1.0, 2.0], [1.0, 0.5]) is None  # 1 / L = 0 + 1 QPS: no zero-load latency
    assert "does not grow with load" in break_even(flat, flat)["why"]


def test_simulate_fits_each_arm_of_a_rate_sweep_below_saturation():
    """`simulate --request-rate` reports the same fit (SweepResult.load_fit): latencies made by hand from
    C1 = 2 s, C2 = 50 ms/request (off) and C1 = 1 s, C2 = 100 ms/request (on) at 1, 2, 4 req/s are fitted
    back exactly; a saturated level is left out of its arm's fit; C2(on)/C2(off) = 2, r* = (1 - 0.5) /
    (2 - 0.5) = 1/3, the break-even rate r* / C2_off = 6.67 req/s; a concurrency sweep has none."""
    from crossover.reporting.serving import load_fit_lines
    from crossover.serving.sweep import Level, SweepResult

    def lat(c1, c2, q):
        return 1e3 * c1 / (1 - q * c2)

    levels = [Level(q, {"mean_e2el_ms": lat(2.0, 0.05, q)}, {"mean_e2el_ms": lat(1.0, 0.1, q)}) for q in (1, 2, 4)]
    levels.append(Level(9.0, {"mean_e2el_ms": 1e6, "saturated": True}, {"mean_e2el_ms": 2e6, "saturated": True}))
    lf = SweepResult("request_rate", levels).load_fit
    assert lf["off"]["c1_ms"] == pytest.approx(2000) and lf["off"]["c2_ms_per_request"] == pytest.approx(50)
    assert lf["on"]["c1_ms"] == pytest.approx(1000) and lf["on"]["c2_ms_per_request"] == pytest.approx(100)
    assert lf["off"]["levels"] == 3 and lf["c2_ratio"] == pytest.approx(2.0)
    assert lf["r_star"] == pytest.approx(1 / 3) and lf["qps"] == pytest.approx(20 / 3)
    assert "C2(on)/C2(off) 2.000; break-even 6.67 req/s" in load_fit_lines(lf)[0]
    assert SweepResult("concurrency", levels).load_fit is None
    assert SweepResult("request_rate", levels[:1]).load_fit is None  # one level: no line to fit
