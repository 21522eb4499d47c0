"""GuideLLM reports (vllm-project/guidellm `benchmarks.json` / `benchmarks.yaml`, v0.3 to v0.7): one
point per benchmark (one strategy: a concurrency or a request rate). Used by readers.py.

Layouts (docs/reference/formats.md), told apart by content:
- v0.7+: `metadata.version == 2`, top-level `config` (the scenario) and `benchmarks`;
- v0.5-v0.6: `metadata.version == 1`, top-level `args` and `benchmarks`;
- v0.4: no `metadata`, top-level `args`, `benchmarks[0].config`;
- <=v0.3: no `metadata`, `benchmarks[0].args` and `benchmarks[0].run_stats`; the request counts on
  the benchmark (`request_totals`), the strategy under `args`.

Traps kept out: GuideLLM's `time_per_output_token_ms` includes TTFT since v0.4 (and divides by all
output tokens before), so it is no TPOT; vLLM's TPOT is GuideLLM's `inter_token_latency_ms`. Its
`request_latency` is in seconds. The `.mean` of `output_tokens_per_second` is total tokens over the
window (the system throughput); its median is an instantaneous rate. GuideLLM has no speculative-
decoding fields: `iter_tokens_per_iteration` (tokens per streamed chunk after the first) is kept
under its own name, never as the acceptance length it only approximates.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import CrossoverError, FileError
from ..files import malformed_yaml
from .fields import check_throughput, described, number
from .point import MeasuredPoint
from .summaries import child, finite, latency_stats, level_of, tool_point

TOOL = "GuideLLM"
_STATS = {"mean": ("mean",), "median": ("median",), "std_dev": ("std",)}
# GuideLLM's percentile keys: p001 is the 0.1th percentile, p01 the 1st, p999 the 99.9th.
_PERCENTILES = {"p001": ("p0.1",), "p01": ("p1",), "p05": ("p5",), "p10": ("p10",), "p25": ("p25",),
                "p50": ("p50",), "p75": ("p75",), "p90": ("p90",), "p95": ("p95",), "p99": ("p99",),
                "p999": ("p99.9",)}
# GuideLLM metric -> (vLLM latency name, ms per unit). inter_token_latency_ms is vLLM's TPOT.
LATENCIES = {"time_to_first_token_ms": ("ttft", 1.0), "inter_token_latency_ms": ("tpot", 1.0),
             "request_latency": ("e2el", 1e3)}
# GuideLLM metric (its successful mean) -> vLLM name.
RATES = {"requests_per_second": "request_throughput", "tokens_per_second": "total_token_throughput",
         "request_concurrency": "concurrency", "iter_tokens_per_iteration": "iter_tokens_per_iteration"}
LAYOUTS = {2: "v0.7+", 1: "v0.5-v0.6"}


def is_report(obj: dict) -> bool:
    """Whether a JSON/YAML object is a GuideLLM report (a `benchmarks` list: no engine writes one)."""
    return isinstance(obj.get("benchmarks"), list)


def layout(src: str, obj: dict) -> str:
    """The report's layout by the detection rule of each release (B1.1)."""
    meta = obj.get("metadata")
    benches = obj["benchmarks"]
    if not benches:
        raise CrossoverError(f"{src}: GuideLLM report with an empty 'benchmarks' list: no benchmark ran")
    first = benches[0]
    if not isinstance(first, dict):
        raise CrossoverError(f"{src}: GuideLLM report: key 'benchmarks[0]' must be an object, got {described(first)}")
    if meta is not None:
        version = meta.get("version") if isinstance(meta, dict) else None
        if isinstance(version, bool) or version not in LAYOUTS:
            raise CrossoverError(f"{src}: GuideLLM report: key 'metadata.version' is "
                                 f"{described(version) if version is not None else 'missing'}; this reads schema "
                                 f"versions 1 (v0.5-v0.6) and 2 (v0.7+)")
        return LAYOUTS[version]
    if "args" in obj and isinstance(first.get("config"), dict):
        return "v0.4"
    if isinstance(first.get("args"), dict) and isinstance(first.get("run_stats"), dict):
        return "v0.3"
    raise CrossoverError(
        f"{src}: unknown GuideLLM report layout: no 'metadata.version' (v0.5+), no top-level 'args' with "
        f"'benchmarks[0].config' (v0.4) and no 'benchmarks[0].args' with 'benchmarks[0].run_stats' (<=v0.3)")


def report_points(src: str, obj: dict, arm: str | None, axis: str | None) -> list[MeasuredPoint]:
    """Every benchmark of a GuideLLM report as a point (`src`: the file, or file:line)."""
    form = layout(src, obj)
    return [benchmark_point(f"{src} benchmarks[{i}]", obj, b, form, arm, axis)
            for i, b in enumerate(obj["benchmarks"])]


def benchmark_point(src: str, report: dict, bench: Any, form: str, arm: str | None,
                    axis: str | None) -> MeasuredPoint:
    if not isinstance(bench, dict):
        raise CrossoverError(f"{src}: expected a GuideLLM benchmark (an object), got {described(bench)}")
    kind = bench.get("type_")
    if kind is not None and kind != "generative_benchmark":
        raise CrossoverError(f"{src}: key 'type_' is {described(kind)}; expected 'generative_benchmark'")
    old = form == "v0.3"
    metrics = bench.get("metrics")
    if not isinstance(metrics, dict):
        raise CrossoverError(f"{src}: missing key 'metrics' (the benchmark's measurements)")
    key = "metrics.output_tokens_per_second.successful.mean"
    tput = child(metrics, "output_tokens_per_second", "successful", "mean")
    if tput is None:
        raise CrossoverError(f"{src}: missing key {key!r} (output tokens/s of the successful requests)")
    throughput = check_throughput(src, key, number(src, key, tput))

    out: dict[str, float] = {}
    for name, (vllm, ms) in LATENCIES.items():
        ds = child(metrics, name, "successful")
        out.update(latency_stats(src, f"metrics.{name}.successful", ds, vllm, ms, _STATS))
        pct = child(ds, "percentiles")
        out.update(latency_stats(src, f"metrics.{name}.successful.percentiles", pct, vllm, ms, _PERCENTILES))
    for name, vllm in RATES.items():
        v = finite(src, f"metrics.{name}.successful.mean", child(metrics, name, "successful", "mean"))
        if v is not None:
            out[vllm] = v
    totals_key = "request_totals" if old else "metrics.request_totals"
    totals = bench.get("request_totals") if old else metrics.get("request_totals")
    if totals is None:  # in the other place: a report between the documented layouts
        totals_key = "metrics.request_totals" if old else "request_totals"
        totals = metrics.get("request_totals") if old else bench.get("request_totals")
    for status, vllm in (("successful", "completed"), ("errored", "failed"), ("total", "num_prompts")):
        v = finite(src, f"{totals_key}.{status}", child(totals, status))
        if v is not None:
            out[vllm] = v
    for name, vllm in (("prompt_token_count", "total_input_tokens"), ("output_token_count", "total_output_tokens")):
        v = _total(src, f"metrics.{name}.successful", child(metrics, name, "successful"))
        if v is not None:
            out[vllm] = v
    duration = _duration(src, bench)
    if duration is not None:
        out["duration"] = duration

    where = "args.strategy" if old else "config.strategy"
    measured = ("metrics.request_concurrency.successful.mean", out.get("concurrency"))
    load_axis, load, warnings = strategy_load(src, child(bench, *where.split(".")), where, measured, axis)
    return tool_point(src, arm, TOOL, load_axis, load, throughput, out, warnings, _model(report, bench))


def strategy_load(src: str, strategy: Any, where: str, measured: tuple[str, Any],
                  forced: str | None) -> tuple[str, float, list[str]]:
    """(axis, level, warnings) of a GuideLLM strategy (B1.3): synchronous is concurrency 1, concurrent
    its streams, constant / poisson their rate (a max_concurrency beside it caps, as in vLLM),
    throughput its max_concurrency or else the measured mean concurrency."""
    if not isinstance(strategy, dict):
        raise CrossoverError(f"{src}: missing key {where!r} (the strategy GuideLLM ran: the load level)")
    kind = strategy.get("type_", strategy.get("type"))
    cap = (f"{where}.max_concurrency", strategy.get("max_concurrency"))
    if kind == "synchronous":
        return level_of(src, forced, TOOL, concurrency=(f"{where}.type_ 'synchronous'", 1))
    if kind == "concurrent":
        if strategy.get("streams") is None:
            raise CrossoverError(f"{src}: missing key '{where}.streams' (the concurrency of a concurrent strategy)")
        return level_of(src, forced, TOOL, concurrency=(f"{where}.streams", strategy["streams"]))
    if kind == "throughput":
        return level_of(src, forced, TOOL, concurrency=cap, measured=measured)
    if kind in ("constant", "poisson"):
        if strategy.get("rate") is None:
            raise CrossoverError(f"{src}: missing key '{where}.rate' (the request rate of a {kind} strategy)")
        return level_of(src, forced, TOOL, concurrency=cap, rate=(f"{where}.rate", strategy["rate"]),
                        measured=measured)
    if kind == "trace":
        raise CrossoverError(f"{src}: a trace replay ('{where}.type_' is 'trace') has no load level; run GuideLLM's "
                             f"concurrent, constant or poisson profile")
    raise CrossoverError(f"{src}: key '{where}.type_' is {described(kind) if kind is not None else 'missing'}; "
                         f"expected synchronous, concurrent, throughput, constant or poisson")


def _total(src: str, key: str, ds: Any) -> float | None:
    """A per-request token count's sum over the successful requests (its total_sum, else mean * count)."""
    total = finite(src, f"{key}.total_sum", child(ds, "total_sum"))
    if total is not None:
        return total
    mean, count = finite(src, f"{key}.mean", child(ds, "mean")), finite(src, f"{key}.count", child(ds, "count"))
    return mean * count if mean is not None and count is not None else None


def _duration(src: str, bench: dict) -> float | None:
    """Seconds the benchmark ran: its `duration` (v0.4+), else run_stats end - start (<=v0.3)."""
    duration = finite(src, "duration", bench.get("duration"))
    if duration is None:
        start = finite(src, "run_stats.start_time", child(bench, "run_stats", "start_time"))
        end = finite(src, "run_stats.end_time", child(bench, "run_stats", "end_time"))
        duration = end - start if start is not None and end is not None else None
    return duration if duration is not None and duration > 0 else None


def _model(report: dict, bench: dict) -> Any:
    """The model the report names: the scenario's backend (v0.7), args (v0.4-v0.6), the benchmark's
    backend, or the worker's backend_model (<=v0.3); None where it names none."""
    for v in (child(report, "config", "spec", "backend", "model"), child(report, "args", "model"),
              child(bench, "config", "backend", "model"), child(bench, "worker", "backend_model")):
        if isinstance(v, str) and v.strip():
            return v
    return None


# --------------------------------------------------------------------------- YAML

_YAML_KEY = re.compile(r"^(?:metadata|args|config|benchmarks)\s*:(?:\s|$)")
YAML_MAX_DEPTH = 64


def looks_like_yaml_report(text: str) -> bool:
    """Whether a text's first line of content is a top-level key of a GuideLLM report."""
    for line in text.split("\n"):
        stripped = line.strip().removeprefix("\ufeff")
        if not stripped or stripped.startswith("#") or stripped in ("---", "%YAML 1.1", "%YAML 1.2"):
            continue
        return bool(_YAML_KEY.match(line.removeprefix("\ufeff").removeprefix("--- ")))
    return False


def load_yaml(path: Path, text: str) -> Any:
    """A YAML document (safe_load: no object of Python's), parsed by libyaml where PyYAML has it; a
    document nested past YAML_MAX_DEPTH, malformed or with values YAML cannot build is one line."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    opens, closes = (yaml.MappingStartEvent, yaml.SequenceStartEvent), (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    try:
        depth = 0
        for event in yaml.parse(text, Loader=loader):  # a flat walk first: libyaml's composer recurses in C
            if isinstance(event, opens):
                depth += 1
                if depth > YAML_MAX_DEPTH:
                    raise FileError(f"{path}: YAML nested deeper than {YAML_MAX_DEPTH} levels; expected a GuideLLM "
                                    f"report")
            elif isinstance(event, closes):
                depth -= 1
        return yaml.load(text, Loader=loader)
    except FileError:
        raise
    except yaml.YAMLError as exc:
        raise malformed_yaml(path, exc) from None
    except RecursionError:
        raise FileError(f"{path}: YAML nested too deep; expected a GuideLLM report") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a date past December, an int of 5000 digits
        raise FileError(f"{path}: a YAML value that is no measurement ({str(exc).splitlines()[0][:80]})") from None
