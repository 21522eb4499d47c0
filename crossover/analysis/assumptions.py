"""What an answer rests on that the user did not give, and where it would flip.

An assumed input (the default acceptance, a workload file's acceptance or n-gram match rate) is listed
with its value and where it came from; for the speedup at the load the answer is about, the value of
that input at which speculation stops paying off (the speedup passes 1.0) and the crossover batch at
each end of the input's plausible range (crossover.defaults). The speedup rises with acceptance and
with the match rate (a property test), so the flip is found by bisection.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..defaults import ACCEPTANCE_RANGE, MATCH_RATE_RANGE
from ..model.acceptance import Acceptance
from ..model.scenario import Scenario
from ..model.step import StepModel
from .curves import evaluate, find_crossings, stops_paying

SOURCES = {"default": "the default (not measured)", "workload": "the workload file's (not measured on your traffic)"}
_TOP = 0.99  # the highest acceptance searched: a rate of 1 never rejects


def _with(sc: Scenario, name: str, value: float) -> Scenario:
    acc = sc.speculation.acceptance
    if name == "acceptance":
        new = Acceptance.rate(value, acc.match_rate)
    else:
        new = replace(acc, match_rate=value)
    return replace(sc, speculation=replace(sc.speculation, acceptance=new))


def _speedup(sc: Scenario, batch: float) -> float:
    model = StepModel.of(sc.deployment, sc.speculation)
    return float(evaluate(sc, np.array([float(batch)]), model).speedup[0])


def flip_point(sc: Scenario, name: str, batch: float, lo: float = 0.0, hi: float = _TOP) -> float | None:
    """The value of `name` (acceptance or match_rate) in [lo, hi] at which the speedup at `batch` is 1.0,
    to 1e-3; None when it stays on one side over the whole interval. The speedup rises with either
    (tests/test_properties.py): regula falsi with the Illinois step (the end that stays has its value
    halved): ~8 curve evaluations in all, ends included, where bisection to the 1e-3 took 14."""
    f_lo, f_hi = _speedup(_with(sc, name, lo), batch) - 1.0, _speedup(_with(sc, name, hi), batch) - 1.0
    if f_lo * f_hi > 0:
        return None
    if f_lo == 0.0 or f_hi == 0.0:
        return round(lo if f_lo == 0.0 else hi, 3)
    x, side = lo, 0
    for _ in range(30):
        x_new = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if abs(x_new - x) < 2e-5 or hi - lo < 2e-5:
            x = x_new
            break
        x = x_new
        f = _speedup(_with(sc, name, x), batch) - 1.0
        if f == 0.0:
            break
        if (f < 0.0) == (f_lo < 0.0):  # the root lies above x
            lo, f_lo = x, f
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = x, f
            if side == 1:
                f_lo *= 0.5
            side = 1
    return round(x, 3)


def _crossover(sc: Scenario, batch_max: float) -> float | None:
    model = StepModel.of(sc.deployment, sc.speculation)
    down = stops_paying(find_crossings(sc, float(batch_max), model))
    return None if down is None else round(float(down), 1)


def assumptions(sc: Scenario, batch: float, batch_max: float | None = None) -> list[dict[str, Any]]:
    """Each assumed input of `sc` with its value, source, plausible range and, for the speedup at
    `batch`: the value where it flips (flips_at, None: not in [0, 0.99]), whether that lies in the range,
    and the crossover batch (up to `batch_max`) at each end of the range."""
    acc = sc.speculation.acceptance
    out = []
    todo = []
    if acc.origin in SOURCES and acc.kind == "rate":
        todo.append(("acceptance", float(acc.value), acc.origin, ACCEPTANCE_RANGE))
    elif acc.origin in SOURCES:  # tau or per-position rates from a workload file: named, not varied
        out.append({"input": "acceptance", "value": acc.value if acc.kind != "per_position" else list(acc.value),
                    "kind": acc.kind, "source": SOURCES[acc.origin], "flips_at": None, "range": None})
    if sc.speculation.method == "ngram" and acc.match_origin in SOURCES:
        todo.append(("match_rate", float(acc.match_rate), acc.match_origin, MATCH_RATE_RANGE))
    for name, value in sc.defaults_used:  # the other inputs taken from crossover.defaults: named, not varied
        out.append({"input": name, "value": value, "source": SOURCES["default"], "flips_at": None, "range": None})
    for name, value, origin, rng in todo:
        flip = flip_point(sc, name, batch, 0.0, _TOP if name == "acceptance" else 1.0)
        entry = {"input": name, "value": value, "source": SOURCES[origin], "at_batch": float(batch),
                 "speedup_at_batch": round(_speedup(sc, batch), 4), "flips_at": flip, "range": list(rng),
                 "flips_in_range": flip is not None and rng[0] <= flip <= rng[1]}
        if batch_max is not None:
            entry["crossover_over_range"] = [_crossover(_with(sc, name, v), batch_max) for v in rng]
            entry["batch_max"] = float(batch_max)
        out.append(entry)
    return out
