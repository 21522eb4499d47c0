"""Demand for capacity planning: a constant peak (requests/s or output tokens/s) or a trace of
requests per interval read from a CSV file (a day or a week of traffic)."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..errors import CrossoverError
from ..files import read_text

TRAFFIC_COLUMNS = ("time", "requests")
NAIVE_ZONE = "UTC"  # the zone of an ISO 8601 time written without one (said in the plan's output)
CONSTANT_INTERVAL_S = 3600.0  # a constant demand is one hour at its rate (any length gives the same costs)


@dataclass(frozen=True)
class Traffic:
    """Requests arriving in equal intervals; a constant demand is one interval."""

    interval_s: float
    requests: np.ndarray  # requests arriving in each interval
    source: str = "constant"
    given: str = ""  # the input it came from, for messages ('--peak-rps 40', 'traffic file day.csv')
    naive_times: str | None = None  # NAIVE_ZONE where the file's ISO 8601 times had no zone and were read in it

    @property
    def rates(self) -> np.ndarray:
        """Requests/s in each interval."""
        return self.requests / self.interval_s

    @property
    def peak_rps(self) -> float:
        """The busiest interval's request rate: the fleet is sized for it."""
        return float(self.rates.max())

    @property
    def mean_rps(self) -> float:
        """Requests/s over the whole trace."""
        return float(self.requests.sum() / self.duration_s)

    @property
    def duration_s(self) -> float:
        """Seconds the trace covers."""
        return self.interval_s * len(self.requests)

    @property
    def what(self) -> str:
        """The demand as the input that gave it, for a message."""
        return self.given or (f"traffic file {self.source}" if self.is_trace else f"a peak of {self.peak_rps:g} req/s")

    @property
    def is_trace(self) -> bool:
        """Whether the demand varies over time (a traffic file)."""
        return self.source != "constant"


def constant(rps: float, given: str = "") -> Traffic:
    """A constant demand of `rps` requests/s (`given`: the input it came from, for messages)."""
    given = given or f"a peak of {rps:g} req/s"
    n = rps * CONSTANT_INTERVAL_S
    if not (math.isfinite(rps) and math.isfinite(n)):
        raise CrossoverError(f"{given}: the demand overflows ({rps:g} req/s x {CONSTANT_INTERVAL_S:g} s is not a "
                             "finite number); give a smaller one")
    if not n > 0:
        raise CrossoverError(f"{given}: the demand underflows to 0 req/s; give a larger one")
    return Traffic(CONSTANT_INTERVAL_S, np.array([n]), given=given)


def _time(value: str, row: int, path: str) -> tuple[float, bool | None]:
    """Seconds and whether the time carried a zone (None: a number of seconds): a number of seconds,
    or an ISO 8601 date-time. One without a zone is read as UTC (NAIVE_ZONE), never in the machine's
    local zone: the same file gives the same demand on every machine, across daylight-saving changes."""
    zoned = None
    try:
        t = float(value)
    except ValueError:
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CrossoverError(f"{path} row {row}: time {value!r} is neither seconds nor an ISO 8601 date-time "
                                 "(e.g. 2026-01-05T14:00)") from None
        zoned = when.utcoffset() is not None
        t = (when if zoned else when.replace(tzinfo=timezone.utc)).timestamp()
    if not math.isfinite(t):
        raise CrossoverError(f"{path} row {row}: time {value!r} is not finite")
    return t, zoned


def read_traffic(path: str | Path) -> Traffic:
    """A CSV with the header `time,requests` (UTF-8; a leading BOM, as Excel writes it, is skipped):
    each row an interval's start (seconds, or ISO 8601: times without a zone are read as UTC, and a
    file never mixes them with zoned ones) and the requests that arrived in it. Intervals are equal
    and contiguous (a gap or a repeated time is an error naming the row), requests finite and >= 0,
    at least two rows."""
    p = Path(path)
    name = str(path)
    text = read_text(p, "a traffic CSV `time,requests`").removeprefix("\ufeff")  # Excel's UTF-8 BOM
    rows = [r for r in csv.reader(text.splitlines()) if any(c.strip() for c in r)]
    if not rows:
        raise CrossoverError(f"traffic file {name} is empty; expected a header `time,requests` and rows")
    header = tuple(c.strip().lower() for c in rows[0])
    if header != TRAFFIC_COLUMNS:
        raise CrossoverError(f"traffic file {name}: columns {','.join(header) or '(none)'}; expected exactly "
                             f"{','.join(TRAFFIC_COLUMNS)} (interval start, requests in the interval)")
    body = rows[1:]
    if len(body) < 2:
        raise CrossoverError(f"traffic file {name}: {len(body)} interval(s); at least two give the interval length")
    times, reqs = [], []
    first: dict[bool, int] = {}  # zoned or not -> the first row of that kind
    for i, r in enumerate(body, start=2):
        if len(r) != 2:
            raise CrossoverError(f"{name} row {i}: {len(r)} fields; expected 2 (time,requests)")
        t, zoned = _time(r[0], i, name)
        if zoned is not None:
            first.setdefault(zoned, i)
            if not zoned and True in first:
                raise CrossoverError(f"{name} row {i}: time {r[0]!r} has no time zone but row {first[True]} has one: "
                                     f"give every time with a zone, or none (read as {NAIVE_ZONE})")
            if zoned and False in first:
                raise CrossoverError(f"{name} row {i}: time {r[0]!r} has a time zone but row {first[False]} has no "
                                     f"time zone: give every time with a zone, or none (read as {NAIVE_ZONE})")
        times.append(t)
        try:
            n = float(r[1])
        except ValueError:
            raise CrossoverError(f"{name} row {i}: requests {r[1]!r} is not a number") from None
        if not math.isfinite(n) or n < 0:
            raise CrossoverError(f"{name} row {i}: requests {r[1]!r}; expected a finite number >= 0")
        reqs.append(n)
    t = np.asarray(times)
    with np.errstate(over="ignore", invalid="ignore"):
        steps = np.diff(t)
    step = float(steps[0])
    if not (math.isfinite(step) and math.isfinite(step * len(t))):
        raise CrossoverError(f"traffic file {name}: the interval ({step:g} s) or the trace's length overflows "
                             "(not a finite number of seconds)")
    if step <= 0:
        raise CrossoverError(f"{name} row 3: time does not increase (intervals must be in order)")
    bad = np.nonzero(~np.isclose(steps, step, rtol=1e-9, atol=1e-6))[0]
    if bad.size:
        i = int(bad[0])
        what = "a gap" if steps[i] > step else "out of order or repeated"
        raise CrossoverError(f"{name} row {i + 3}: {what} ({steps[i]:g} s after the previous row; every interval "
                             f"is {step:g} s): give every interval, 0 where no requests came")
    req = np.asarray(reqs)
    with np.errstate(over="ignore"):
        total, peak = float(req.sum()), float((req / step).max())
    if not (math.isfinite(total) and math.isfinite(peak)):
        what = "the total of its requests" if not math.isfinite(total) else f"requests / the {step:g} s interval"
        raise CrossoverError(f"traffic file {name}: {what} overflows (not a finite number); give smaller counts "
                             "or longer intervals")
    out = Traffic(step, req, source=name, given=f"traffic file {name}", naive_times=NAIVE_ZONE if False in first else None)
    if out.peak_rps <= 0:
        raise CrossoverError(f"traffic file {name}: no requests in any interval; nothing to plan for")
    return out


def demand(*, peak_rps: float | None = None, peak_output_tokens_per_s: float | None = None,
           traffic: str | Path | Traffic | None = None, output_len: float) -> Traffic:
    """Exactly one of a peak request rate, a peak output token rate (divided by the workload's mean
    output length) or a traffic trace."""
    given = [x is not None for x in (peak_rps, peak_output_tokens_per_s, traffic)]
    if sum(given) != 1:
        raise CrossoverError("give the demand once: --peak-rps, --peak-output-tokens-per-s or --traffic FILE")
    if traffic is not None:
        return traffic if isinstance(traffic, Traffic) else read_traffic(traffic)
    value, flag = ((peak_rps, "--peak-rps") if peak_rps is not None
                   else (peak_output_tokens_per_s, "--peak-output-tokens-per-s"))
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise CrossoverError(f"{flag} must be a finite number > 0 (got {value})")
    rps = float(value) if peak_rps is not None else float(value) / output_len
    return constant(rps, f"{flag} {value:g}")
