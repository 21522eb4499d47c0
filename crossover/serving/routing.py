"""Which k an engine step runs at: fixed (off or on), a best-k schedule by running batch, or a
hysteresis band on the running batch (routing by queue length)."""

from __future__ import annotations

import numpy as np

from ..errors import CrossoverError


def check_route(schedule: np.ndarray | None, hysteresis: tuple[int, int] | None) -> None:
    """One routing rule at most; a hysteresis band with 1 <= low <= high."""
    if schedule is not None and hysteresis is not None:
        raise CrossoverError("route by the best-k schedule or by hysteresis, not both")
    if hysteresis is not None:
        low, high = hysteresis
        if not (1 <= low <= high):
            raise CrossoverError(f"hysteresis thresholds must satisfy 1 <= low <= high (got {low}, {high})")


class Router:
    """k for a step at a running batch. A schedule gives k = schedule[batch - 1] (its last entry past
    its end); a hysteresis band (low, high) speculates at `k` until the batch rises above `high`, then
    decodes plainly until it falls below `low` (the band keeps it from flapping on every admission
    and completion); otherwise `k` when speculating, else 0."""

    def __init__(self, k: int, speculate: bool, schedule: np.ndarray | None = None,
                 hysteresis: tuple[int, int] | None = None) -> None:
        check_route(schedule, hysteresis)
        self.k, self.speculate = k, speculate
        self.schedule = schedule if speculate else None
        self.hysteresis = hysteresis if speculate else None
        self.speculating = True  # the hysteresis band's state

    def __call__(self, batch: int) -> int:
        if self.hysteresis is not None:
            low, high = self.hysteresis
            if batch > high:
                self.speculating = False
            elif batch < low:
                self.speculating = True
            return self.k if self.speculating else 0
        if self.schedule is not None:
            return int(self.schedule[min(batch, len(self.schedule)) - 1])
        return self.k if self.speculate else 0
