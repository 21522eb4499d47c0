"""Read measured sweeps (vLLM `bench serve` JSON/JSONL/summary lists, SGLang bench_serving JSONL, CSV).

Formats are told apart by content, never by file name. Every error is one line naming the file
(and line) and the key at fault; input files are only read.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any, Sequence

from ..errors import CrossoverError
from ..files import read_text
from .fields import (
    _check_throughput,
    _describe,
    _load,
    _metrics,
    _quality_warnings,
    _resolve_arm,
    _sglang_acceptance,
    _sglang_arm,
    _sglang_k,
    _tau,
    _throughput,
    _vllm_acceptance,
    _vllm_arm,
    _vllm_k,
    _whole,
)
from .table import ARMS, LOAD_AXES, MeasuredPoint

RESULT_SUFFIXES = (".json", ".jsonl", ".csv")
CSV_DOC = "docs/measured_csv.md"

_VLLM_ALIASES = {"request_goodput:": "request_goodput"}
_SGLANG_ALIASES = {
    "total_throughput": "total_token_throughput",
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
}
_SGLANG_E2E = re.compile(r"^(mean|median|std|max|min|p\d+(?:\.\d+)?)_e2e_latency_ms$")

# Content markers (see docs/measured_csv.md for the CSV; the JSON keys are those vLLM's
# benchmarks/benchmark_serving.py and SGLang's bench_serving.py write). Strong vLLM markers win over SGLang ones, weak ones lose.
_VLLM_STRONG = ("endpoint_type", "total_token_throughput", "request_goodput:")
_SGLANG_MARKERS = ("server_info", "total_output_tokens_retokenized", "accept_length", "concurrency",
                   "mean_e2e_latency_ms", "total_throughput", "input_throughput", "sharegpt_output_len",
                   "total_output")
_VLLM_WEAK = ("tokenizer_id", "burstiness", "request_goodput", "mean_itl_ms", "mean_tpot_ms", "mean_e2el_ms",
              "max_concurrent_requests", "model_id")
_CSV_KNOWN = frozenset({"arm", "output_throughput", "model_id", *LOAD_AXES})


# --------------------------------------------------------------------------- entry point

def read_measurements(paths: Sequence[str | Path], arm: str | None = None,
                      load_axis: str | None = None) -> list[MeasuredPoint]:
    """Every measured point in `paths` (files or directories); `arm` and `load_axis` apply to all of them."""
    if arm is not None and arm not in ARMS:
        raise CrossoverError(f"arm must be 'on' or 'off' (or None to read it from the files), got {arm!r}")
    if load_axis is not None and load_axis not in LOAD_AXES:
        raise CrossoverError(f"load_axis must be one of {', '.join(LOAD_AXES)} (or None), got {load_axis!r}")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    points: list[MeasuredPoint] = []
    for p in paths:
        for f in _expand(Path(p)):
            points.extend(read_file(f, arm, load_axis))
    return points


def _expand(path: Path) -> list[Path]:
    """A file as itself; a directory as its result files (sorted, companions and repeats skipped)."""
    if path.is_dir():
        files = sorted(
            f for f in path.iterdir()
            if f.is_file() and f.suffix.lower() in RESULT_SUFFIXES
            and not f.name.endswith(".pytorch.json") and f.name != "warmup.json"
        )
        if not files:
            raise CrossoverError(f"{path}: no *.json, *.jsonl or *.csv result files in this directory")
        # `vllm bench sweep serve` writes summary.json as a list repeating the run=<n>.json files
        # next to it; read it only when it is the sole JSON there, or every run would count twice.
        summary = path / "summary.json"
        others = [f for f in files if f.suffix.lower() in (".json", ".jsonl") and f.name != "summary.json"]
        if summary in files and others and _starts_with(summary, "["):
            files.remove(summary)
        return files
    if not path.exists():
        raise CrossoverError(f"{path}: no such file or directory")
    return [path]


def _starts_with(path: Path, char: str) -> bool:
    return _read_text(path).lstrip("\ufeff \t\r\n").startswith(char)


def _read_text(path: Path) -> str:
    return read_text(path, "a vLLM/SGLang result or a CSV")


def read_file(path: Path, arm: str | None = None, load_axis: str | None = None) -> list[MeasuredPoint]:
    """The measured points of one file, its format detected by content."""
    text = _read_text(path)
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        raise CrossoverError(f"{path}: empty file; expected a vLLM/SGLang result or a measured CSV")
    if body[0] in "{[":
        return [_from_record(src, obj, arm, load_axis) for src, obj in _json_records(path, text)]
    if _looks_like_csv(text):
        return _read_csv(path, text, arm, load_axis)
    raise CrossoverError(
        f"{path}: unknown format: expected a vLLM bench serve result (JSON or JSONL), an SGLang "
        f"bench_serving JSONL or a measured CSV ({CSV_DOC})")


# --------------------------------------------------------------------------- JSON / JSONL

def _json_records(path: Path, text: str) -> list[tuple[str, dict]]:
    """(source, object) for every result object: one JSON value, JSONL, or concatenated values."""
    decoder = json.JSONDecoder()  # accepts NaN / Infinity, as Python's json.dumps writes them
    skip = re.compile(r"[\s\ufeff]*")
    values: list[tuple[int, Any]] = []
    pos = 0
    while True:
        pos = skip.match(text, pos).end()
        if pos >= len(text):
            break
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise CrossoverError(_json_error(path, text, exc)) from None
        values.append((text.count("\n", 0, pos) + 1, value))
        pos = end
    multi = len(values) > 1 or path.suffix.lower() == ".jsonl"
    out: list[tuple[str, dict]] = []
    for line, value in values:
        base = f"{path}:{line}" if multi else str(path)
        if isinstance(value, dict):
            out.append((base, value))
        elif isinstance(value, list):
            if not value:
                raise CrossoverError(f"{base}: empty JSON list; expected vLLM results (a sweep summary.json)")
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    raise CrossoverError(f"{base}[{i}]: expected a JSON object (one result), got {_describe(item)}")
                out.append((f"{base}[{i}]", item))
        else:
            raise CrossoverError(f"{base}: expected a JSON object or a list of them, got {_describe(value)}")
    return out


def _json_error(path: Path, text: str, exc: json.JSONDecodeError) -> str:
    keys = re.findall(r'"((?:[^"\\]|\\.)*)"\s*:', text[: exc.pos])
    after = f", after key {keys[-1]!r}" if keys else ""
    at_end = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    what = "truncated JSON (the file ends inside a value)" if at_end else "malformed JSON"
    return f"{path}: {what} at line {exc.lineno}, column {exc.colno}{after}: {exc.msg}"


def _detect(src: str, obj: dict) -> str:
    keys = set(obj)
    if keys & set(_VLLM_STRONG) or any(k.startswith("spec_decode_") for k in keys):
        return "vllm"
    if keys & set(_SGLANG_MARKERS):
        return "sglang"
    if keys & set(_VLLM_WEAK):
        return "vllm"
    if "schema_version" in keys:
        hint = " (it looks like an AIPerf export, which is not read)"
    elif "input_config" in keys:
        hint = " (it looks like a GenAI-Perf export, which is not read)"
    elif any(k.startswith("results_") for k in keys):
        hint = " (it looks like an LLMPerf summary, which is not read)"
    else:
        hint = ""
    raise CrossoverError(
        f"{src}: unknown format: a JSON object with none of the keys of a vLLM result ('endpoint_type', "
        f"'total_token_throughput') or an SGLang bench_serving line ('server_info', "
        f"'total_output_tokens_retokenized'){hint}")


def _from_record(src: str, obj: dict, arm_flag: str | None, axis_flag: str | None) -> MeasuredPoint:
    fmt = _detect(src, obj)
    throughput = _throughput(src, obj)
    axis, load, warnings = _load(src, obj, axis_flag)
    if fmt == "vllm":
        file_arm, evidence = _vllm_arm(obj)
        hint = "the file has no spec_decode_* or speculative_config keys"
        metrics = _metrics(src, obj, _VLLM_ALIASES, None)
        tau, rate, per_pos = _vllm_acceptance(src, obj)
        k = _vllm_k(src, obj, per_pos)
    else:
        file_arm, evidence = _sglang_arm(obj)
        hint = "server_info.speculative_algorithm is missing"
        metrics = _metrics(src, obj, _SGLANG_ALIASES, _SGLANG_E2E)
        tau, rate, per_pos = _sglang_acceptance(src, obj), None, None
        k = _sglang_k(src, obj)
    arm = _resolve_arm(src, file_arm, evidence, arm_flag, hint)
    return MeasuredPoint(
        source=src, arm=arm, load_axis=axis, load=load, output_throughput=throughput, metrics=metrics,
        acceptance_length=tau, acceptance_rate=rate, per_position=per_pos, k=k,
        warnings=tuple(warnings + _quality_warnings(metrics)), model_id=_model_id(obj),
    )


def _model_id(obj: dict) -> str | None:
    """The served model's id: vLLM's `model_id`, else SGLang's `server_info.model_path` (strings only)."""
    info = obj.get("server_info")
    for v in (obj.get("model_id"), info.get("model_path") if isinstance(info, dict) else None):
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


# --------------------------------------------------------------------------- CSV

def _lines(text: str):
    """The lines of `text`, lazily (no list of every line of a large file)."""
    if "\n" not in text:  # one line, or old-style lone carriage returns
        yield from text.splitlines()
        return
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield text[start:end].removesuffix("\r")
        start = end + 1


def _csv_lines(text: str, first_only: bool = False, src: str = ""):
    """(line number, stripped fields) of every data line, lazily (a large file is never held as a
    list of rows); rows without quotes split on commas directly, quoted ones go through csv."""
    for lineno, line in enumerate(_lines(text.removeprefix("\ufeff")), 1):  # a spreadsheet's UTF-8 BOM
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


def _looks_like_csv(text: str) -> bool:
    try:
        rows = list(_csv_lines(text, first_only=True))
    except CrossoverError:
        return False
    return bool(rows) and len(rows[0][1]) >= 2 and bool(_CSV_KNOWN & {h.lower() for h in rows[0][1]})


def _read_csv(path: Path, text: str, arm_flag: str | None, axis_flag: str | None) -> list[MeasuredPoint]:
    rows = _csv_lines(text, src=f"{path}: ")
    header_line, header = next(rows)
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
    points = []
    for lineno, fields in rows:
        src = f"{path}:{lineno}"
        if len(fields) != len(names):
            raise CrossoverError(f"{src}: {len(fields)} fields, but the header (line {header_line}) has {len(names)}")
        record = dict(zip(names, fields))
        file_arm = record.get("arm", "").lower() or None
        if file_arm is not None and file_arm not in ARMS:
            raise CrossoverError(f"{src}: column 'arm' must be 'on' or 'off', got {record['arm']!r}")
        hint = "the 'arm' cell is empty" if "arm" in record else "the CSV has no 'arm' column"
        arm = _resolve_arm(src, file_arm, f"its 'arm' column says {file_arm}", arm_flag, hint)
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
        throughput = _check_throughput(src, "output_throughput", values.pop("output_throughput", None))
        tau = _tau(src, "acceptance_length", values.pop("acceptance_length", None))
        rate = values.pop("acceptance_rate", None)
        if rate is not None and math.isnan(rate):
            rate = None
        if rate is not None and not 0 <= rate <= 1:
            raise CrossoverError(f"{src}: column 'acceptance_rate' is {rate:g}; write a fraction 0-1, not a percentage")
        k = _whole(src, "k", values.pop("k", None))
        for other in LOAD_AXES:
            values.pop(other, None)
        metrics = {name: v for name, v in values.items() if math.isfinite(v)}
        points.append(MeasuredPoint(
            source=src, arm=arm, load_axis=axis, load=load, output_throughput=throughput, metrics=metrics,
            acceptance_length=tau, acceptance_rate=rate, k=k, warnings=tuple(_quality_warnings(metrics)),
            model_id=record.get("model_id", "").strip() or None))
    if not points:
        raise CrossoverError(f"{path}: no data rows under the header")
    return points
