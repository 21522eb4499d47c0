"""Read measured sweeps (vLLM `bench serve` JSON/JSONL/summary lists, SGLang bench_serving JSONL,
GuideLLM reports (JSON, YAML, CSV), AIPerf profile exports, inference-perf stage files, CSV).

Formats are told apart by content, never by file name. Every error is one line naming the file
(and line) and the key at fault; input files are only read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator, Sequence

from ..errors import FileError, InputError
from ..files import read_text, read_text_chunks, too_deep
from . import aiperf, guidellm, inference_perf
from .csv_table import CSV_DOC, looks_like_csv, read_csv
from .guidellm_csv import looks_like_guidellm_csv, read_guidellm_csv
from .fields import (
    described,
    load_of,
    metrics_of,
    quality_warnings,
    resolve_arm,
    sglang_acceptance,
    sglang_arm,
    sglang_k,
    sglang_server_info,
    throughput_of,
    vllm_acceptance,
    vllm_arm,
    vllm_k,
)
from .point import ARMS, LOAD_AXES, MeasuredPoint
from .columns import ColumnBuilder, Columns

RESULT_SUFFIXES = (".json", ".jsonl", ".csv", ".yaml", ".yml")
_YAML = (".yaml", ".yml")
# What wrote a file (Columns.formats): the JSON formats _detect tells apart, and the others.
TOOLS = {"guidellm": guidellm.TOOL, "aiperf": aiperf.TOOL, "inference-perf": inference_perf.TOOL}
# inference-perf's folder: one stage file per level, beside their summary and server scrapes.
_STAGE = re.compile(r"^stage_(\d+)_lifecycle_metrics\.json$")
_AIPERF_EXPORT = "profile_export_aiperf.json"

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
_BLANK = re.compile(r"[\ufeff \t\r\n]*")


# --------------------------------------------------------------------------- entry point

def read_measurements(paths: Sequence[str | Path], arm: str | None = None,
                      load_axis: str | None = None) -> list[MeasuredPoint]:
    """Every measured point in `paths` (files or directories); `arm` and `load_axis` apply to all of them."""
    return read_columns(paths, arm, load_axis).points()


def read_columns(paths: Sequence[str | Path], arm: str | None = None, load_axis: str | None = None) -> Columns:
    """What `read_measurements` reads, as column arrays (no Python object per row): what
    `MeasuredTable(columns=...)` holds."""
    if arm is not None and arm not in ARMS:
        raise InputError(f"arm must be 'on' or 'off' (or None to read it from the files), got {arm!r}", parameter="arm")
    if load_axis is not None and load_axis not in LOAD_AXES:
        raise InputError(f"load_axis must be one of {', '.join(LOAD_AXES)} (or None), got {load_axis!r}", parameter="load_axis")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    parts = [_file_columns(f, arm, load_axis) for p in paths for f in _expand(Path(p))]
    return Columns.concat(parts) if parts else Columns(0)


def _expand(path: Path) -> list[Path]:
    """A file as itself; a directory as its result files (sorted, companions and repeats skipped)."""
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # a folder above it that cannot be searched (permissions)
        raise FileError(f"{path}: cannot read ({exc.strerror or exc}); expected {_EXPECTED}") from None
    if is_dir:
        try:  # listing it, and telling its entries' kinds, may be refused (permissions 000, or r without x)
            files = sorted(
                f for f in path.iterdir()
                if f.is_file() and f.suffix.lower() in RESULT_SUFFIXES
                and not f.name.endswith(".pytorch.json") and f.name != "warmup.json"
            )
        except OSError as exc:
            raise FileError(f"{path}: cannot read this directory ({exc.strerror or exc}); expected a folder of "
                            f"result files (*.json, *.jsonl, *.csv)") from None
        if not files:
            raise FileError(f"{path}: no *.json, *.jsonl, *.csv or *.yaml result files in this directory")
        return _result_files(path, files)
    if not path.exists():
        raise FileError(f"{path}: no such file or directory")
    return [path]


def _result_files(path: Path, files: list[Path]) -> list[Path]:
    """The files of a folder that hold results, each run once: an inference-perf run's stage files (not
    its summary or scrapes), an AIPerf run's export (not its inputs or CSV), a report that GuideLLM also
    wrote as YAML or CSV beside its JSON in the JSON only, YAML only when it is a GuideLLM report."""
    stages = sorted((int(m.group(1)), f) for f in files if (m := _STAGE.match(f.name)))
    if stages:
        return [f for _, f in stages]
    if path / _AIPERF_EXPORT in files:
        return [path / _AIPERF_EXPORT]
    stems = {f.stem for f in files if f.suffix.lower() == ".json"}
    files = [f for f in files if f.suffix.lower() in (".json", ".jsonl") or f.stem not in stems]
    files = [f for f in files if f.suffix.lower() not in _YAML or _yaml_report(f)]
    if not files:
        raise FileError(f"{path}: no result files in this directory (its YAML files are no GuideLLM reports)")
    # `vllm bench sweep serve` writes summary.json as a list repeating the run=<n>.json files
    # next to it; read it only when it is the sole JSON there, or every run would count twice.
    summary = path / "summary.json"
    others = [f for f in files if f.suffix.lower() in (".json", ".jsonl") and f.name != "summary.json"]
    if summary in files and others and _starts_with(summary, "["):
        files.remove(summary)
    return files


def _yaml_report(path: Path) -> bool:
    """Whether a YAML file in a folder is a GuideLLM report (its first key), not a config beside results."""
    try:
        return guidellm.looks_like_yaml_report(next(read_text_chunks(path, _EXPECTED, 1 << 16), ""))
    except FileError:  # not UTF-8, unreadable: no report; a file named on its own says why
        return False


def _starts_with(path: Path, char: str) -> bool:
    return _read_text(path).lstrip("\ufeff \t\r\n").startswith(char)


_EXPECTED = "a vLLM/SGLang/GuideLLM/AIPerf/inference-perf result or a CSV"


def _read_text(path: Path) -> str:
    return read_text(path, _EXPECTED)


def read_file(path: Path, arm: str | None = None, load_axis: str | None = None) -> list[MeasuredPoint]:
    """The measured points of one file, its format detected by content."""
    return _file_columns(Path(path), arm, load_axis).points()


def _file_columns(path: Path, arm: str | None, load_axis: str | None) -> Columns:
    """One file's points as columns: a CSV is read a piece of lines at a time, never held whole."""
    pieces = read_text_chunks(path, _EXPECTED)  # whole lines, universal newlines, UTF-8 checked
    text = ""
    for piece in pieces:  # enough of the file to tell its format: the first non-blank character
        text += piece
        if _BLANK.match(text).end() < len(text):
            break
    body_at = _BLANK.match(text).end()
    if body_at == len(text):
        raise FileError(f"{path}: empty file; expected {_EXPECTED}")
    if text[body_at] in "{[":
        text += "".join(pieces)  # a JSON value is parsed from the whole text
        rows, formats, algorithms = ColumnBuilder(), set(), set()
        for src, obj in _json_records(path, text):
            fmt = _detect(src, obj)
            points = _tool_points(src, obj, fmt, arm, load_axis) if fmt in TOOLS else [
                _from_record(src, obj, fmt, arm, load_axis)]
            for point in points:
                rows.add_point(point)
            formats.add(fmt)
            if fmt == "sglang" and points[0].arm == "on":
                algo = (sglang_server_info(obj)[0] or {}).get("speculative_algorithm")
                if isinstance(algo, str) and algo.strip():
                    algorithms.add(algo.strip().upper())
        del text
        out = rows.build()
        out.formats, out.algorithms = frozenset(formats), frozenset(algorithms)
        return out
    while not _has_data_line(text):  # comments or blank lines before the header: read on
        piece = next(pieces, None)
        if piece is None:
            break
        text += piece
    if looks_like_guidellm_csv(text):
        text += "".join(pieces)  # one row per benchmark: a small file
        return _columns(read_guidellm_csv(path, text, arm, load_axis), "guidellm")
    if looks_like_csv(text):
        out = read_csv(path, text, arm, load_axis, more=pieces, size_hint=_size(path))
        out.formats = frozenset({"csv"})
        return out
    if guidellm.looks_like_yaml_report(text):
        text += "".join(pieces)
        report = guidellm.load_yaml(path, text)
        del text
        if isinstance(report, dict) and guidellm.is_report(report):
            return _columns(guidellm.report_points(str(path), report, arm, load_axis), "guidellm")
    if path.suffix.lower() in _YAML:
        raise FileError(f"{path}: unknown format: a YAML file that is no GuideLLM report (a mapping with a "
                        f"'benchmarks' list)")
    hint = ""
    first = text[body_at:].split("\n", 1)[0].lstrip("\ufeff").strip().lower()
    if first.startswith("metric,"):
        hint = (" (it looks like an AIPerf or GenAI-Perf CSV export, which states no load level: read its "
                "profile_export_aiperf.json)")
    raise FileError(
        f"{path}: unknown format: expected a vLLM bench serve result (JSON or JSONL), an SGLang "
        f"bench_serving JSONL, a GuideLLM report (JSON, YAML or CSV), an AIPerf profile export, an "
        f"inference-perf stage file or a measured CSV ({CSV_DOC}){hint}")


def _columns(points: list[MeasuredPoint], fmt: str) -> Columns:
    rows = ColumnBuilder()
    for point in points:
        rows.add_point(point)
    out = rows.build()
    out.formats = frozenset({fmt})
    return out


def _tool_points(src: str, obj: dict, fmt: str, arm: str | None, axis: str | None) -> list[MeasuredPoint]:
    """The points of one object a benchmark tool wrote (GuideLLM: one per benchmark)."""
    if fmt == "guidellm":
        return guidellm.report_points(src, obj, arm, axis)
    if fmt == "aiperf":
        return [aiperf.export_point(src, obj, arm, axis)]
    return [inference_perf.stage_point(src, obj, arm, axis)]


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _has_data_line(text: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.split("\n"))


# --------------------------------------------------------------------------- JSON / JSONL

def _json_records(path: Path, text: str) -> Iterator[tuple[str, dict]]:
    """(source, object) for every result object, one at a time: one JSON value, JSONL, or
    concatenated values (a large file is never held as a list of parsed objects)."""
    decoder = json.JSONDecoder()  # accepts NaN / Infinity, as Python's json.dumps writes them
    skip = re.compile(r"[\s\ufeff]*")
    pos = skip.match(text, 0).end()
    line, counted = 1, 0
    first = True
    multi = path.suffix.lower() == ".jsonl"
    while pos < len(text):
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise FileError(_json_error(path, text, exc)) from None
        except RecursionError:
            raise too_deep(path, "a vLLM/SGLang result") from None
        except ValueError as exc:  # an integer of more than 4300 digits (Python's int() limit)
            line += text.count("\n", counted, pos)
            why = str(exc).split(";")[0]
            raise FileError(f"{path}:{line}: a number of thousands of digits is no measurement ({why})") from None
        line += text.count("\n", counted, pos)
        counted = pos
        at = line
        pos = skip.match(text, end).end()
        if first and pos < len(text):
            multi = True  # a second value follows
        first = False
        base = f"{path}:{at}" if multi else str(path)
        if isinstance(value, dict):
            yield base, value
        elif isinstance(value, list):
            if not value:
                raise FileError(f"{base}: empty JSON list; expected vLLM results (a sweep summary.json)")
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    raise FileError(f"{base}[{i}]: expected a JSON object (one result), got {described(item)}")
                yield f"{base}[{i}]", item
        else:
            raise FileError(f"{base}: expected a JSON object or a list of them, got {described(value)}")


def _json_error(path: Path, text: str, exc: json.JSONDecodeError) -> str:
    keys = re.findall(r'"((?:[^"\\]|\\.)*)"\s*:', text[: exc.pos])
    after = f", after key {keys[-1]!r}" if keys else ""
    at_end = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    what = "truncated JSON (the file ends inside a value)" if at_end else "malformed JSON"
    return f"{path}: {what} at line {exc.lineno}, column {exc.colno}{after}: {exc.msg}"


def _detect(src: str, obj: dict) -> str:
    if guidellm.is_report(obj):
        return "guidellm"
    if inference_perf.is_stage(obj):
        return "inference-perf"
    if aiperf.is_export(obj):
        return "aiperf"
    keys = set(obj)
    if keys & set(_VLLM_STRONG) or any(k.startswith("spec_decode_") for k in keys):
        return "vllm"
    if keys & set(_SGLANG_MARKERS):
        return "sglang"
    if keys & set(_VLLM_WEAK):
        return "vllm"
    if isinstance(obj.get("metrics"), dict) and "metadata" in keys:
        hint = (" (it looks like AIPerf's per-request profile_export.jsonl; read its aggregate, "
                "profile_export_aiperf.json)")
    elif "schema_version" in keys:
        hint = " (it looks like an AIPerf export, but it has no 'output_token_throughput' block)"
    elif "input_config" in keys:
        hint = " (it looks like a GenAI-Perf export, which is not read)"
    elif any(k.startswith("results_") for k in keys):
        hint = " (it looks like an LLMPerf summary, which is not read)"
    else:
        hint = ""
    raise FileError(
        f"{src}: unknown format: a JSON object with none of the keys of a vLLM result ('endpoint_type', "
        f"'total_token_throughput'), an SGLang bench_serving line ('server_info', "
        f"'total_output_tokens_retokenized'), a GuideLLM report ('benchmarks'), an AIPerf export "
        f"('input_config.loadgen', 'aiperf_version') or an inference-perf stage ('load_summary', "
        f"'successes'){hint}")


def _from_record(src: str, obj: dict, fmt: str, arm_flag: str | None, axis_flag: str | None) -> MeasuredPoint:
    """One result object, written by `fmt` ("vllm" or "sglang", as _detect tells), as a point."""
    throughput = throughput_of(src, obj)
    axis, load, warnings = load_of(src, obj, axis_flag)
    if fmt == "vllm":
        file_arm, evidence = vllm_arm(obj)
        hint = "the file has no spec_decode_* or speculative_config keys"
        metrics = metrics_of(src, obj, _VLLM_ALIASES, None)
        tau, rate, per_pos = vllm_acceptance(src, obj)
        k = vllm_k(src, obj, per_pos)
    else:
        file_arm, evidence = sglang_arm(obj)
        hint = "server_info.speculative_algorithm is missing"
        metrics = metrics_of(src, obj, _SGLANG_ALIASES, _SGLANG_E2E)
        tau, rate, per_pos = sglang_acceptance(src, obj), None, None
        k = sglang_k(src, obj)
    arm = resolve_arm(src, file_arm, evidence, arm_flag, hint)
    return MeasuredPoint(
        source=src, arm=arm, load_axis=axis, load=load, output_throughput=throughput, metrics=metrics,
        acceptance_length=tau, acceptance_rate=rate, per_position=per_pos, k=k,
        warnings=tuple(warnings + quality_warnings(metrics)), model_id=_model_id(obj),
    )


def _model_id(obj: dict) -> str | None:
    """The served model's id: vLLM's `model_id`, else SGLang's `server_info.model_path` (strings only)."""
    info = obj.get("server_info")
    for v in (obj.get("model_id"), info.get("model_path") if isinstance(info, dict) else None):
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None
