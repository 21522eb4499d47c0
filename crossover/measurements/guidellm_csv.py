"""GuideLLM's CSV report (`benchmarks.csv`), one data row per benchmark, read by header text (never by
position: a status's columns are written only when it has requests). Used by readers.py.

- v0.4+ (`outputs/csv.py`): a three-row header `[group, "<Status> <units>", stat]`, the stats
  `Mean`, `Median`, `Std Dev` and `Percentiles`, one string cell
  `"[min, p001, p01, p05, p10, p25, p75, p90, p95, p99, max]"` (no p50). The `Benchmark` group's
  `Strategy` column holds the strategy type only: a concurrent, constant or poisson benchmark's
  level is in the JSON / YAML report written beside it, not here.
- <=v0.3: one flat header row, `{Status} {metric} {stat}` (as `Successful Time to first token ms
  mean`), `{Status} Requests`, the strategy in `Name` (`concurrent@16`, `constant@5.00`) and `Args`
  (the benchmark's args as JSON).

The names mean what the JSON's do (guidellm.py): `Inter Token Latency` is vLLM's TPOT, GuideLLM's
`Time per Output Token` (TTFT included) is not read.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

from ..errors import CrossoverError
from .fields import check_throughput
from .guidellm import TOOL, strategy_load
from .point import MeasuredPoint
from .summaries import ms_per, scaled, tool_point

_STATUSES = ("successful", "incomplete", "errored", "total")
_PCT_NAMES = (None, "p0.1", "p1", "p5", "p10", "p25", "p75", "p90", "p95", "p99", None)  # min .. max
_STAT = {"mean": "mean", "median": "median", "std dev": "std", "std_dev": "std"}
# (group, units) of the v0.4+ header -> target; latencies: (vLLM name, default unit)
_LATENCY_GROUPS = {"time to first token": ("ttft", "ms"), "inter token latency": ("tpot", "ms"),
                   "request latency": ("e2el", "sec")}
# v0.3's metric names -> target
_FLAT_LATENCIES = {"time to first token ms": ("ttft", "ms"), "inter token latency ms": ("tpot", "ms"),
                   "request latency": ("e2el", "sec")}
_FLAT_VALUES = {"output tokens per second": "output_throughput", "tokens per second": "total_token_throughput",
                "requests per second": "request_throughput", "request concurrency": "concurrency",
                "prompt token count": "prompt_tokens", "output token count": "output_tokens"}
_COUNTS = {"successful": "completed", "errored": "failed", "total": "num_prompts"}
_FLAT_CELL = re.compile(r"^(successful|incomplete|errored|total) (.+?) (mean|median|std dev|\[min,.*\])$")
_STRATEGY_CELL = re.compile(r"^([a-z_]+)(?:@(\S+))?$")


def _norm(cell: str) -> str:
    return " ".join(cell.replace("\ufeff", "").split()).lower()


def _first_row(text: str) -> list[str]:
    for line in text.split("\n"):
        if line.strip():
            try:
                return [_norm(c) for c in next(csv.reader([line]))]
            except csv.Error:
                return []
    return []


def looks_like_guidellm_csv(text: str) -> bool:
    """Whether the first line is a GuideLLM CSV header: the v0.4+ group row or v0.3's flat names."""
    cells = set(_first_row(text))
    if "benchmark" in cells and cells & {"time to first token", "inter token latency", "token throughput"}:
        return True
    return any(_FLAT_CELL.match(c) and ("time to first token" in c or "tokens per second" in c) for c in cells)


def _targets(rows: list[list[str]]) -> tuple[list[tuple | None], int]:
    """What each column holds (None: not read) and how many header rows there are."""
    first = [_norm(c) for c in rows[0]]
    if "benchmark" not in first:  # <=v0.3: one flat row
        out: list[tuple | None] = []
        for cell in first:
            m = _FLAT_CELL.match(cell)
            if cell in ("name", "args"):
                out.append(("strategy" if cell == "name" else "args",))
            elif re.fullmatch(r"(successful|errored|total) requests", cell):
                out.append(("count", _COUNTS[cell.split()[0]]))
            elif m and m.group(1) == "successful":
                stat = _STAT.get(m.group(3), "percentiles")
                if m.group(2) in _FLAT_LATENCIES:
                    out.append(("latency", *_FLAT_LATENCIES[m.group(2)], stat))
                elif m.group(2) in _FLAT_VALUES and stat == "mean":
                    out.append(("value", _FLAT_VALUES[m.group(2)]))
                else:
                    out.append(None)
            else:
                out.append(None)
        return out, 1
    if len(rows) < 3:
        raise CrossoverError("a GuideLLM CSV header of three rows (group, status and units, stat) ends early")
    group, out = "", []
    for j, cell in enumerate(first):
        group = cell or group  # a group's name may head its first column only
        mid = _norm(rows[1][j]) if j < len(rows[1]) else ""
        stat = _norm(rows[2][j]) if j < len(rows[2]) else ""
        words = mid.split(" ", 1)
        status = words[0] if words[0] in _STATUSES else None
        units = (words[1] if len(words) > 1 else "") if status else mid
        out.append(_target(group, status, units, mid, stat))
    return out, 3


def _target(group: str, status: str | None, units: str, mid: str, stat: str) -> tuple | None:
    if group == "benchmark" and "strategy" in (mid, stat):
        return ("strategy",)
    if group == "request counts":
        words = [cell.split(" ")[0] for cell in (mid, stat) if cell]
        return next((("count", _COUNTS[w]) for w in words if w in _COUNTS), None)
    if status != "successful":
        return None
    if group in _LATENCY_GROUPS:
        name, unit = _LATENCY_GROUPS[group]
        return ("latency", name, units or unit, _STAT.get(stat, "percentiles" if stat == "percentiles" else None))
    if stat != "mean":
        return None
    squashed = units.replace(" ", "")
    if group == "token throughput" and squashed.startswith(("output", "total")):
        return ("value", "output_throughput" if squashed.startswith("output") else "total_token_throughput")
    if group == "server throughput" and squashed in ("requests/sec", "requests/s", "concurrency"):
        return ("value", "concurrency" if squashed == "concurrency" else "request_throughput")
    if group == "token metrics" and squashed.startswith(("input", "prompt", "output")):
        return ("value", "output_tokens" if squashed.startswith("output") else "prompt_tokens")
    if group == "token streaming" and squashed.startswith("itertokens"):
        return ("value", "iter_tokens_per_iteration")
    return None


def _cell_number(src: str, column: str, cell: str) -> float | None:
    if not cell.strip():
        return None
    try:
        v = float(cell)
    except ValueError:
        raise CrossoverError(f"{src}: column {column!r} must be a number, got {cell.strip()[:40]!r}") from None
    return v if math.isfinite(v) else None


def read_guidellm_csv(path: Path, text: str, arm: str | None, axis: str | None) -> list[MeasuredPoint]:
    """Every data row of a GuideLLM CSV as a point."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if any(c.strip() for c in row):
                rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise CrossoverError(f"{path}: line {reader.line_num}: not a CSV row ({exc})") from None
    try:
        targets, n_header = _targets([r for _, r in rows[:3]])
    except CrossoverError as exc:
        raise CrossoverError(f"{path}: {exc}") from None
    names = [" / ".join(c for c in (r[j] if j < len(r) else "" for _, r in rows[:n_header]) if c.strip())
             for j in range(len(targets))]
    if not any(t == ("value", "output_throughput") for t in targets):
        raise CrossoverError(f"{path}: a GuideLLM CSV without the successful requests' output tokens/s "
                             f"('Token Throughput' 'Successful Output Tokens/Sec' 'Mean'): no request succeeded?")
    data = rows[n_header:]
    if not data:
        raise CrossoverError(f"{path}: a GuideLLM CSV header with no benchmark rows")
    return [_row_point(f"{path}:{line}", row, targets, names, arm, axis) for line, row in data]


def _row_point(src: str, row: list[str], targets: list, names: list[str], arm: str | None,
               axis: str | None) -> MeasuredPoint:
    out: dict[str, float] = {}
    strategy = args = None
    for j, target in enumerate(targets):
        if target is None or j >= len(row):
            continue
        cell, kind = row[j], target[0]
        if kind == "strategy":
            strategy = _norm(cell)
        elif kind == "args":
            args = cell
        elif kind in ("count", "value"):
            v = _cell_number(src, names[j], cell)
            if v is not None:
                out[target[1]] = v
        elif target[3] == "percentiles":
            out.update(_percentiles(src, names[j], cell, target[1], ms_per(src, names[j], target[2])))
        elif target[3] is not None:
            v = _cell_number(src, names[j], cell)
            if v is not None:
                out[f"{target[3]}_{target[1]}_ms"] = scaled(v, ms_per(src, names[j], target[2]))
    if "output_throughput" not in out:
        raise CrossoverError(f"{src}: the successful requests' output tokens/s cell is empty")
    throughput = check_throughput(src, "Successful Output Tokens/Sec", out.pop("output_throughput"))
    for per_request, total in (("prompt_tokens", "total_input_tokens"), ("output_tokens", "total_output_tokens")):
        mean = out.pop(per_request, None)
        if mean is not None and out.get("completed") is not None:
            out[total] = mean * out["completed"]
    load_axis, load, warnings = _load(src, strategy, args, out.get("concurrency"), axis)
    return tool_point(src, arm, TOOL, load_axis, load, throughput, out, warnings)


def _percentiles(src: str, column: str, cell: str, name: str, ms: float) -> dict[str, float]:
    text = cell.strip()
    if not text:
        return {}
    parts = [p.strip() for p in text.removeprefix("[").removesuffix("]").split(",")]
    if len(parts) != len(_PCT_NAMES):
        raise CrossoverError(f"{src}: column {column!r} must list {len(_PCT_NAMES)} values [min, p001, p01, p05, p10, "
                             f"p25, p75, p90, p95, p99, max], got {len(parts)}")
    out = {}
    for stat, part in zip(_PCT_NAMES, parts):
        v = _cell_number(src, column, part)
        if stat is not None and v is not None:
            out[f"{stat}_{name}_ms"] = scaled(v, ms)
    return out


def _load(src: str, strategy: str | None, args: str | None, measured: float | None,
          forced: str | None) -> tuple[str, float, list[str]]:
    """The level from v0.3's Args JSON, else the strategy cell (`synchronous`, `concurrent@16`, `constant@5.00`)."""
    pair = ("Request Concurrency (successful mean)", measured)
    if args and args.strip():
        try:
            parsed: Any = json.loads(args)
        except (ValueError, RecursionError):
            raise CrossoverError(f"{src}: column 'Args' is not JSON (the benchmark's args)") from None
        if isinstance(parsed, dict) and isinstance(parsed.get("strategy"), dict):
            return strategy_load(src, parsed["strategy"], "Args.strategy", pair, forced)
    m = _STRATEGY_CELL.match(strategy or "")
    if not m:
        raise CrossoverError(f"{src}: the strategy cell is {strategy!r}; expected synchronous, concurrent, "
                             f"throughput, constant or poisson")
    kind, level = m.group(1), m.group(2)
    if kind in ("concurrent", "constant", "poisson") and level is None:
        raise CrossoverError(f"{src}: GuideLLM's CSV names the strategy {kind!r} but not its "
                             f"{'streams' if kind == 'concurrent' else 'rate'} (the load level); read the "
                             f"benchmarks.json or benchmarks.yaml GuideLLM wrote beside it")
    strat: dict[str, Any] = {"type_": kind}
    if level is not None:
        try:
            strat["streams" if kind == "concurrent" else "rate"] = float(level)
        except ValueError:
            raise CrossoverError(f"{src}: the strategy cell {strategy!r} has no number after '@'") from None
    return strategy_load(src, strat, "Strategy", pair, forced)
