"""The one root finder of the validation scripts: calibrating acceptance to a published point."""

from __future__ import annotations


def bisect(f, lo: float, hi: float, target: float, iters: int = 40, clamp: bool = True) -> float:
    """x in [lo, hi] with f(x) = target for increasing f; with `clamp`, a target beyond f's range
    returns that end at once (without, the bisection walks to it)."""
    if clamp:
        if f(hi) < target:
            return hi
        if f(lo) > target:
            return lo
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)
