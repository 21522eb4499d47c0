"""Measured runs as column arrays (numpy), one row per run: what the readers build and the table
holds, with no Python object per row; `MeasuredPoint`s are made from rows on demand."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .point import LOAD_AXES, MeasuredPoint

_NAN = float("nan")


def constant(value, n: int, dtype=np.float64) -> np.ndarray:
    """A read-only column of `n` equal values that takes no memory (one value, stride 0): a column a
    file does not have (NaN, -1) or one every row of a CSV shares (its load axis, its source)."""
    return np.broadcast_to(np.array(value, dtype), (n,))


def _is_constant(a: np.ndarray) -> bool:
    return a.strides == (0,)


def _same_constant(arrays: list[np.ndarray]) -> bool:
    """Whether every array is a `constant` column of one value (NaN counts as equal to NaN)."""
    if not all(_is_constant(a) for a in arrays):
        return False
    first = arrays[0][0]
    return all(a[0] == first or (a[0] != a[0] and first != first) for a in arrays)


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
        self.formats: frozenset[str] = frozenset()  # what wrote the files: "vllm", "sglang", "csv"
        self.algorithms: frozenset[str] = frozenset()  # what the on-arm files say ran (SGLang's speculative_algorithm)

    def __len__(self) -> int:
        return len(self.load)

    def source(self, i: int) -> str:
        return self.sources([i])[0]

    def sources(self, rows) -> list[str]:
        """Each row's source: its file's base, followed by its line number when it has one."""
        rows = np.asarray(rows, np.int64)
        return [base if line < 0 else f"{base}{line}" for base, line in
                zip(map(self.bases.__getitem__, self.base[rows].tolist()), self.line[rows].tolist())]

    def metric(self, name: str) -> np.ndarray:
        """A metric's column (NaN where a run does not report it; all NaN when none does)."""
        col = self.metrics.get(name)
        return col if col is not None else constant(_NAN, len(self))

    def point(self, i: int) -> MeasuredPoint:
        """Row i as a MeasuredPoint (validated when it was read: not checked again)."""
        return self.points_at([i])[0]

    def points_at(self, rows) -> list[MeasuredPoint]:
        """The given rows as MeasuredPoints, in that order (validated when read: not checked again)."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return []
        models, per_position, warnings = self.model_ids, self.per_position, self.warnings
        sources = self.sources(rows)
        names = list(self.metrics)
        values = zip(*(self.metrics[n][rows].tolist() for n in names)) if names else ((),) * len(rows)
        nan_none = lambda v: None if v != v else v  # noqa: E731
        new, setattr_ = object.__new__, object.__setattr__
        out = []
        for i, src, on, axis, load, tput, tau, rate, k, model, vals in zip(
                rows.tolist(), sources, self.on[rows].tolist(), self.axis[rows].tolist(), self.load[rows].tolist(),
                self.output_throughput[rows].tolist(), self.acceptance_length[rows].tolist(),
                self.acceptance_rate[rows].tolist(), self.k[rows].tolist(), self.model[rows].tolist(), values):
            p = new(MeasuredPoint)
            setattr_(p, "__dict__", {
                "source": src, "arm": "on" if on else "off", "load_axis": LOAD_AXES[axis], "load": load,
                "output_throughput": tput, "metrics": {n: v for n, v in zip(names, vals) if v == v},
                "acceptance_length": nan_none(tau), "acceptance_rate": nan_none(rate),
                "per_position": per_position.get(i), "k": None if k < 0 else k, "warnings": warnings.get(i, ()),
                "model_id": None if model < 0 else models[model]})
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
        out.formats = frozenset().union(*(p.formats for p in parts))
        out.algorithms = frozenset().union(*(p.algorithms for p in parts))
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
                    # -1 (no model) indexes the last entry, -1; a constant column stays one
                    a = constant(remap[a[0]], len(a), np.int32) if _is_constant(a) else remap[a]
                arrays.append(a)
                setattr(p, name, None)
            if _same_constant(arrays):
                setattr(out, name, constant(arrays[0][0], sum(sizes), arrays[0].dtype))  # still takes no memory
            else:
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
    chunks), in order, into arrays reserved ahead (`capacity` rows; pages untouched until written
    take no memory) that grow by doubling: the rows are never held twice, as blocks and as their
    concatenation. A column every row so far shares one value of stays a `constant`."""

    FLUSH = 4096

    def __init__(self, capacity: int = 0) -> None:
        self.n = 0
        self.capacity = capacity
        self.columns: dict[str, tuple[np.ndarray | None, object]] = {}  # name -> (array, or None and a constant)
        self.metrics: dict[str, tuple[np.ndarray | None, object]] = {}
        self.bases: list[str] = []
        self.model_ids: list[str] = []
        self._known: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self.per_position: dict[int, tuple[float, ...]] = {}
        self.warnings: dict[int, tuple[str, ...]] = {}
        self._rows: list[MeasuredPoint] = []

    def add_point(self, p: MeasuredPoint) -> None:
        self._rows.append(p)
        if len(self._rows) >= self.FLUSH:
            self._flush()

    def add_block(self, block: Columns) -> None:
        self._flush()
        self._append(block)

    def _append(self, block: Columns) -> None:
        m, n = len(block), self.n
        if not m:
            return
        if n + m > self.capacity:
            self._grow(max(2 * self.capacity, n + m, 1024))
        for name in Columns.ARRAYS:
            a = getattr(block, name)
            if name in ("base", "model"):
                own, names, known = ((block.bases, self.bases, self._known[0]) if name == "base"
                                     else (block.model_ids, self.model_ids, self._known[1]))
                remap = np.array([_intern(known, names, x) for x in own] + [-1], np.int32)
                a = constant(remap[a[0]], m, np.int32) if _is_constant(a) else remap[a]
            self._put(self.columns, name, a, Columns.DTYPES.get(name, np.float64), _NAN)
        for name in dict.fromkeys([*self.metrics, *block.metrics]):
            self._put(self.metrics, name, block.metrics.get(name, constant(_NAN, m)), np.float64, _NAN)
        self.per_position.update({n + i: v for i, v in block.per_position.items()})
        self.warnings.update({n + i: v for i, v in block.warnings.items()})
        self.n = n + m

    def _put(self, where: dict, name: str, a: np.ndarray, dtype, before) -> None:
        """Rows n.. of column `name` from `a`; rows before n (none yet: `before`) as they were."""
        n, m = self.n, len(a)
        array, value = where.get(name, (None, before if n else None))
        if array is None and _is_constant(a) and (value is None or _same_constant([a, constant(value, 1, dtype)])):
            where[name] = (None, a[0].item())
            return
        if array is None:
            array = np.empty(self.capacity, dtype)
            if n:
                array[:n] = value
            where[name] = (array, None)
        array[n:n + m] = a

    def _grow(self, capacity: int) -> None:
        for where in (self.columns, self.metrics):
            for name, (array, value) in where.items():
                if array is not None:
                    bigger = np.empty(capacity, array.dtype)
                    bigger[:self.n] = array[:self.n]
                    where[name] = (bigger, None)
                    del array, bigger  # one column at a time: the old one goes before the next is copied
        self.capacity = capacity

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
        self._append(c)

    def build(self) -> Columns:
        """The rows as Columns (views of the reserved arrays: the unused tail was never touched)."""
        self._flush()
        n, out = self.n, Columns(0)
        if not n:
            return out
        for name in Columns.ARRAYS:
            array, value = self.columns.get(name, (None, _NAN))
            setattr(out, name, array[:n] if array is not None else
                    constant(value, n, Columns.DTYPES.get(name, np.float64)))
        out.metrics = {name: array[:n] if array is not None else constant(value, n)
                       for name, (array, value) in self.metrics.items()}
        out.bases, out.model_ids, out.per_position, out.warnings = (self.bases, self.model_ids, self.per_position,
                                                                    self.warnings)
        self.columns, self.metrics = {}, {}
        return out
