"""The one internal table every measured sweep is read into: points with speculation on or off,
held as column arrays (numpy), one row per measured run; `MeasuredPoint`s are made on demand."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Literal, Sequence

import numpy as np

from ..errors import CrossoverError
from .fields import implausible

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
            if name.endswith("_ms") and (why := implausible(name, v)):
                raise CrossoverError(f"{src}: {why}")
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


def _same_loads(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`same_load` element by element."""
    return np.abs(a - b) <= LOAD_RTOL * np.maximum(np.abs(a), np.abs(b))


# --------------------------------------------------------------------------- columns

_NAN = float("nan")


class Columns:
    """Measured runs as arrays, one row per run (what the readers build, what the table holds).

    load, output_throughput, acceptance_length, acceptance_rate: float64 (NaN: not reported);
    on: bool (speculation on); axis: index into LOAD_AXES; k: int64 (-1: not reported); metrics:
    name -> float64 (NaN: not measured); model: index into `model_ids` (-1: none); a row's source
    is `bases[base[i]]` followed by its line number `line[i]` when that is >= 0. Per-position
    rates and warnings are rare: dicts by row."""

    ARRAYS = ("load", "output_throughput", "acceptance_length", "acceptance_rate", "on", "axis", "k", "model",
              "base", "line")
    DTYPES = {"on": bool, "axis": np.int8, "k": np.int64, "model": np.int32, "base": np.int32, "line": np.int32}

    def __init__(self, n: int = 0) -> None:
        for name in self.ARRAYS:
            setattr(self, name, np.empty(n, self.DTYPES.get(name, np.float64)))
        self.metrics: dict[str, np.ndarray] = {}
        self.bases: list[str] = []
        self.model_ids: list[str] = []
        self.per_position: dict[int, tuple[float, ...]] = {}
        self.warnings: dict[int, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self.load)

    def source(self, i: int) -> str:
        line = int(self.line[i])
        base = self.bases[int(self.base[i])]
        return base if line < 0 else f"{base}{line}"

    def sources(self, rows: np.ndarray) -> list[str]:
        return [self.source(int(i)) for i in rows]

    def metric(self, name: str) -> np.ndarray:
        """A metric's column (NaN where a run does not report it; all NaN when none does)."""
        col = self.metrics.get(name)
        return col if col is not None else np.full(len(self), _NAN)

    def point(self, i: int) -> MeasuredPoint:
        """Row i as a MeasuredPoint (validated when it was read: not checked again)."""
        return self.points_at([i])[0]

    def points_at(self, rows) -> list[MeasuredPoint]:
        """The given rows as MeasuredPoints, in that order (validated when read: not checked again)."""
        rows = np.asarray(rows, np.int64)
        lists = {name: getattr(self, name)[rows].tolist() for name in self.ARRAYS}
        metrics = [(name, col[rows].tolist()) for name, col in self.metrics.items()]
        bases, models, per_position, warnings = self.bases, self.model_ids, self.per_position, self.warnings
        new, out = object.__new__, []
        for j, i in enumerate(rows.tolist()):
            tau, rate, k, model, line = (lists["acceptance_length"][j], lists["acceptance_rate"][j], lists["k"][j],
                                         lists["model"][j], lists["line"][j])
            base = bases[lists["base"][j]]
            p = new(MeasuredPoint)
            p.__dict__.update(
                source=base if line < 0 else f"{base}{line}", arm="on" if lists["on"][j] else "off",
                load_axis=LOAD_AXES[lists["axis"][j]], load=lists["load"][j],
                output_throughput=lists["output_throughput"][j],
                metrics={name: col[j] for name, col in metrics if col[j] == col[j]},
                acceptance_length=None if tau != tau else tau, acceptance_rate=None if rate != rate else rate,
                per_position=per_position.get(i), k=None if k < 0 else k, warnings=warnings.get(i, ()),
                model_id=None if model < 0 else models[model])
            out.append(p)
        return out

    def points(self) -> list[MeasuredPoint]:
        return self.points_at(np.arange(len(self)))

    @classmethod
    def concat(cls, parts: Sequence[Columns]) -> Columns:
        """Rows of every part in order, one array at a time: the parts are used up (their arrays
        are dropped as they are copied, so a large table is never held twice)."""
        parts = [p for p in parts if len(p)]
        if len(parts) <= 1:
            return parts[0] if parts else cls(0)
        out = cls(0)
        sizes = [len(p) for p in parts]
        bases: dict[str, int] = {}
        models: dict[str, int] = {}
        for name in cls.ARRAYS:
            arrays = []
            for p in parts:
                a = getattr(p, name)
                if name in ("base", "model"):
                    own, known, names = ((p.bases, bases, out.bases) if name == "base"
                                         else (p.model_ids, models, out.model_ids))
                    remap = np.array([_intern(known, names, s) for s in own] + [-1], np.int32)
                    a = remap[a]  # -1 (no model) indexes the last entry, -1
                arrays.append(a)
                setattr(p, name, None)
            setattr(out, name, np.concatenate(arrays))
            del arrays
        for name in dict.fromkeys(n for p in parts for n in p.metrics):
            out.metrics[name] = np.concatenate([p.metrics.pop(name, None) if name in p.metrics else np.full(n, _NAN)
                                                for p, n in zip(parts, sizes)])
        offset = 0
        for p, n in zip(parts, sizes):
            out.per_position.update({offset + i: v for i, v in p.per_position.items()})
            out.warnings.update({offset + i: v for i, v in p.warnings.items()})
            offset += n
        return out

    @classmethod
    def of_points(cls, points: Sequence[MeasuredPoint]) -> Columns:
        """Columns of already validated points, each keeping its source and fields."""
        b = ColumnBuilder()
        for p in points:
            b.add_point(p)
        return b.build()


def _intern(known: dict[str, int], names: list[str], name: str) -> int:
    """The index of `name` in `names` (appended when new); `known` maps names to indices."""
    i = known.get(name)
    if i is None:
        i = known[name] = len(names)
        names.append(name)
    return i


class ColumnBuilder:
    """Rows appended one point at a time (JSON records, odd CSV lines) or as array blocks (plain CSV
    chunks), in order; `build()` concatenates them into one Columns."""

    FLUSH = 4096

    def __init__(self) -> None:
        self.parts: list[Columns] = []
        self._rows: list[MeasuredPoint] = []

    def add_point(self, p: MeasuredPoint) -> None:
        self._rows.append(p)
        if len(self._rows) >= self.FLUSH:
            self._flush()

    def add_block(self, block: Columns) -> None:
        self._flush()
        self.parts.append(block)

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        c = Columns(len(rows))
        c.load[:] = [p.load for p in rows]
        c.output_throughput[:] = [p.output_throughput for p in rows]
        c.acceptance_length[:] = [_NAN if p.acceptance_length is None else p.acceptance_length for p in rows]
        c.acceptance_rate[:] = [_NAN if p.acceptance_rate is None else p.acceptance_rate for p in rows]
        c.on[:] = [p.arm == "on" for p in rows]
        c.axis[:] = [LOAD_AXES.index(p.load_axis) for p in rows]
        c.k[:] = [-1 if p.k is None else p.k for p in rows]
        models: dict[str, int] = {}
        c.model[:] = [-1 if p.model_id is None else _intern(models, c.model_ids, p.model_id) for p in rows]
        c.base[:] = range(len(rows))
        c.bases = [p.source for p in rows]
        c.line[:] = -1
        for i, p in enumerate(rows):
            for name, v in p.metrics.items():
                col = c.metrics.get(name)
                if col is None:
                    col = c.metrics[name] = np.full(len(rows), _NAN)
                col[i] = v
            if p.per_position is not None:
                c.per_position[i] = p.per_position
            if p.warnings:
                c.warnings[i] = p.warnings
        self.parts.append(c)

    def build(self) -> Columns:
        self._flush()
        parts, self.parts = self.parts, []
        return Columns.concat(parts) if parts else Columns(0)


# --------------------------------------------------------------------------- the table

class MeasuredTable:
    """Measured points from any number of files, with helpers to split and pair them by arm.

    Built from points (`MeasuredTable(points)`) or, by the readers, from columns
    (`MeasuredTable(columns=...)`); every aggregate is computed on the columns."""

    def __init__(self, points: Sequence[MeasuredPoint] | None = None, *, columns: Columns | None = None) -> None:
        if columns is None:
            columns = Columns.of_points(list(points or []))
        self.columns = columns
        self._points: list[MeasuredPoint] | None = None
        self._axis: str | None = None
        self._levels: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._pairs: list | None = None

    def __len__(self) -> int:
        return len(self.columns)

    def __iter__(self) -> Iterator[MeasuredPoint]:
        return iter(self.points)

    def __repr__(self) -> str:
        return f"MeasuredTable({len(self)} points)"

    @property
    def points(self) -> list[MeasuredPoint]:
        """Every point in file order (made once, on first use)."""
        if self._points is None:
            self._points = self.columns.points()
        return self._points

    def _arm_rows(self, name: str) -> np.ndarray:
        """Rows of one arm by increasing load (stable for equal loads)."""
        if name not in ARMS:
            raise CrossoverError(f"arm must be 'on' or 'off', got {name!r}")
        c = self.columns
        rows = np.flatnonzero(c.on == (name == "on"))
        return rows[np.argsort(c.load[rows], kind="stable")]

    def arm(self, name: str) -> list[MeasuredPoint]:
        """The points of one arm ("on" or "off"), sorted by load (stable for equal loads)."""
        rows = self._arm_rows(name)
        if self._points is not None:
            return [self._points[i] for i in rows]
        return self.columns.points_at(rows)

    @property
    def load_axis(self) -> str:
        """The one load axis every point shares; a one-line error naming two files that disagree."""
        c = self.columns
        if not len(c):
            raise CrossoverError("no measured points: nothing was read")
        if self._axis is None:
            odd = np.flatnonzero(c.axis != c.axis[0])
            if len(odd):
                i = int(odd[0])
                raise CrossoverError(
                    f"{c.source(0)} is measured against {LOAD_AXES[c.axis[0]]} but {c.source(i)} against "
                    f"{LOAD_AXES[c.axis[i]]}; read them separately or force one axis with load_axis")
            self._axis = LOAD_AXES[c.axis[0]]
        return self._axis

    def model_ids(self) -> list[str]:
        """The distinct model ids the files name (vLLM `model_id`, SGLang `model_path`, a CSV column)."""
        c = self.columns
        return sorted({c.model_ids[i] for i in np.unique(c.model) if i >= 0})

    def mean_lengths(self) -> tuple[float | None, float | None]:
        """Mean prompt and output length in tokens over all points that record them (per completed request)."""
        c = self.columns
        completed = c.metric("completed")
        out: list[float | None] = []
        for key in ("total_input_tokens", "total_output_tokens"):
            total = c.metric(key)
            use = ~np.isnan(total) & ~np.isnan(completed) & (completed != 0)
            tokens = requests = 0.0
            for t, n in zip(total[use].tolist(), completed[use].tolist()):  # in file order, as summed before
                tokens += t
                requests += n
            out.append(tokens / requests if requests else None)
        return out[0], out[1]

    def on_taus(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, acceptance lengths) of the on-arm points that report one, by increasing load."""
        rows = self._arm_rows("on")
        tau = self.columns.acceptance_length[rows]
        keep = ~np.isnan(tau) & (tau != 0)
        return rows[keep], tau[keep]

    def levels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(load, off row, on row) of every level measured in both arms, by increasing load; repeated
        runs at a level (e.g. `vllm bench sweep`'s three) are represented by the run with the median
        output throughput, so one outlier cannot move it."""
        self.load_axis  # noqa: B018 - raises when the axes differ
        if self._levels is None:
            off_loads, off_rows = self._one_per_load("off")
            on_loads, on_rows = self._one_per_load("on")
            # one merge of two sorted lists: the first on-level not below the off-level, or the one
            # just below it when that is the same load within the tolerance
            j = np.searchsorted(on_loads, off_loads, side="left")
            below = np.clip(j - 1, 0, None)
            use_below = (j > 0) & _same_loads(on_loads[below] if len(on_loads) else off_loads, off_loads)
            j = np.where(use_below, below, j)
            inside = j < len(on_loads)
            match = np.zeros(len(off_loads), bool)
            match[inside] = _same_loads(on_loads[j[inside]], off_loads[inside])
            self._levels = (off_loads[match], off_rows[match], on_rows[j[match]])
        return self._levels

    def pairs(self) -> list[tuple[float, MeasuredPoint, MeasuredPoint]]:
        """(load, off point, on point) at every load measured in both arms, by increasing load."""
        loads, off, on = self.levels()
        if self._pairs is None:
            if self._points is not None:
                offs, ons = [self._points[i] for i in off], [self._points[i] for i in on]
            else:
                offs, ons = self.columns.points_at(off), self.columns.points_at(on)
            self._pairs = list(zip(loads.tolist(), offs, ons))
        return list(self._pairs)

    def _one_per_load(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(load, row) per level of one arm: the group's first load, its median-throughput run."""
        rows = self._arm_rows(name)
        loads = self.columns.load[rows]
        if not len(rows):
            return loads, rows
        new = np.ones(len(rows), bool)
        new[1:] = ~_same_loads(loads[1:], loads[:-1])
        group = np.cumsum(new) - 1
        starts = np.flatnonzero(new)
        if not _same_loads(loads[starts][group], loads).all():  # a chain of near-equal loads: as before, one by one
            group = np.empty(len(rows), np.int64)
            g, first = -1, None
            for i, x in enumerate(loads.tolist()):
                if first is None or not same_load(first, x):
                    g, first = g + 1, x
                group[i] = g
            starts = np.flatnonzero(np.diff(group, prepend=-1))
        counts = np.diff(np.append(starts, len(rows)))
        # within each group by throughput (stable: ties keep load order), then the (n - 1) // 2-th
        order = np.argsort(self.columns.output_throughput[rows], kind="stable")
        order = order[np.argsort(group[order], kind="stable")]
        pick = order[starts + (counts - 1) // 2]
        return loads[starts], rows[pick]
