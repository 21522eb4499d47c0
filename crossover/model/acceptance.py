"""Acceptance: how many tokens a verify step yields, from an i.i.d. rate, a mean accepted length
(tau, as engines report it) or per-position rates (as vLLM and SGLang print them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

from ..errors import CrossoverError


def tau_from_rate(alpha, k):
    """Expected tokens per verify step, bonus included: (1 - a^(k+1)) / (1 - a) (Leviathan et al.);
    k + 1 at a = 1. Scalars give a float; arrays (alpha and k broadcast) give an array."""
    a = np.asarray(alpha, float)
    kk = np.asarray(k, float)
    full = a >= 1.0
    out = np.where(full, kk + 1.0, (1.0 - np.power(a, kk + 1.0)) / (1.0 - np.where(full, 0.0, a)))
    return float(out) if out.ndim == 0 else out


def rate_from_tau(tau: float, k: int) -> float:
    """The i.i.d. acceptance rate whose expected tokens per step at window k is `tau`."""
    if not 1.0 <= tau <= k + 1:
        raise CrossoverError(f"tau {tau:g} must lie in [1, k+1] = [1, {k + 1}] for k = {k}")
    if tau >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0  # tau_from_rate is increasing in alpha: bisection to 1e-12
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if tau_from_rate(mid, k) < tau:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Acceptance:
    """Per-position survival: P(the first j drafted tokens are all accepted), j = 1..k.

    Built from an i.i.d. rate (survival a^j), from the mean accepted length tau as engines report
    it (bonus included; the i.i.d. rate that reproduces it), or from per-position rates as vLLM and
    SGLang print them (the fraction of steps whose position j was accepted, i.e. survival).
    """

    kind: Literal["rate", "tau", "per_position"]
    value: float | tuple[float, ...]
    match_rate: float = 1.0  # n-gram: share of steps with a prompt match (else nothing is drafted)
    # Where the value and the match rate came from: "given" (by the user), "calibration", "workload"
    # (the workload file's), "default" (crossover.defaults: an assumption every output names).
    origin: str = field(default="given", compare=False)
    match_origin: str = field(default="given", compare=False)

    @classmethod
    def rate(cls, alpha: float, match_rate: float = 1.0) -> "Acceptance":
        """I.i.d. per-token acceptance `alpha` in [0, 1)."""
        if not 0.0 <= alpha < 1.0:
            raise CrossoverError(f"acceptance {alpha:g} must lie in [0, 1) (a rate of 1 would never reject)")
        return cls("rate", float(alpha), _check_match(match_rate))

    @classmethod
    def mean_length(cls, tau: float, match_rate: float = 1.0) -> "Acceptance":
        """Mean tokens per step tau (bonus included), as engines report 'mean acceptance length'."""
        if not tau >= 1.0:
            raise CrossoverError(f"tau {tau:g} must be >= 1 (it counts the bonus token)")
        return cls("tau", float(tau), _check_match(match_rate))

    @classmethod
    def per_position(cls, rates: Sequence[float], match_rate: float = 1.0) -> "Acceptance":
        """Per-position acceptance (survival) rates, non-increasing, each in [0, 1)."""
        r = tuple(float(x) for x in rates)
        if not r:
            raise CrossoverError("per-position acceptance needs at least one rate")
        if any(not 0.0 <= x < 1.0 for x in r):
            raise CrossoverError("per-position acceptance rates must each lie in [0, 1)")
        if any(b > a + 1e-12 for a, b in zip(r, r[1:])):
            raise CrossoverError(
                "per-position acceptance rates must not increase with position (position j is accepted "
                "only if j-1 was); give them as engines report them, e.g. 0.8,0.6,0.45")
        return cls("per_position", r, _check_match(match_rate))

    def survival(self, k: int) -> np.ndarray:
        """P(first j drafts accepted | a draft was proposed), j = 1..k."""
        if k < 1:
            raise CrossoverError(f"k must be >= 1 (got {k})")
        if self.kind == "rate":
            return float(self.value) ** np.arange(1, k + 1)  # type: ignore[operator]
        if self.kind == "tau":
            return rate_from_tau(float(self.value), k) ** np.arange(1, k + 1)  # type: ignore[arg-type]
        rates = self.value
        assert isinstance(rates, tuple)
        if k > len(rates):
            raise CrossoverError(f"k = {k} but only {len(rates)} per-position rates were given; give one per position")
        return np.asarray(rates[:k])

    def tau(self, k: int) -> float:
        """Expected tokens per verify step per sequence, bonus included, in [1, k+1]."""
        return 1.0 + self.match_rate * float(self.survival(k).sum())

    def alpha(self, k: int) -> float:
        """The equivalent i.i.d. rate at window k."""
        return rate_from_tau(1.0 + float(self.survival(k).sum()), k)

    def conditional(self, k: int) -> np.ndarray:
        """a_j = s_j / s_(j-1), j = 1..k: P(draft j is accepted | drafts 1..j-1 were)."""
        s = self.survival(k)
        return s / np.concatenate([[1.0], s[:-1]]).clip(1e-300)

    def as_rate(self, k: int) -> "Acceptance":
        """The i.i.d. rate equivalent at window k (capped at 0.999), usable at any other window: a
        mean length (tau) describes one k only."""
        return Acceptance.rate(min(self.alpha(k), 0.999), self.match_rate)


def _check_match(m: float) -> float:
    if not 0.0 <= m <= 1.0:
        raise CrossoverError(f"match rate {m:g} must lie in [0, 1]")
    return float(m)
