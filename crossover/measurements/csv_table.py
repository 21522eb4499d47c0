"""Measured CSVs (docs/measured_csv.md) read into column arrays, a chunk of lines at a time.

A chunk of plain rows is split and converted column by column (numpy); a chunk with anything
unusual (quotes, blank or comment lines, spaces, a cell at fault) is read line by line by
`_csv_row`, the reference for what a row may hold, which raises the one-line error of the first
row at fault. Used by readers.py.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from ..errors import CrossoverError
from .fields import check_throughput, k_count, quality_warnings, resolve_arm, tau_of
from .limits import COUNT_KEYS, LATENCY_MS_RANGE, LOAD_RANGE, MAX_COUNT, MAX_K, THROUGHPUT_RANGE
from .point import ARMS, LOAD_AXES, MeasuredPoint
from .columns import ColumnBuilder, Columns, constant

CSV_DOC = "docs/measured_csv.md"
_CSV_KNOWN = frozenset({"arm", "output_throughput", "model_id", *LOAD_AXES})

CHUNK_CHARS = 1 << 18  # a CSV is parsed in chunks of about this many characters (whole lines)


def _lines(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """(offset, line) of every line of `text` from `start`, lazily (no list of every line)."""
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield start, text[start:end].removesuffix("\r")
        start = end + 1


def _csv_lines(text: str, first_only: bool = False, src: str = "", first_lineno: int = 1):
    """(line number, stripped fields) of every data line, lazily (a large file is never held as a
    list of rows); rows without quotes split on commas directly, quoted ones go through csv."""
    for lineno, (_, line) in enumerate(_lines(text.removeprefix("\ufeff")), first_lineno):  # a spreadsheet's BOM
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if '"' in line or "\x00" in line:
            try:
                fields = next(csv.reader([line]))
            except csv.Error as exc:
                raise CrossoverError(f"{src}line {lineno}: not a CSV row ({exc})") from None
        else:
            fields = line.split(",")
        yield lineno, [f.strip() for f in fields]
        if first_only:
            return


def looks_like_csv(text: str) -> bool:
    try:
        rows = list(_csv_lines(text, first_only=True))
    except CrossoverError:
        return False
    return bool(rows) and len(rows[0][1]) >= 2 and bool(_CSV_KNOWN & {h.lower() for h in rows[0][1]})


def _header(path: Path, text: str) -> tuple[int, list[str], int]:
    """(line number, fields, offset of the next line) of the CSV header: the first data line."""
    text_start = 1 if text.startswith("\ufeff") else 0
    for lineno, (offset, line) in enumerate(_lines(text, text_start), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        ((_, fields),) = _csv_lines(line, src=f"{path}: ", first_lineno=lineno)
        end = text.find("\n", offset)
        return lineno, fields, len(text) if end < 0 else end + 1
    raise CrossoverError(f"{path}: no CSV header")  # not reached: looks_like_csv found one


def _chunks(text: str, start: int, lineno: int) -> Iterator[tuple[int, str]]:
    """(number of its first line, chunk) of whole lines of `text` from `start`, about CHUNK_CHARS each."""
    while start < len(text):
        end = text.find("\n", min(start + CHUNK_CHARS, len(text)) - 1)
        end = len(text) if end < 0 else end + 1
        chunk = text[start:end]
        yield lineno, chunk
        lineno += chunk.count("\n")
        start = end


def _pieces(text: str, start: int, lineno: int, more: Iterable[str]) -> Iterator[tuple[int, str]]:
    """`_chunks` of `text` from `start`, then of every piece of whole lines in `more`, numbered on."""
    for first, chunk in _chunks(text, start, lineno):
        yield first, chunk
        lineno = first + chunk.count("\n")
    for piece in more:
        for first, chunk in _chunks(piece, 0, lineno):
            yield first, chunk
            lineno = first + chunk.count("\n")


class _CsvLayout:
    """What a CSV's header says: its columns, the load axis and the arm flag, for every chunk."""

    def __init__(self, path: Path, names: list[str], axis: str, arm_flag: str | None) -> None:
        self.path, self.names, self.axis, self.arm_flag = path, names, axis, arm_flag
        own = {"arm", "model_id", axis, "output_throughput", "acceptance_length", "acceptance_rate", "k"}
        self.metrics = [n for n in names if n not in own and n not in LOAD_AXES]


def read_csv(path: Path, text: str, arm_flag: str | None, axis_flag: str | None,
              more: Iterable[str] = (), size_hint: int | None = None) -> Columns:
    """The CSV whose text starts with `text` (the header included) and goes on with the pieces of
    whole lines in `more`, read as they come: the file (of about `size_hint` bytes) is never held whole."""
    header_line, header, body = _header(path, text)
    names = [h.lower() for h in header]
    for i, name in enumerate(names):
        if not name:
            raise CrossoverError(f"{path}:{header_line}: header column {i + 1} has no name")
        if names.index(name) != i:
            raise CrossoverError(f"{path}:{header_line}: column {name!r} appears twice in the header")
    if "output_throughput" not in names:
        raise CrossoverError(f"{path}: missing required column 'output_throughput' (output tokens/s; see {CSV_DOC})")
    axes = [a for a in LOAD_AXES if a in names]
    if axis_flag is not None:
        if axis_flag not in names:
            raise CrossoverError(f"{path}: load_axis {axis_flag!r} was asked for but the CSV has no {axis_flag!r} column")
        axis = axis_flag
    elif not axes:
        raise CrossoverError(f"{path}: no load column: the header needs one of 'concurrency', 'request_rate' or "
                             f"'batch' (see {CSV_DOC})")
    elif len(axes) > 1:
        raise CrossoverError(f"{path}: several load columns ({', '.join(repr(a) for a in axes)}); keep one or "
                             f"pass load_axis")
    else:
        axis = axes[0]
    layout = _CsvLayout(path, names, axis, arm_flag)
    blocks = None
    for lineno, chunk in _pieces(text, body, header_line + 1, more):
        block = _csv_block(layout, chunk, lineno)
        if block is None:  # quotes, blank or comment lines, spaces, or a cell at fault: line by line
            block = _csv_rows(layout, chunk, lineno, header_line)
        if blocks is None:  # room for the rows the file's size suggests, at this chunk's bytes per row
            rows = len(block) * (size_hint or len(chunk)) // max(len(chunk.encode()), 1)
            blocks = ColumnBuilder(capacity=int(1.25 * rows) + 1024)
        blocks.add_block(block)
    del text
    out = blocks.build() if blocks is not None else Columns(0)
    if not len(out):
        raise CrossoverError(f"{path}: no data rows under the header")
    return out


def _floats(cells: list[str]) -> np.ndarray:
    """Cells as float64, an empty cell as NaN; ValueError for anything float() refuses."""
    if "" in cells:
        cells = [c or "nan" for c in cells]
    return np.fromiter(map(float, cells), np.float64, len(cells))


def _csv_block(layout: _CsvLayout, chunk: str, lineno: int) -> Columns | None:
    """A chunk of plain rows (no quotes, blanks, comments or spaces) as columns, each checked as
    `_csv_row` checks one row; None when anything is unusual or at fault (the caller then reads the
    chunk line by line, which raises the one-line error of the first row at fault)."""
    if any(ch in chunk for ch in '"\x00# \t'):
        return None
    lines = chunk.split("\n")
    if lines[-1] == "":
        lines.pop()
    n, width = len(lines), len(layout.names)
    if not n or "" in lines or [ln.count(",") for ln in lines].count(width - 1) != n:
        return None
    flat = ",".join(lines).split(",")
    del lines
    cols = {name: flat[j::width] for j, name in enumerate(layout.names)}
    del flat
    c = Columns(n)
    c.bases, c.base, c.line[:] = [f"{layout.path}:"], constant(0, n, np.int32), np.arange(lineno, lineno + n)
    flag = layout.arm_flag
    if "arm" in cols:
        words = {}
        for cell in set(cols["arm"]):
            arm = cell.lower() or None
            if (arm is not None and arm not in ARMS) or (arm is None and flag is None) or (
                    arm is not None and flag is not None and arm != flag):
                return None
            words[cell] = (arm or flag) == "on"
        c.on[:] = [words[cell] for cell in cols.pop("arm")]
    elif flag is None:
        return None
    else:
        c.on[:] = flag == "on"
    if "model_id" in cols:
        known: dict[str, int] = {}
        c.model[:] = [_intern_cell(known, c.model_ids, cell) for cell in cols.pop("model_id")]
    else:
        c.model = constant(-1, n, np.int32)
    try:
        values = {name: _floats(cells) for name, cells in cols.items()}
        k_given = np.array([cell != "" for cell in cols["k"]], bool) if "k" in cols else None
    except ValueError:
        return None
    del cols
    load, tput = values[layout.axis], values["output_throughput"]
    if not (np.isfinite(load).all() and (load > 0).all() and np.isfinite(tput).all() and (tput >= 0).all()):
        return None
    if _implausible(tput, THROUGHPUT_RANGE) or ((load < LOAD_RANGE[0]) | (load > LOAD_RANGE[1])).any():
        return None  # the row path names the row (limits.implausible, implausible_load)
    c.load[:], c.output_throughput[:] = load, tput
    c.axis = constant(LOAD_AXES.index(layout.axis), n, np.int8)
    tau = values.get("acceptance_length")
    if tau is not None:
        tau = np.where(np.isfinite(tau), tau, np.nan)
        if (tau < 1).any():
            return None
    c.acceptance_length = constant(np.nan, n) if tau is None else tau
    rate = values.get("acceptance_rate")
    if rate is not None and ((rate < 0) | (rate > 1)).any():  # NaN: not reported
        return None
    c.acceptance_rate = constant(np.nan, n) if rate is None else rate
    k = values.get("k")
    if k is not None:
        given = k[k_given]
        # a k past MAX_K (1e30 cast to int64 warned, and the warning looped) is named by the row path
        if not (np.isfinite(given).all() and (given >= 0).all() and (given <= MAX_K).all()
                and (given == np.floor(given)).all()):
            return None
        c.k[:] = np.where(k_given, np.nan_to_num(k), -1)
    else:
        c.k = constant(-1, n, np.int64)
    for name in layout.metrics:
        v = values[name]
        v[~np.isfinite(v)] = np.nan
        if name.endswith("_ms") and ((v < 0).any() or _implausible(v, LATENCY_MS_RANGE)):
            return None
        if name in COUNT_KEYS and (np.abs(v) > MAX_COUNT).any():  # NaN: not measured
            return None
        c.metrics[name] = v
    _block_warnings(c)
    return c


def _implausible(v: np.ndarray, bounds: tuple[float, float]) -> bool:
    """Some nonzero value outside `bounds` (NaN: not measured)."""
    return bool(((v != 0) & ((v < bounds[0]) | (v > bounds[1]))).any())


def _intern_cell(known: dict[str, int], names: list[str], cell: str) -> int:
    if not cell:
        return -1
    i = known.get(cell)
    if i is None:
        i = known[cell] = len(names)
        names.append(cell)
    return i


def _block_warnings(c: Columns) -> None:
    """The quality warnings of the rows that have any (failed runs, completed != num_prompts)."""
    failed, completed, prompts = c.metrics.get("failed"), c.metrics.get("completed"), c.metrics.get("num_prompts")
    odd = np.zeros(len(c), bool)
    if failed is not None:
        odd |= failed > 0
    if completed is not None and prompts is not None:
        odd |= ~np.isnan(completed) & ~np.isnan(prompts) & (completed != prompts)
    for i in np.flatnonzero(odd).tolist():
        metrics = {name: float(col[i]) for name, col in c.metrics.items() if col[i] == col[i]}
        c.warnings[i] = tuple(quality_warnings(metrics))


def _csv_rows(layout: _CsvLayout, chunk: str, lineno: int, header_line: int) -> Columns:
    """A chunk read line by line (the reference for what `_csv_block` accepts): columns, or the
    one-line error of the first row at fault."""
    points, lines = [], []
    for line, fields in _csv_lines(chunk, src=f"{layout.path}: ", first_lineno=lineno):
        points.append(_csv_row(layout, f"{layout.path}:{line}", fields, header_line))
        lines.append(line)
    c = Columns.of_points(points)
    if len(c):
        c.bases, c.base, c.line[:] = [f"{layout.path}:"], constant(0, len(c), np.int32), lines
    return c


def _csv_row(layout: _CsvLayout, src: str, fields: list[str], header_line: int) -> MeasuredPoint:
    names, axis, arm_flag = layout.names, layout.axis, layout.arm_flag
    if len(fields) != len(names):
        raise CrossoverError(f"{src}: {len(fields)} fields, but the header (line {header_line}) has {len(names)}")
    record = dict(zip(names, fields))
    file_arm = record.get("arm", "").lower() or None
    if file_arm is not None and file_arm not in ARMS:
        raise CrossoverError(f"{src}: column 'arm' must be 'on' or 'off', got {record['arm']!r}")
    hint = "the 'arm' cell is empty" if "arm" in record else "the CSV has no 'arm' column"
    arm = resolve_arm(src, file_arm, f"its 'arm' column says {file_arm}", arm_flag, hint)
    values: dict[str, float] = {}
    for name, cell in record.items():
        if name in ("arm", "model_id") or cell == "":
            continue
        try:
            values[name] = float(cell)
        except ValueError:
            raise CrossoverError(f"{src}: column {name!r} must be a number, got {cell!r}") from None
    load = values.pop(axis, None)
    if load is None or not (math.isfinite(load) and load > 0):
        raise CrossoverError(f"{src}: column {axis!r} must be a finite number > 0, got {record[axis]!r}")
    throughput = check_throughput(src, "output_throughput", values.pop("output_throughput", None))
    tau = tau_of(src, "acceptance_length", values.pop("acceptance_length", None))
    rate = values.pop("acceptance_rate", None)
    if rate is not None and math.isnan(rate):
        rate = None
    if rate is not None and not 0 <= rate <= 1:
        raise CrossoverError(f"{src}: column 'acceptance_rate' is {rate:g}; write a fraction 0-1, not a percentage")
    k = k_count(src, "k", values.pop("k", None))
    for other in LOAD_AXES:
        values.pop(other, None)
    metrics = {name: v for name, v in values.items() if math.isfinite(v)}
    return MeasuredPoint(
        source=src, arm=arm, load_axis=axis, load=load, output_throughput=throughput, metrics=metrics,
        acceptance_length=tau, acceptance_rate=rate, k=k, warnings=tuple(quality_warnings(metrics)),
        model_id=record.get("model_id", "").strip() or None)
