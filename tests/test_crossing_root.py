"""The crossover root found on the priced curve (analysis/curves.py find_crossings): the cubic through
the 4 grid values around a bracket, and the bracket priced again where the values show a step."""

import numpy as np
import pytest

import crossover
from crossover.analysis.curves import crossing_grid, find_crossings, speedup, _smooth


def test_a_cubic_in_log_batch_is_located_exactly_on_the_grid():
    """speedup(b) = 1 - (ln b / ln 100)^3 is a cubic in ln b: the cubic through any 4 grid values is
    the function itself, so its root, b = 100, comes out to rounding (hand-computed: 1 - 1^3 = 0)."""
    sc = crossover.scenario()
    xs = crossing_grid(512.0)
    f = 1.0 - (np.log(xs) / np.log(100.0)) ** 3
    (c,) = find_crossings(sc, 512.0, on_grid=(xs, 1.0 + f))
    assert c.batch == pytest.approx(100.0, rel=1e-9) and c.direction == "down"


def test_a_step_is_not_taken_for_a_smooth_root():
    """Values that jump across a bracket (third difference as large as the first) are a step; a
    straight line in log batch is smooth."""
    line = np.linspace(0.5, -0.5, 10)
    assert _smooth(line, 4)
    step = np.array([0.30, 0.25, 0.20, -0.40, -0.45, -0.50])
    assert not _smooth(step, 2)


def test_a_step_in_the_priced_curve_is_located_by_pricing_its_bracket():
    """Llama-3.1-8B on an H100 under SGLang with the prefill share steps across 1.0 near batch 158
    (its speedup jumps from +0.003 to -0.001 within one batch): the root lies at the step, as a
    bisection on the priced curve finds it, to 0.2% (the step lies between two of the 32 points)."""
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, method="eagle", k=3,
                            acceptance=0.7, engine="sglang", prompt_len=1000, output_len=200)
    roots = [c.batch for c in find_crossings(sc, 512.0)]
    lo, hi = 140.0, 180.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if speedup(sc, [mid])[0] > 1.0 else (lo, mid)
    assert any(abs(r / lo - 1.0) < 2e-3 for r in roots), (roots, lo)


def test_the_crossover_is_where_speculation_stops_paying_not_a_rise_below_it():
    """Mixtral on 2 x H100 with SGLang's n-gram proposer: slower at batch 1 (four verify tokens load more
    experts than one) and faster from batch 2, then slower again near batch 329. crossover_batch is that
    fall, the rise is one of the crossings; over 1..64 there is no crossover and the text says why."""
    import crossover

    sc = crossover.scenario(model="mixtral-8x7b", tp=2, engine="sglang", method="ngram")
    whole = crossover.predict(sc)
    ups = [c for c in whole.to_dict()["crossings"] if c["direction"] == "up"]
    assert ups and ups[0]["batch"] < 4 and whole.crossover_batch > 100
    assert whole.to_dict()["crossover_batch"] == next(c["batch"] for c in whole.to_dict()["crossings"]
                                                       if c["direction"] == "down")
    text = whole.to_text()
    assert "speculation stops paying off there" in text and "speculation starts paying off there" in text
    low = crossover.predict(sc, batches=[1, 2, 4, 16, 64])
    assert low.crossover_batch is None and low.to_dict()["crossings"][0]["direction"] == "up"
    assert "none in batch 1..64 where speculation stops paying off; it is slower below batch" in low.to_text()


def test_a_crossover_on_a_captured_graph_size_is_named_as_the_padding():
    """SGLang captures graphs at listed request counts (…, 24, 32, 40, …) and pads a step to the next:
    Llama-3.1-8B with EAGLE k = 5 at acceptance 0.5 crosses at batch 32 because above it both servers
    replay the 40-request graph. The JSON names the edge; a smooth crossing (vLLM V1, whose token-size
    padding is not priced) names none."""
    import crossover

    r = crossover.predict(crossover.scenario(model="llama-3.1-8b", engine="sglang", acceptance=0.5, k=5))
    d = r.to_dict()
    assert d["crossover_batch"] == pytest.approx(32.0, abs=0.01)
    assert d["crossover_at_graph_size"] == {"server": "speculating", "batch": pytest.approx(32.0, abs=0.01),
                                            "size": 32.0, "next": 40.0, "unit": "requests"}
    assert "replays the 32-request graph up to it and pads to the 40-request one above" in r.to_text()
    smooth = crossover.predict(crossover.scenario(model="llama-3.1-8b", acceptance=0.5, k=5)).to_dict()
    assert smooth["crossover_batch"] is not None and smooth["crossover_at_graph_size"] is None
