"""The crossover interval of a calibration: a parametric bootstrap over measurement noise and the
uncertainty of every parameter, vectorised over the draws (`calibration.calibrate` calls it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..model.scenario import Scenario
from .sweep_fit import PARAMETERS, Observation, apply, first_crossing, residual_vector

# Bootstrap refits: Gauss-Newton steps with the Jacobian of the fit frozen (each a residual
# evaluation per synthetic sweep, not a least-squares solve); the crossover of each on a log grid of
# this many loads, interpolated (spacing ~10% of the load to twice the largest level: far finer than
# the spread of the refits).
BOOTSTRAP_STEPS = 2
BOOTSTRAP_GRID = 64


@dataclass(frozen=True)
class Interval:
    """The crossover's bootstrap interval: its quantiles (inf: no crossover up to the searched load
    in at least that share of the draws) and the share of draws whose fitted curves never cross."""

    low: float
    high: float
    never_cross: float  # share of the draws without a crossing up to twice the largest level
    draws: int

    @property
    def bounds(self) -> tuple[float, float]:
        return self.low, self.high


def interval(base: Scenario, obs: Sequence[Observation], names: list[str], x: np.ndarray, jac: np.ndarray,
             held: dict[str, tuple[float, float]], draws: int, b_max: float, seed: int,
             level: float = 0.90, progress: Callable[[int, int], None] | None = None) -> Interval:
    """The crossover's `level` interval by a parametric bootstrap, vectorised over the draws.

    Each draw is a synthetic sweep: the fitted prediction times exp(noise), the noise scale drawn
    from its posterior given the residuals (s^2 dof / chi^2_dof), parameters held (at defaults or
    bounds) drawn about their values with their spread (truncated to the bounds), and the fitted ones
    refitted by Gauss-Newton steps from the fit with its Jacobian frozen. inf: no crossover.
    `progress(done, total)` after each draw's refit step and crossing (total: draws x (steps + 1))."""
    rng = np.random.default_rng(seed)
    r0 = residual_vector(base, obs, names, x)
    dof = max(len(r0) - len(names), 1)
    sigma = np.sqrt(float(r0 @ r0) / dof * dof / rng.chisquare(dof, draws))
    eps = rng.standard_normal((draws, len(r0))) * sigma[:, None]
    hn = list(held)
    h_lo, h_hi = (np.array([PARAMETERS[n][i] for n in hn]) for i in (1, 2))
    centre, spread = (np.array([held[n][i] for n in hn]) for i in (0, 1))
    hv = np.clip(centre + spread * rng.standard_normal((draws, len(hn))), h_lo, h_hi)
    lo, hi = (np.array([PARAMETERS[n][i] for n in names]) for i in (1, 2))
    step = np.linalg.pinv(jac) if names else np.zeros((0, len(r0)))
    xb = np.tile(x, (draws, 1))
    steps = BOOTSTRAP_STEPS if names else 0
    tick = progress or (lambda done, total: None)

    def each(f, offset: int) -> list:  # f(draw) for every draw, progress after each
        return [(f(j), tick(offset + j + 1, draws * (steps + 1)))[0] for j in range(draws)]

    for it in range(steps):  # the residuals of a synthetic sweep: r(x) - r0 + eps, as r = ln(measured / predicted)
        rb = eps if it == 0 and not hn else np.array(each(
            lambda j: residual_vector(base, obs, names + hn, np.concatenate([xb[j], hv[j]])), it * draws)) - r0 + eps
        xb = np.clip(xb - rb @ step.T, lo, hi)
    d = np.array(each(lambda j: first_crossing(apply(base, names + hn, np.concatenate([xb[j], hv[j]])), obs, b_max,
                                               BOOTSTRAP_GRID), steps * draws))
    q = (1.0 - level) / 2.0
    return Interval(float(np.quantile(d, q, method="inverted_cdf")), float(np.quantile(d, 1 - q, method="inverted_cdf")),
                    float(np.mean(~np.isfinite(d))), draws)
