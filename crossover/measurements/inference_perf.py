"""llm-d / kubernetes-sigs inference-perf stage reports (`stage_{i}_lifecycle_metrics.json`): one
stage is one load level, one point. Used by readers.py.

A stage file (docs/reference/formats.md; `inference_perf/reportgen/base.py`):

    benchmark_time_seconds
    load_summary{count, schedule_delay, send_duration, requested_rate, achieved_rate, [concurrency]}
    successes{count, latency{request_latency, normalized_time_per_output_token, time_per_output_token,
              time_to_first_token, inter_token_latency}, throughput{input_tokens_per_sec,
              output_tokens_per_sec, total_tokens_per_sec, requests_per_sec, ...}, prompt_tokens{...},
              output_tokens{...}, ...}
    failures{count, ...}

each distribution `{mean, min, max, median, p<P>...}`, latencies in **seconds** (read as ms here).

Names mean what vLLM means: `time_per_output_token` is (last - first token) / (output tokens - 1),
vLLM's TPOT; `normalized_time_per_output_token` includes TTFT and is not read; `inter_token_latency`
pools per-token gaps in which every token of a streamed chunk shares the chunk's time (zeros inside
a chunk; under speculation its median can be 0), so it is not vLLM's ITL and is not read. The stage
files carry no speculative-decoding fields. `summary_lifecycle_metrics.json` (all stages together)
is skipped in a folder (readers.py).
"""

from __future__ import annotations

from ..errors import CrossoverError
from .fields import check_throughput, described
from .point import MeasuredPoint
from .summaries import child, finite, latency_stats, level_of, tool_point

TOOL = "inference-perf"
_STATS = {"mean": ("mean",), "median": ("median",), "std": ("std",), "p50": ("p50",)}
LATENCIES = {"time_to_first_token": "ttft", "time_per_output_token": "tpot", "request_latency": "e2el"}  # seconds
RATES = {"requests_per_sec": "request_throughput", "total_tokens_per_sec": "total_token_throughput"}


def is_stage(obj: dict) -> bool:
    """Whether a JSON object is an inference-perf lifecycle report (`load_summary` and `successes`)."""
    return isinstance(obj.get("load_summary"), dict) and isinstance(obj.get("successes"), dict)


def stage_point(src: str, obj: dict, arm: str | None, axis: str | None) -> MeasuredPoint:
    """The point of one inference-perf stage file."""
    ok = obj["successes"]
    key = "successes.throughput.output_tokens_per_sec"
    tput = child(ok, "throughput", "output_tokens_per_sec")
    if tput is None:
        raise CrossoverError(f"{src}: missing key {key!r} (output tokens/s of the successful requests); "
                             f"no request of this stage succeeded?")
    throughput = check_throughput(src, key, finite(src, key, tput))

    out: dict[str, float] = {}
    latency = ok.get("latency")
    if latency is not None and not isinstance(latency, dict):
        raise CrossoverError(f"{src}: key 'successes.latency' must be an object, got {described(latency)}")
    for name, vllm in LATENCIES.items():
        out.update(latency_stats(src, f"successes.latency.{name}", child(latency, name), vllm, 1e3, _STATS))
    for name, vllm in RATES.items():
        v = finite(src, f"successes.throughput.{name}", child(ok, "throughput", name))
        if v is not None:
            out[vllm] = v
    for where, name in ((("successes", "count"), "completed"), (("failures", "count"), "failed"),
                        (("load_summary", "count"), "num_prompts"), (("benchmark_time_seconds",), "duration")):
        v = finite(src, ".".join(where), child(obj, *where))
        if v is not None:
            out[name] = v
    for name, total in (("prompt_tokens", "total_input_tokens"), ("output_tokens", "total_output_tokens")):
        mean = finite(src, f"successes.{name}.mean", child(ok, name, "mean"))
        if mean is not None and out.get("completed") is not None:
            out[total] = mean * out["completed"]

    load = obj["load_summary"]
    concurrency = ("load_summary.concurrency", load.get("concurrency")) if load.get("concurrency") else None
    rate = ("load_summary.requested_rate", load.get("requested_rate"))
    load_axis, level, warnings = level_of(src, axis, TOOL, concurrency, rate)
    return tool_point(src, arm, TOOL, load_axis, level, throughput, out, warnings)  # it names no model
