"""The one internal table every measured sweep is read into: points with speculation on or off,
held as column arrays (numpy), one row per measured run; `MeasuredPoint`s are made on demand."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from ..errors import CrossoverError
from .columns import Columns
from .point import ARMS, LOAD_AXES, LOAD_RTOL, MeasuredPoint, same_load


def _same_loads(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`same_load` element by element."""
    return np.abs(a - b) <= LOAD_RTOL * np.maximum(np.abs(a), np.abs(b))


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
        return sorted({c.model_ids[i] for i in set(c.model.tolist()) if i >= 0})

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
        """(load, row) per level of one arm: the group's first load, its median-throughput run.
        A few arrays of the arm's length at a time (loads are > 0 and sorted here)."""
        rows = self._arm_rows(name)
        loads = self.columns.load[rows]
        if not len(rows):
            return loads, rows
        new = np.empty(len(rows), bool)
        new[0] = True
        new[1:] = np.diff(loads) > LOAD_RTOL * loads[1:]  # not the same load as the previous row
        starts = np.flatnonzero(new)
        del new
        ends = np.append(starts[1:], len(rows)) - 1
        # every run within the tolerance of its group's first: sure when the whole group is within it
        # of the first (the stricter bound); otherwise as before, one by one
        if not (loads[ends] - loads[starts] <= LOAD_RTOL * loads[starts]).all() and not _same_loads(
                np.repeat(loads[starts], ends - starts + 1), loads).all():
            group = np.empty(len(rows), np.int64)
            g, first = -1, None
            for i, x in enumerate(loads.tolist()):
                if first is None or not same_load(first, x):
                    g, first = g + 1, x
                group[i] = g
            starts = np.flatnonzero(np.diff(group, prepend=-1))
            ends = np.append(starts[1:], len(rows)) - 1
        counts = ends - starts + 1
        group = np.repeat(np.arange(len(starts), dtype=np.int32), counts)
        # within each group by throughput (stable: ties keep load order), then the (n - 1) // 2-th
        order = np.lexsort((self.columns.output_throughput[rows], group))
        del group
        pick = order[starts + (counts - 1) // 2]
        return loads[starts], rows[pick]
