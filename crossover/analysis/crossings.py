"""Where a per-level ratio (speculation on / off, > 1: better with it) crosses 1 between measured or
simulated levels: every sign change, the first sustained one, or the side it stayed on. Pure
numbers (no model): `measured` uses it without loading the step model."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# A ratio within this fraction of 1 is "equal within noise": no side, and no sign change through it.
EQUAL_RTOL = 0.01


def rounded(values: list[float], digits: int) -> list[float]:
    """`[round(v, digits) for v in values]`, exactly, for a list of floats (10,000s of levels and
    checks): round() gives the double nearest to k / 10**digits, k the integer nearest to the exact
    v * 10**digits (ties to even); so does rint(v * 10**digits) / 10**digits (a correctly rounded
    division) wherever the product's rounding (half an ulp) cannot move it across a half-integer.
    Values near a tie, beyond 2**52 after scaling or not finite take round() itself, as does a
    list with anything but floats (round() keeps an int an int)."""
    if not all(type(v) is float for v in values):
        return [round(v, digits) for v in values]
    scale = 10.0 ** digits
    p = np.array(values, np.float64) * scale
    out = (np.rint(p) / scale).tolist()
    with np.errstate(invalid="ignore"):  # NaN and infinities compare False: round() takes them
        clear = (np.abs(p) < 2.0 ** 52) & (np.abs(p - np.floor(p) - 0.5) > 2.0 ** -50 * np.maximum(np.abs(p), 1.0))
    for i in np.flatnonzero(~clear).tolist():
        out[i] = round(values[i], digits)
    return out


@dataclass(frozen=True)
class LevelCrossings:
    """Where a per-level ratio (> 1: speculation better) changes side, between levels sorted by load.

    `crossings`: every sign change, each (load interpolated in log(load) between the last level on
    the old side and the first on the new, "down" when speculation stops paying off, "up" when it
    starts); `crossover`: the first sustained one (the side it enters holds at the next level, or
    the sweep ends there); `side` when nothing crosses: "on", "off" or "equal" (within noise at
    every level)."""

    crossings: tuple[tuple[float, str], ...]
    crossover: float | None
    side: str | None

    @property
    def bracketed(self) -> bool:
        """Whether a crossover lies between two measured levels."""
        return self.crossover is not None

    def crossings_json(self) -> list[dict[str, Any]]:
        """The crossings as JSON objects (`level`, `direction`)."""
        return [{"level": round(x, 4), "direction": d} for x, d in self.crossings]


def level_crossings(loads, ratios, rtol: float = EQUAL_RTOL) -> LevelCrossings:
    """The sign changes of ratio - 1 over load (levels sorted by load here, ties in their given
    order; ratios within `rtol` of 1 are on neither side), the first sustained crossover, or the side
    the ratio stayed on."""
    x = np.asarray(loads, float).ravel()
    r = np.asarray(ratios, float).ravel()
    order = np.argsort(x, kind="stable")
    x, r = x[order], r[order]
    keep = np.isfinite(r)
    x, r = x[keep], r[keep]
    sign = (r - 1 > rtol).astype(int) - (r - 1 < -rtol).astype(int)
    sided = sign != 0
    xs, rs, ss = x[sided], r[sided], sign[sided]
    change = np.nonzero(ss[1:] != ss[:-1])[0] + 1  # index i: sided[i - 1] -> sided[i] changes side
    crossings: list[tuple[float, str]] = []
    sustained: list[bool] = []
    for i in change.tolist():
        xa, ra, sa, xb, rb, sb = float(xs[i - 1]), float(rs[i - 1]), int(ss[i - 1]), float(xs[i]), float(rs[i]), int(ss[i])
        lx = math.log(xa) + (math.log(xb) - math.log(xa)) * (ra - 1) / (ra - rb)
        crossings.append((math.exp(lx), "down" if sa > 0 else "up"))
        sustained.append(i + 1 >= len(ss) or int(ss[i + 1]) == sb)
    cross = next((c[0] for c, ok in zip(crossings, sustained) if ok), None)
    side = None
    if not crossings:
        side = "equal" if not len(ss) else ("on" if ss[0] > 0 else "off")
    return LevelCrossings(tuple(crossings), cross, side)


def crossing_between_levels(loads, ratios) -> float | None:
    """First load where a ratio passes through 1 (no noise band), interpolated linearly in log(load)
    between the two bracketing levels; None when no pair of levels brackets 1."""
    lc = level_crossings(loads, ratios, rtol=0.0)
    return lc.crossings[0][0] if lc.crossings else None
