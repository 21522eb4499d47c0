"""What every JSON result must satisfy, shared by the fuzz tests of the CLI and of `crossover serve`:
no bare NaN or Infinity, finite numbers, non-negative ones except logarithms, p99 >= p50."""

from __future__ import annotations

import json
import re

# Keys whose values are signed by nature: logarithms of ratios (calibration residuals), and the load fit's
# slope C2 (a latency that does not grow with load fits C2 <= 0), its ratio and the break-even r* it implies.
SIGNED = re.compile(r"(^|[._])(ln|log)(_|$)|ln_ratio|residual|load_fit\.(\w+\.c2_ms_per_request|c2_ratio|r_star)")


def _no_constant(name):
    raise AssertionError(f"the JSON holds a bare {name}")


def strict_loads(text: str):
    """json.loads that fails on NaN, Infinity and -Infinity (not JSON)."""
    return json.loads(text, parse_constant=_no_constant)


def numbers(obj, path=""):
    """(path, value) of every number in a parsed JSON value (booleans excluded)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v, f"{path}[]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, obj


def percentiles_ordered(obj, path=""):
    """p99 >= p50 (or median) of the same metric, in every mapping (prefixed keys too: on_p99_tpot_ms)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            m = re.fullmatch(r"(\w*?)p99_(\w+)", str(k))
            if m and isinstance(v, (int, float)) and not isinstance(v, bool):
                for low in (f"{m.group(1)}p50_{m.group(2)}", f"{m.group(1)}median_{m.group(2)}"):
                    lv = obj.get(low)
                    if isinstance(lv, (int, float)) and not isinstance(lv, bool):
                        assert v >= lv * (1 - 1e-9) - 1e-12, f"{path}: {k} {v} < {low} {lv}"
        for k, v in obj.items():
            percentiles_ordered(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            percentiles_ordered(v, f"{path}[]")
