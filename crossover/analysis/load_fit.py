"""Kong et al.'s load model of a request-rate sweep, fitted to each arm's mean latency.

Source: Kong et al., arXiv 2605.15051 (MIT + Red Hat AI, 2026-05), as read through a technical review
of it (zzz0906.github.io, 2026-05-16; the paper's data are not public). Below saturation a request's latency grows
with the requests in flight B, L = C1 + B C2 (C1 the zero-load latency, C2 the extra latency per
concurrent request), and Little's law B = QPS L gives

    L(QPS) = C1 / (1 - QPS C2).

With speculation both constants change: C1_R = C1_on / C1_off (below 1: a request alone finishes
sooner) and C2_R = C2_on / C2_off (above 1 in most of their configurations: each extra request costs
more). With r = QPS C2_off, the latency speedup off/on is (1 / C1_R) (1 + (1 - C2_R) r / (1 - r)),
which passes 1 at r* = (1 - C1_R) / (C2_R - C1_R): the break-even rate QPS* = r* / C2_off. Pure
numbers, no model: `measured` shows it beside a rate sweep, which is judged on latency (its output
tokens/s only tracks the offered rate until saturation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class LoadFit:
    """L(QPS) = C1 / (1 - QPS C2) fitted to one arm: C1 in seconds, C2 in seconds per request in flight."""

    c1: float
    c2: float
    points: int
    r2: float  # of the straight line 1 / L = 1 / C1 - (C2 / C1) QPS the fit is

    def latency(self, qps) -> np.ndarray:
        """The fitted latency at `qps` (inf at and beyond saturation, QPS >= 1 / C2)."""
        q = np.asarray(qps, float)
        with np.errstate(divide="ignore"):
            return np.where(q * self.c2 < 1.0, self.c1 / (1.0 - q * self.c2), np.inf)

    @property
    def saturation_qps(self) -> float | None:
        """1 / C2: the rate where the fitted latency diverges (None when C2 <= 0: no growth with load)."""
        return 1.0 / self.c2 if self.c2 > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"c1_ms": self.c1 * 1e3, "c2_ms_per_request": self.c2 * 1e3, "levels": self.points, "r2": self.r2,
                "saturation_qps": self.saturation_qps}


def fit_load(qps: Sequence[float], latency_s: Sequence[float]) -> LoadFit | None:
    """C1 and C2 of one arm from its levels (request rates and mean end-to-end latencies in seconds):
    1 / L = 1 / C1 - (C2 / C1) QPS is a straight line in QPS, fitted by ordinary least squares (a + b
    QPS: C1 = 1 / a, C2 = -b / a). None with fewer than two distinct rates, a latency that is not
    positive and finite, or an intercept a <= 0 (no zero-load latency: the levels are all saturated)."""
    q, lat = np.asarray(qps, float), np.asarray(latency_s, float)
    keep = np.isfinite(q) & np.isfinite(lat) & (lat > 0) & (q > 0)
    q, y = q[keep], 1.0 / lat[keep]
    if len(np.unique(q)) < 2:
        return None
    qm, ym = q.mean(), y.mean()
    b = float(((q - qm) * (y - ym)).sum() / ((q - qm) ** 2).sum())
    a = float(ym - b * qm)
    if not a > 0:
        return None
    resid, spread = y - (a + b * q), ((y - ym) ** 2).sum()
    r2 = float(1.0 - (resid ** 2).sum() / spread) if spread > 0 else 1.0
    return LoadFit(1.0 / a, -b / a, int(len(q)), r2)


def break_even(off: LoadFit, on: LoadFit) -> dict[str, Any]:
    """C1_R, C2_R and the break-even rate they imply (Kong et al.): r* = (1 - C1_R) / (C2_R - C1_R),
    QPS* = r* / C2_off. `qps` is None where the fitted curves do not cross below the off arm's
    saturation (0 < r* < 1), with why."""
    out: dict[str, Any] = {"c1_ratio": on.c1 / off.c1, "c2_ratio": None, "r_star": None, "qps": None, "why": None}
    if off.c2 <= 0:
        out["why"] = "the off arm's latency does not grow with load (C2 <= 0): no break-even rate"
        return out
    c1r, c2r = on.c1 / off.c1, on.c2 / off.c2
    out["c2_ratio"] = c2r
    if math.isclose(c2r, c1r, rel_tol=1e-12, abs_tol=1e-15):
        out["why"] = "C1_R = C2_R: the latency ratio is the same at every rate"
        return out
    r_star = (1.0 - c1r) / (c2r - c1r)
    out["r_star"] = r_star
    if not 0.0 < r_star < 1.0:
        faster = c1r < 1.0
        out["why"] = (f"r* = {r_star:.3g} lies outside (0, 1): speculation {'lowers' if faster else 'raises'} the "
                      f"latency at every rate below the off arm's saturation")
        return out
    out["qps"] = r_star / off.c2
    return out
