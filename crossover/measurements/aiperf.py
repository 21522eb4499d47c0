"""NVIDIA AIPerf profile exports (ai-dynamo/aiperf `profile_export_aiperf.json`, v0.1 and the
`schema_version` 1.x exports): one file is one run, one point. Used by readers.py.

The export is a flat object (docs/reference/formats.md): one block per metric tag,
`{unit, avg, min, max, p1, p5, p10, p25, p50, p75, p90, p95, p99, std}` (None values dropped),
beside `input_config` (the user's config: `loadgen.concurrency`, `loadgen.request_rate`),
`was_cancelled`, `error_summary`, `start_time`, `end_time`; newer exports add `aiperf_version`,
`benchmark_id` and `run_info.variation_values` (`{"phases.profiling.concurrency": 40}`: the level
of one run of a sweep).

Names mean what vLLM means: AIPerf's `inter_token_latency` is (request_latency - TTFT) / (OSL - 1),
vLLM's TPOT; the gaps between streamed chunks, vLLM's ITL, are AIPerf's `inter_chunk_latency`.
Each block's `unit` is read (ms, or ns, s). AIPerf's CSV export carries no load level and its
per-request `profile_export.jsonl` no aggregate: neither is read (readers.py says so).
"""

from __future__ import annotations

from typing import Any

from ..errors import CrossoverError
from .fields import check_throughput, described
from .point import MeasuredPoint
from .summaries import child, finite, latency_stats, level_of, ms_per, scaled, tool_point

TOOL = "AIPerf"
_STATS = {"avg": ("mean",), "std": ("std",), "p50": ("median", "p50")}
# AIPerf tag -> vLLM latency name
LATENCIES = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "inter_chunk_latency": "itl",
             "request_latency": "e2el"}
# AIPerf scalar tag (its avg) -> vLLM name, in order of preference where two name one metric
VALUES = (("request_throughput", "request_throughput"), ("request_count", "completed"),
          ("error_request_count", "failed"), ("total_isl", "total_input_tokens"),
          ("total_osl", "total_output_tokens"), ("total_output_tokens", "total_output_tokens"))
_THROUGHPUT_UNITS = ("tokens/sec", "tokens/s", "tok/s", "tokens per second")
_LEVELS = {"concurrency": "concurrency", "request_rate": "request_rate"}


def is_export(obj: dict) -> bool:
    """Whether a JSON object is an AIPerf profile export (not a GenAI-Perf one: no `loadgen`)."""
    if "aiperf_version" in obj:
        return True
    if isinstance(child(obj, "input_config", "loadgen"), dict):
        return True
    return "schema_version" in obj and isinstance(obj.get("output_token_throughput"), dict)


def _block(src: str, obj: dict, tag: str) -> dict | None:
    block = obj.get(tag)
    if block is None:
        return None
    if not isinstance(block, dict):
        raise CrossoverError(f"{src}: key {tag!r} must be an AIPerf metric block ({{unit, avg, ...}}), got "
                             f"{described(block)}")
    return block


def export_point(src: str, obj: dict, arm: str | None, axis: str | None) -> MeasuredPoint:
    """The point of one AIPerf export."""
    block = _block(src, obj, "output_token_throughput")
    if block is None or block.get("avg") is None:
        raise CrossoverError(f"{src}: missing key 'output_token_throughput.avg' (output tokens/s); an AIPerf export "
                             f"of a run that streamed no tokens?")
    unit = block.get("unit")
    if unit is not None and (not isinstance(unit, str) or unit.strip().lower() not in _THROUGHPUT_UNITS):
        raise CrossoverError(f"{src}: key 'output_token_throughput.unit' is {described(unit)}; expected tokens/sec")
    key = "output_token_throughput.avg"
    throughput = check_throughput(src, key, finite(src, key, block["avg"]))

    out: dict[str, float] = {}
    for tag, name in LATENCIES.items():
        block = _block(src, obj, tag)
        if block is not None:
            if "unit" not in block:
                raise CrossoverError(f"{src}: missing key '{tag}.unit' (AIPerf writes ms, or ns: the unit is read)")
            out.update(latency_stats(src, tag, block, name, ms_per(src, f"{tag}.unit", block["unit"]), _STATS))
    for tag, name in VALUES:
        v = finite(src, f"{tag}.avg", child(_block(src, obj, tag), "avg"))
        if v is not None:
            out.setdefault(name, v)
    if "total_input_tokens" not in out and out.get("completed") is not None:
        mean = finite(src, "input_sequence_length.avg", child(_block(src, obj, "input_sequence_length"), "avg"))
        if mean is not None:
            out["total_input_tokens"] = mean * out["completed"]
    duration = _block(src, obj, "benchmark_duration")
    seconds = finite(src, "benchmark_duration.avg", child(duration, "avg"))
    if seconds is not None:
        unit = duration.get("unit", "sec")
        out["duration"] = scaled(seconds, ms_per(src, "benchmark_duration.unit", unit) / 1e3)

    warnings = []
    if obj.get("was_cancelled") is True:
        warnings.append("the AIPerf run was cancelled (was_cancelled: true)")
    load_axis, load, said = level_of(src, axis, TOOL, *_levels(src, obj))
    return tool_point(src, arm, TOOL, load_axis, load, throughput, out, warnings + said, _model(obj))


def _levels(src: str, obj: dict) -> tuple[tuple[str, Any] | None, tuple[str, Any] | None]:
    """(concurrency, request rate) the run set: a sweep's variation values first, else input_config.loadgen."""
    found: dict[str, tuple[str, Any]] = {}
    variations = child(obj, "run_info", "variation_values")
    if isinstance(variations, dict):
        for k, v in variations.items():
            axis = _LEVELS.get(str(k).rsplit(".", 1)[-1])
            if axis and v is not None:
                found.setdefault(axis, (f"run_info.variation_values.{k}", v))
    loadgen = child(obj, "input_config", "loadgen")
    for axis in _LEVELS:
        v = child(loadgen, axis)
        if axis not in found and v is not None:
            found[axis] = (f"input_config.loadgen.{axis}", v)
    for key, v in found.values():
        if isinstance(v, list):
            raise CrossoverError(f"{src}: key {key!r} is a list (the levels of a sweep) and the export does not say "
                                 f"which one this run measured (run_info.variation_values)")
    return found.get("concurrency"), found.get("request_rate")


def _model(obj: dict) -> Any:
    names = child(obj, "input_config", "endpoint", "model_names")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    return None
