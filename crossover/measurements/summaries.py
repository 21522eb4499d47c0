"""What the readers of benchmark tools that are no engine share (GuideLLM, AIPerf, inference-perf:
guidellm.py, guidellm_csv.py, aiperf.py, inference_perf.py): a tool's distribution summaries under
vLLM's metric names and units (`median_tpot_ms`), the load level the tool drove and the point.

A name means what vLLM means by it: each reader says which of its tool's metrics is vLLM's TPOT
(GuideLLM's and AIPerf's `inter_token_latency`, inference-perf's `time_per_output_token`), and
converts seconds or nanoseconds to ms; a metric with no vLLM equivalent keeps no vLLM name.
The layouts and their traps: docs/reference/formats.md (from the tools' released source and docs).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from ..errors import CrossoverError
from .fields import described, number, quality_warnings, resolve_arm
from .limits import implausible_load
from .point import MeasuredPoint

# Milliseconds per unit of a latency, as the tools spell their units.
_MS_PER = {"ms": 1.0, "msec": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "s": 1e3, "sec": 1e3, "secs": 1e3,
           "second": 1e3, "seconds": 1e3, "us": 1e-3, "\u00b5s": 1e-3, "usec": 1e-3, "microseconds": 1e-3,
           "ns": 1e-6, "nsec": 1e-6, "nanoseconds": 1e-6}
_PLAIN_PERCENTILE = re.compile(r"^p(\d+(?:\.\d+)?)$")


def child(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]...: None where a step is missing or not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def ms_per(src: str, key: str, unit: Any) -> float:
    """Milliseconds per `unit` (a tool's latency unit: ms, s, us, ns); one line for another."""
    if isinstance(unit, str) and unit.strip().lower() in _MS_PER:
        return _MS_PER[unit.strip().lower()]
    raise CrossoverError(f"{src}: key {key!r} is {described(unit)}; expected a latency unit (ms, s, us or ns)")


def scaled(value: float, factor: float) -> float:
    """value * factor (a unit conversion) to 12 significant digits, far below any measurement's
    precision: 3240000 ns is 3.24 ms, not 3.2399999999999998."""
    return value if factor == 1 else float(f"{value * factor:.12g}")


def finite(src: str, key: str, value: Any) -> float | None:
    """A number as float; None for null, absent or NaN/inf (not measured); one line for a non-number."""
    num = number(src, key, value)
    return num if num is not None and math.isfinite(num) else None


def plain_percentile(key: str) -> str | None:
    """vLLM's spelling of a percentile key written as `p99`, `p99.9` or `p0.1` (AIPerf, inference-perf)."""
    m = _PLAIN_PERCENTILE.match(key)
    return f"p{m.group(1)}" if m else None


def latency_stats(src: str, key: str, summary: Any, name: str, ms: float,
                  stats: Mapping[str, tuple[str, ...]]) -> dict[str, float]:
    """vLLM's `{stat}_{name}_ms` entries of one distribution summary: `stats` maps the tool's stat
    keys to vLLM's stat names (mean, median, std, p99, ...), the values times `ms` (to ms)."""
    if summary is None:
        return {}
    if not isinstance(summary, dict):
        raise CrossoverError(f"{src}: key {key!r} must be a distribution summary (an object), got {described(summary)}")
    out: dict[str, float] = {}
    for tool_key, value in summary.items():
        names = stats.get(tool_key) if isinstance(tool_key, str) else None
        if names is None and isinstance(tool_key, str) and (p := plain_percentile(tool_key)):
            names = (p,)
        if not names:
            continue
        num = finite(src, f"{key}.{tool_key}", value)
        if num is not None:
            for stat in names:
                out.setdefault(f"{stat}_{name}_ms", scaled(num, ms))
    return out


def level_of(src: str, forced: str | None, tool: str, concurrency: tuple[str, Any] | None = None,
             rate: tuple[str, Any] | None = None,
             measured: tuple[str, Any] | None = None) -> tuple[str, float, list[str]]:
    """(axis, level, warnings) of a run a tool drove at a set concurrency or a set request rate, in
    vLLM's order: a set concurrency (a cap beside a rate too), a set rate, then the measured mean
    concurrency (with a warning). Each of `concurrency`, `rate`, `measured` is (where the file says
    it, the value), or None; `forced` is --load-axis."""
    def level(pair: tuple[str, Any] | None, axis: str) -> float | None:
        if pair is None or pair[1] is None:
            return None
        num = number(src, pair[0], pair[1])
        if num is None:
            return None
        if not (math.isfinite(num) and num > 0):
            raise CrossoverError(f"{src}: key {pair[0]!r} must be a finite number > 0, got {pair[1]!r}")
        if why := implausible_load(axis, num):
            raise CrossoverError(f"{src}: key {pair[0]!r}: {why}")
        return num

    if forced == "batch":
        raise CrossoverError(f"{src}: load_axis 'batch' was asked for but {tool} drives a server by concurrency or "
                             f"request rate, not by batch")
    if forced == "request_rate":
        r = level(rate, "request_rate")
        if r is None:
            said = f" (it set {concurrency[0]})" if concurrency is not None and concurrency[1] is not None else ""
            raise CrossoverError(f"{src}: load_axis 'request_rate' was asked for but this {tool} run set no request "
                                 f"rate{said}")
        return "request_rate", r, []
    c = level(concurrency, "concurrency")
    if c is not None:
        return "concurrency", c, []
    r = level(rate, "request_rate") if forced is None else None
    if r is not None:
        return "request_rate", r, []
    m = level(measured, "concurrency")
    if m is not None:
        why = "the run set no concurrency" + ("" if forced else " or request rate")
        return "concurrency", m, [f"load: {why}; using the measured {measured[0]}={m:g} as the concurrency"]
    what = "concurrency" if forced == "concurrency" else "concurrency or request rate"
    raise CrossoverError(f"{src}: cannot tell the load level: the {tool} run states no {what} it drove"
                         f"{', and no measured concurrency' if measured is not None else ''}")


def tool_point(src: str, arm_flag: str | None, tool: str, axis: str, load: float, throughput: float,
               metrics: dict[str, float], warnings: list[str], model: Any = None) -> MeasuredPoint:
    """The point of one run of a tool whose results carry no speculative-decoding fields: its arm is
    the --on / --off it was passed under."""
    arm = resolve_arm(src, None, "", arm_flag, f"{tool} results carry no speculative-decoding fields")
    model_id = model.strip() if isinstance(model, str) and model.strip() else None
    return MeasuredPoint(source=src, arm=arm, load_axis=axis, load=load, output_throughput=throughput,
                         metrics=metrics, warnings=tuple(warnings + quality_warnings(metrics)), model_id=model_id)
