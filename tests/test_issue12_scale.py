"""Issue 12 item 20: `measured` is linear in levels (it was quadratic: pairing, the load axis asked
per level, a scenario and a curve per physics check)."""

import sys
import time
from pathlib import Path

import pytest

import crossover
from crossover.curves import evaluate
from crossover.physics import check, speed_of_light

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_measured import write_levels  # noqa: E402


def _seconds(path, **kw):
    t = time.perf_counter()
    r = crossover.measured(files=[str(path)], **kw)
    r.to_dict()
    r.to_text()
    return time.perf_counter() - t


def test_measured_time_grows_linearly_with_levels(tmp_path):
    small, big = tmp_path / "s.csv", tmp_path / "b.csv"
    write_levels(small, 500)
    write_levels(big, 4000)
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", tp=1, k=3)
    _seconds(small, **kw)  # warm
    t_small = min(_seconds(small, **kw) for _ in range(2))
    t_big = min(_seconds(big, **kw) for _ in range(2))
    # 8x the levels: a quadratic reader took ~64x (4,000 levels: ~40 s); linear is ~8x
    assert t_big < 20 * t_small + 0.5, (t_small, t_big)
    res = crossover.measured(files=[str(big)])
    assert len(res.to_dict()["points"]) == 4000


def test_vectorised_physics_check_equals_the_per_point_bound(tmp_path):
    path = tmp_path / "s.csv"
    write_levels(path, 30)
    res = crossover.measured(files=[str(path)], model="llama-3.1-8b", hardware="h100-sxm", tp=1, k=3)
    sc = res.scenario
    for c, p in zip(res.checks, sorted(res.table.points, key=lambda q: (q.load, q.arm != "off", q.source))):
        sol = speed_of_light(sc, p.acceptance_length if p.arm == "on" and p.acceptance_length else None)
        cv = evaluate(sol, [c.batch])
        want = float(cv.tokens_per_s_on[0] if p.arm == "on" else cv.tokens_per_s_off[0])
        assert c.bound == pytest.approx(want, rel=1e-9)
    assert check(sc, []) == []
