"""One measured run (`MeasuredPoint`), the arms and load axes, and when two loads are one level."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..errors import CrossoverError
from .limits import MAX_K, implausible, implausible_count, implausible_load

Arm = Literal["on", "off"]
LoadAxis = Literal["concurrency", "request_rate", "batch"]
ARMS: tuple[str, ...] = ("on", "off")
LOAD_AXES: tuple[str, ...] = ("concurrency", "request_rate", "batch")
# Two loads are the same level when they differ by at most this fraction of the larger one.
LOAD_RTOL = 1e-9


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured run: its arm, its load level and what it measured (vLLM metric names and units)."""

    source: str                   # the file (plus ":line" for JSONL/CSV rows, "[i]" for JSON list items)
    arm: Arm                      # speculation on or off
    load_axis: LoadAxis           # what `load` counts
    load: float                   # requests in flight, requests/s, or sequences per step
    output_throughput: float      # output tokens/s
    metrics: dict[str, float]     # every other numeric metric, vLLM names and units (ms, s, tok/s, counts)
    acceptance_length: float | None = None       # tau: tokens per verify step, bonus token included
    acceptance_rate: float | None = None         # accepted / drafted tokens, a fraction 0-1
    per_position: tuple[float, ...] | None = None  # acceptance rate at draft position 1..k, fractions
    k: int | None = None                         # draft tokens per step, when the file says
    warnings: tuple[str, ...] = ()               # e.g. "failed=3 > 0"
    model_id: str | None = None                  # the served model as the file names it (vLLM `model_id`)

    def __post_init__(self) -> None:
        src = self.source
        if self.arm not in ARMS:
            raise CrossoverError(f"{src}: arm must be 'on' or 'off', got {self.arm!r}")
        if self.load_axis not in LOAD_AXES:
            raise CrossoverError(f"{src}: load_axis must be one of {', '.join(LOAD_AXES)}, got {self.load_axis!r}")
        if not (math.isfinite(self.load) and self.load > 0):
            raise CrossoverError(f"{src}: {self.load_axis} must be a finite number > 0, got {self.load!r}")
        if why := implausible_load(self.load_axis, self.load):
            raise CrossoverError(f"{src}: {why}")
        if not (math.isfinite(self.output_throughput) and self.output_throughput >= 0):
            raise CrossoverError(
                f"{src}: output_throughput must be a finite number >= 0 tokens/s, got {self.output_throughput!r}")
        for name, v in self.metrics.items():
            if name.endswith("_ms") and v < 0:
                raise CrossoverError(f"{src}: {name} must be >= 0 ms (a latency), got {v:g}")
            if name.endswith("_ms") and (why := implausible(name, v)):
                raise CrossoverError(f"{src}: {why}")
            if why := implausible_count(name, v):
                raise CrossoverError(f"{src}: {why}")
        if self.acceptance_length is not None and not self.acceptance_length >= 1:
            raise CrossoverError(
                f"{src}: acceptance_length must be >= 1 (it counts the bonus token), got {self.acceptance_length!r}")
        if self.acceptance_rate is not None and not 0 <= self.acceptance_rate <= 1:
            raise CrossoverError(f"{src}: acceptance_rate must be a fraction 0-1, got {self.acceptance_rate!r}")
        if self.k is not None and not (isinstance(self.k, int) and 0 <= self.k <= MAX_K):
            shown = f"{len(str(self.k))} digits" if isinstance(self.k, int) and self.k >= 10**20 else repr(self.k)
            raise CrossoverError(f"{src}: k must be a whole number 0..{MAX_K} (draft tokens per step), got {shown}")

    @property
    def mean_input_len(self) -> float | None:
        """Mean prompt length in tokens (total_input_tokens / completed), or None if not measured."""
        return self._per_request("total_input_tokens")

    @property
    def mean_output_len(self) -> float | None:
        """Mean output length in tokens (total_output_tokens / completed), or None if not measured."""
        return self._per_request("total_output_tokens")

    def _per_request(self, key: str) -> float | None:
        total, completed = self.metrics.get(key), self.metrics.get("completed")
        if total is None or not completed:
            return None
        return total / completed


def same_load(a: float, b: float) -> bool:
    """Whether two load levels are the same (within LOAD_RTOL of the larger)."""
    return abs(a - b) <= LOAD_RTOL * max(abs(a), abs(b))
