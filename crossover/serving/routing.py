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


ROUTE_ON = 0  # the band's state (one value; the loop's State.ROUTE): 1 while speculating


def route_k(batch: int, k: int, schedule: np.ndarray, low: int, high: int, state: np.ndarray) -> int:
    """THE routing rule (the simulator's compiled loop runs this function, `Router` calls it): with a
    band (low >= 1), `k` until the batch rises above `high`, then 0 until it falls below `low`
    (state[ROUTE_ON]: 1 while speculating); with a schedule (non-empty), schedule[batch - 1], its last
    entry past its end; otherwise `k`."""
    if low >= 1:
        if batch > high:
            state[ROUTE_ON] = 0
        elif batch < low:
            state[ROUTE_ON] = 1
        return k if state[ROUTE_ON] else 0
    if len(schedule):
        return int(schedule[min(batch, len(schedule)) - 1])
    return k


class Router:
    """k for a step at a running batch. A schedule gives k = schedule[batch - 1] (its last entry past
    its end); a hysteresis band (low, high) speculates at `k` until the batch rises above `high`, then
    decodes plainly until it falls below `low` (the band keeps it from flapping on every admission
    and completion); otherwise `k` when speculating, else 0."""

    def __init__(self, k: int, speculate: bool, schedule: np.ndarray | None = None,
                 hysteresis: tuple[int, int] | None = None) -> None:
        check_route(schedule, hysteresis)
        self.k = k if speculate else 0
        self.schedule = np.asarray(schedule, np.int64) if speculate and schedule is not None else np.zeros(0, np.int64)
        self.low, self.high = hysteresis if speculate and hysteresis is not None else (0, 0)
        self.state = np.ones(1, np.int64)  # the hysteresis band's state (state[ROUTE_ON]): speculating

    @property
    def ks(self) -> list[int]:
        """Every k this router can return."""
        if self.low >= 1:
            return sorted({self.k, 0})
        if len(self.schedule):
            return sorted({int(x) for x in self.schedule})
        return [self.k]

    def __call__(self, batch: int) -> int:
        return route_k(batch, self.k, self.schedule, self.low, self.high, self.state)
