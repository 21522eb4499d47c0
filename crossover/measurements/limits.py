"""What a measured value may be: the ranges outside which a latency, throughput, load level, count or
k is no measurement but a denormal, a unit slip or garbage (whose ratios and sums overflow), and how
an error line shows a number of any size. Used by fields.py, point.py, csv_table.py and acceptance.py.
"""

from __future__ import annotations

from typing import Any


# A measured latency or throughput is 0 (not measured, or nothing delivered) or inside these ranges:
# a nonzero latency below 1 ns or a throughput below one token in ~12 days is a denormal or a unit
# slip, not a measurement, and would make a fake crossover (a ratio of ~0 or ~inf). Above the upper
# bounds, ratios of two such values overflow.
LATENCY_MS_RANGE = (1e-6, 1e12)
THROUGHPUT_RANGE = (1e-6, 1e12)
# A load level (requests in flight, requests/s or sequences per step) lies inside this range: a
# billion requests in flight or per second is no server, and one request in ~12 days is no sweep. A
# level of 1e300 (or a denormal) overflowed the model's step prices at it (numpy warnings, inf in the JSON).
LOAD_RANGE = (1e-6, 1e9)
_LOAD_UNITS = {"concurrency": "requests in flight", "request_rate": "requests/s", "batch": "sequences"}


def implausible_load(axis: str, value: float) -> str | None:
    """Why a finite load level > 0 is no measurement; None if it is one."""
    lo, hi = LOAD_RANGE
    if lo <= value <= hi:
        return None
    unit = _LOAD_UNITS.get(axis, "")
    return f"{axis} {value:g} {unit} is no load level (expected {lo:g}-{hi:g} {unit}; a unit slip?)"


# A count a result file reports (requests, tokens, drafts) is at most this in size: 1e18 tokens is a
# server at 10 million tokens/s for 3,000 years. Sums of larger ones overflow (1e308 drafts in two
# runs summed to inf in the n-gram match rate: numpy's overflow warning).
MAX_COUNT = 1e18
COUNT_KEYS = frozenset({
    "completed", "failed", "num_prompts", "total_input_tokens", "total_output_tokens", "total_input_text_tokens",
    "total_input_vision_tokens", "total_output_tokens_retokenized", "spec_decode_num_drafts",
    "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
})


def implausible_count(name: str, value: float) -> str | None:
    """Why a finite value of a count (COUNT_KEYS) is no count; None if it is one (or not a count)."""
    if name not in COUNT_KEYS or abs(value) <= MAX_COUNT:
        return None
    return f"{name} {value:g} is no count (at most 1e18; a unit slip?)"


def implausible(name: str, value: float) -> str | None:
    """Why a finite, non-negative latency (`*_ms`) or output_throughput is no measurement; None if it is one."""
    lo, hi, unit = (*LATENCY_MS_RANGE, "ms") if name.endswith("_ms") else (*THROUGHPUT_RANGE, "tokens/s")
    if value == 0 or lo <= value <= hi:
        return None
    return (f"{name} {value:g} {unit} is no measurement (expected 0 or {lo:g}-{hi:g} {unit}; "
            f"a denormal or a unit slip?)")


# The most draft tokens per step (k) a file may report: engines draft a handful (chains of 1-16,
# SGLang's trees verify a few hundred tokens at most), and the model takes at most 128. A larger k is
# a unit slip or garbage (1e30 overflowed the int64 column: a traceback).
MAX_K = 1024


def shown_number(value: Any) -> str:
    """A number as an error line shows it: short, whatever its size (an int of 4000 digits too)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"a number of {len(str(abs(value)))} digits"
    return repr(value)
