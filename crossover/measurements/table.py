"""The one internal table every measured sweep is read into: points with speculation on or off."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Literal

from ..errors import CrossoverError

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
        if not (math.isfinite(self.output_throughput) and self.output_throughput >= 0):
            raise CrossoverError(
                f"{src}: output_throughput must be a finite number >= 0 tokens/s, got {self.output_throughput!r}")
        for name, v in self.metrics.items():
            if name.endswith("_ms") and v < 0:
                raise CrossoverError(f"{src}: {name} must be >= 0 ms (a latency), got {v:g}")
        if self.acceptance_length is not None and not self.acceptance_length >= 1:
            raise CrossoverError(
                f"{src}: acceptance_length must be >= 1 (it counts the bonus token), got {self.acceptance_length!r}")
        if self.acceptance_rate is not None and not 0 <= self.acceptance_rate <= 1:
            raise CrossoverError(f"{src}: acceptance_rate must be a fraction 0-1, got {self.acceptance_rate!r}")
        if self.k is not None and not (isinstance(self.k, int) and self.k >= 0):
            raise CrossoverError(f"{src}: k must be a whole number >= 0, got {self.k!r}")

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


@dataclass
class MeasuredTable:
    """Measured points from any number of files, with helpers to split and pair them by arm."""

    points: list[MeasuredPoint] = field(default_factory=list)
    _axis: tuple[int, str] | None = field(default=None, init=False, repr=False, compare=False)
    _pairs: tuple[int, list] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[MeasuredPoint]:
        return iter(self.points)

    def arm(self, name: str) -> list[MeasuredPoint]:
        """The points of one arm ("on" or "off"), sorted by load (stable for equal loads)."""
        if name not in ARMS:
            raise CrossoverError(f"arm must be 'on' or 'off', got {name!r}")
        return sorted((p for p in self.points if p.arm == name), key=lambda p: p.load)

    @property
    def load_axis(self) -> str:
        """The one load axis every point shares; a one-line error naming two files that disagree."""
        if not self.points:
            raise CrossoverError("no measured points: nothing was read")
        if self._axis is not None and self._axis[0] == len(self.points):
            return self._axis[1]  # asked once per level by the reports: checked once, not per level
        first = self.points[0]
        for p in self.points[1:]:
            if p.load_axis != first.load_axis:
                raise CrossoverError(
                    f"{first.source} is measured against {first.load_axis} but {p.source} against "
                    f"{p.load_axis}; read them separately or force one axis with load_axis")
        self._axis = (len(self.points), first.load_axis)
        return first.load_axis

    def model_ids(self) -> list[str]:
        """The distinct model ids the files name (vLLM `model_id`, SGLang `model_path`, a CSV column)."""
        return sorted({p.model_id for p in self.points if p.model_id})

    def mean_lengths(self) -> tuple[float | None, float | None]:
        """Mean prompt and output length in tokens over all points that record them (per completed request)."""
        out: list[float | None] = []
        for key in ("total_input_tokens", "total_output_tokens"):
            tokens = requests = 0.0
            for p in self.points:
                total, completed = p.metrics.get(key), p.metrics.get("completed")
                if total is not None and completed:
                    tokens += total
                    requests += completed
            out.append(tokens / requests if requests else None)
        return out[0], out[1]

    def pairs(self) -> list[tuple[float, MeasuredPoint, MeasuredPoint]]:
        """(load, off point, on point) at every load measured in both arms, by increasing load."""
        self.load_axis  # noqa: B018 - raises when the axes differ
        if self._pairs is not None and self._pairs[0] == len(self.points):
            return list(self._pairs[1])  # every report asks; pairing 10,000 levels once is enough
        off, on = self._one_per_load("off"), self._one_per_load("on")
        out = []
        j = 0  # both lists are sorted by load with one point per load: one merge pass (linear, not quadratic)
        for p_off in off:
            while j < len(on) and on[j].load < p_off.load and not same_load(on[j].load, p_off.load):
                j += 1
            if j < len(on) and same_load(p_off.load, on[j].load):
                out.append((p_off.load, p_off, on[j]))
        self._pairs = (len(self.points), out)
        return list(out)

    def _one_per_load(self, name: str) -> list[MeasuredPoint]:
        """One point per load: repeated runs at a load (e.g. `vllm bench sweep`'s three) are
        represented by the run with the median output throughput, so one outlier cannot move it."""
        groups: list[list[MeasuredPoint]] = []
        for p in self.arm(name):
            if groups and same_load(groups[-1][0].load, p.load):
                groups[-1].append(p)
            else:
                groups.append([p])
        return [sorted(g, key=lambda q: q.output_throughput)[(len(g) - 1) // 2] for g in groups]
