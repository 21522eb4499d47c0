"""The two-server sweep the model plans (issue 24): where the crossover probably lies, which load
levels to measure (sparse where the model is sure, dense across the crossover interval, up to the
memory limit or the user's peak) and how many requests each level needs for its on/off throughput
ratio's 95% interval to reach a target half-width in the serving simulator. The commands that run
it are planning/sweep_commands.py's.

The interval comes from the closed form at the ends of the acceptance's plausible range (an assumed
acceptance: crossover.defaults.ACCEPTANCE_RANGE; a given one: +- SWEEP_PLAN_ACCEPTANCE_SPREAD), or
from the caller (a calibration's bootstrap interval, a measured sweep's bracketing levels). On the
request-rate axis a batch maps to the rate that keeps it running: the off arm's closed-form
throughput at that batch over the output length (requests/s), the crossover where both arms'
throughputs meet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..analysis.assumptions import SOURCES
from ..analysis.crossings import level_crossings
from ..analysis.curves import evaluate, find_crossings
from ..defaults import ACCEPTANCE_RANGE, DEFAULT_BURSTINESS, SWEEP_PLAN_ACCEPTANCE_SPREAD
from ..errors import InputError
from ..model.acceptance import Acceptance
from ..model.scenario import Scenario
from ..model.step import StepModel
from ..serving.engine import EngineLimits, kv_capacity_tokens
from ..serving.metrics import BATCHES, T95
from ..serving.simulator import Arm, arrivals_poisson, simulate
from ..serving.sweep import ARM_CODE, MAX_LEVELS, MAX_PROMPTS, capacity, level_entropy, level_prompts, run_level
from ..specs.workload import Workload

WARMUP_SHARE = 0.1  # the simulator's warm-up (serving.sweep's warmup_frac): the first 10% of a level's requests
INSIDE_SHARE = 0.6  # of the levels, placed inside the crossover interval (at least half)
_GROWTH = 1.1  # a level short of its target grows by (half-width / target)^2 x this, 1.25x to _GROWTH_MAX
_GROWTH_MAX = 3.0  # the interval's own estimate is noisy (10 batch means): no round grows a level more
_TRIES = 12  # sizing rounds per level


@dataclass(frozen=True)
class Interval:
    """Where the crossover probably lies, on the plan's load axis: [low, high] and the central
    estimate (None: the model expects none in the range); `source` says what it came from."""

    low: float
    high: float
    crossover: float | None
    source: str

    def holds(self, load: float) -> bool:
        return self.low - 1e-9 <= load <= self.high + 1e-9


def fixed_lengths(prompt_len: int, output_len: int) -> Workload:
    """The workload the commands send: every request `prompt_len` in, `output_len` out (vllm bench
    serve's random dataset with --random-range-ratio 0 and --ignore-eos)."""
    return Workload(name=f"random-{prompt_len}-{output_len}", display_name=f"random {prompt_len} in / {output_len} out",
                    prompt_len={"dist": "fixed", "value": int(prompt_len)},
                    output_len={"dist": "fixed", "value": int(output_len)})


def fits(sc: Scenario, prompt_len: float, output_len: float) -> int:
    """Concurrent requests both arms' KV caches hold (serving.sweep.check_fits's count)."""
    return int(kv_capacity_tokens(sc.deployment, sc) // (prompt_len + output_len + sc.speculation.k + 1))


def crossover_batch(sc: Scenario, top: float) -> float:
    """The first batch in [1, top] where speculation stops paying off in the closed form: 1 when it
    is slower already at batch 1, `top` when it pays up to there."""
    model = StepModel.of(sc.deployment, sc.speculation)
    down = [c.batch for c in find_crossings(sc, float(top), model) if c.direction == "down"]
    if down:
        return float(down[0])
    return 1.0 if float(evaluate(sc, np.array([1.0]), model).speedup[0]) < 1.0 else float(top)


def _with_rate(sc: Scenario, alpha: float) -> Scenario:
    acc = sc.speculation.acceptance
    return replace(sc, speculation=replace(sc.speculation, acceptance=Acceptance.rate(alpha, acc.match_rate)))


def model_interval(sc: Scenario, top: float) -> Interval | None:
    """The crossover batch at the two ends of the acceptance's plausible range and at its value
    (None: no crossover inside [1, top] at either end: the model is sure of the side)."""
    acc = sc.speculation.acceptance
    k = max(sc.speculation.k, 1)
    alpha = float(acc.value) if acc.kind == "rate" else float(acc.as_rate(k).value)
    if acc.origin in SOURCES and acc.kind == "rate":
        ends = ACCEPTANCE_RANGE
        source = (f"the closed form at acceptance {ends[0]:g}-{ends[1]:g}, the plausible range of the assumed "
                  f"{alpha:g}")
    else:
        ends = (max(alpha - SWEEP_PLAN_ACCEPTANCE_SPREAD, 0.0), min(alpha + SWEEP_PLAN_ACCEPTANCE_SPREAD, 0.99))
        source = f"the closed form at acceptance {alpha:.3g} +- {SWEEP_PLAN_ACCEPTANCE_SPREAD:g}"
    central = crossover_batch(sc, top)
    at = [crossover_batch(_with_rate(sc, a), top) for a in ends] + [central]
    low, high = min(at), max(at)
    if high <= 1.0 or low >= top:
        return None
    inside = central if 1.0 < central < top else None
    return Interval(low, high, inside, source)


def rate_of_batch(sc: Scenario, batches, output_len: float) -> np.ndarray:
    """The request rate that keeps `batches` running without speculation: its closed-form output
    throughput over the output length (requests/s)."""
    b = np.maximum(np.asarray(batches, float), 1.0)
    return evaluate(sc, b).tokens_per_s_off / float(output_len)


def batch_interval_as_rates(sc: Scenario, interval: Interval | None, output_len: float) -> Interval | None:
    """A crossover interval in batches as the request rates that keep those batches running."""
    if interval is None:
        return None
    at = [interval.low, interval.high] + ([interval.crossover] if interval.crossover is not None else [])
    r = rate_of_batch(sc, at, output_len).tolist()
    return Interval(r[0], r[1], r[2] if len(r) > 2 else None,
                    interval.source + "; batches as the request rates that keep them running without speculation")


def _nice(x: float, integer: bool) -> float:
    if integer:
        return float(max(1, int(round(x))))
    return float(f"{x:.3g}")


def _geometric(a: float, b: float, n: int) -> list[float]:
    if n <= 0:
        return []
    if n == 1 or b <= a:
        return [a]
    return [a * (b / a) ** (i / (n - 1)) for i in range(n)]


def place_levels(interval: Interval | None, floor: float, top: float, n: int, integer: bool) -> list[float]:
    """`n` levels on [floor, top]: with an interval, INSIDE_SHARE of them geometric across it (both
    ends included), the rest sparse below (powers of two for concurrency) and above it (ending at
    `top`); without one, geometric over the whole range. Never fewer inside than outside."""
    if not 1 <= n <= MAX_LEVELS:
        raise InputError(f"--levels must be a whole number in 1..{MAX_LEVELS} (got {n})", parameter="levels")
    if interval is None:
        return sorted({_nice(x, integer) for x in _geometric(floor, top, n)})
    lo, hi = max(interval.low, floor), min(interval.high, top)
    if integer:
        lo, hi = (math.ceil(lo), math.floor(hi)) if math.ceil(lo) <= math.floor(hi) else (round(lo), round(lo))
    below, above = math.log(lo / floor) if lo > floor else 0.0, math.log(top / hi) if top > hi else 0.0
    n_out = 0 if below + above == 0 else min(n - math.ceil(INSIDE_SHARE * n), n // 2)
    if below and above and n_out >= 2:  # both sides, by their widths in log(load)
        n_below = min(max(1, round(n_out * below / (below + above))), n_out - 1)
    else:
        n_below = n_out if below else 0
    n_above = n_out - n_below
    inside = sorted({_nice(x, integer) for x in _geometric(lo, hi, n - n_out)})
    low_side = [floor * (lo / floor) ** (i / n_below) for i in range(n_below)]
    if integer:  # the powers of two the seed's sweep measures (1, 2, 4, ...), spread below the interval
        powers = [2.0 ** i for i in range(int(math.log2(lo)) + 1) if 2.0 ** i < lo]
        low_side = [powers[round(i * (len(powers) - 1) / max(n_below - 1, 1))] for i in range(n_below)] if powers else []
    high_side = [hi * (top / hi) ** (i / n_above) for i in range(1, n_above + 1)]
    outside = sorted({_nice(x, integer) for x in low_side + high_side} - set(inside))
    while len(outside) > len(inside):  # keep the lowest level and the top, drop from the middle
        outside.pop(len(outside) // 2)
    return sorted(set(inside) | set(outside))


def throughput_interval(level: dict[str, dict[str, float]]) -> tuple[float, float, float]:
    """(ratio, low, high) of one simulated level's on/off output throughput, its 95% interval from
    each arm's (the pessimistic and the optimistic quotient, as SweepResult.crossover_interval)."""
    on, off = level["on"], level["off"]
    ratio = on["output_throughput"] / off["output_throughput"]
    low = on["output_throughput_ci_low"] / off["output_throughput_ci_high"]
    high = on["output_throughput_ci_high"] / max(off["output_throughput_ci_low"], 1e-12)
    return ratio, low, high


def _batch_means(x: np.ndarray) -> tuple[float, float]:
    """(mean, relative 95% half-width) of a series by BATCHES consecutive batch means (metrics.py's rule)."""
    per = np.array([b.mean() for b in np.array_split(x, BATCHES)])
    mean = float(x.mean())
    return mean, (T95[BATCHES - 1] * float(per.std(ddof=1)) / np.sqrt(BATCHES) / mean if mean > 0 else 0.0)


def rate_level(sc: Scenario, wl: Workload, value: float, n: int, how: "Sizing") -> tuple[float, float, float]:
    """(ratio, low, high) of mean e2e latency off/on at one request rate, the rate level `crossover
    simulate` runs (serving.sweep.run_level's draws: its requests, arrivals and each arm's acceptance
    from the level's seed), each arm's 95% interval by batch means over its measured requests in order
    of arrival (the simulator reports an interval of throughput only, which at a fixed rate is the
    arrivals' noise, not the speedup's)."""
    entropy = level_entropy(how.seed, "request_rate", value)
    rng = np.random.default_rng(entropy)
    prompt, output = wl.sample(rng, n)
    arrival = arrivals_poisson(rng, n, value, DEFAULT_BURSTINESS)
    warm = min(int(WARMUP_SHARE * n), n - 1)
    stats = {}
    for name, speculate in (("off", False), ("on", True)):
        cap = kv_capacity_tokens(sc.deployment, sc if speculate else None)
        log = simulate(Arm(sc, speculate), prompt, output, np.random.default_rng(entropy + [ARM_CODE[name]]),
                       arrival=arrival, limits=how.limits, kv_capacity=cap, measure_from=warm)
        stats[name] = _batch_means((log.finish - log.arrival)[warm:])
    (off, r_off), (on, r_on) = stats["off"], stats["on"]
    return off / on, off * (1 - r_off) / (on * (1 + r_on)), off * (1 + r_off) / max(on * (1 - r_on), 1e-12)


@dataclass(frozen=True)
class Sizing:
    """How the levels are sized: the target half-width, the request bounds, the seed and limits."""

    half_width: float
    min_requests: int
    max_requests: int
    seed: int
    limits: EngineLimits


def size_level(sc: Scenario, wl: Workload, axis: str, value: float, how: Sizing,
               capacities: dict[str, float] | None = None) -> dict[str, Any]:
    """The requests (first WARMUP_SHARE of them warm-up) at which the simulated level first reaches the
    target half-width of its on/off ratio (throughput on concurrency, mean e2e latency off/on on
    request rates), grown from the level's minimum (10 rounds of its clients at least) by the square of
    the shortfall, 1.25x to _GROWTH_MAX a round (the interval's own estimate is noisy: not the least
    count that would do, the first found); the level as simulated with them (seeded by the level's value: `crossover
    simulate` at these requests and seed reproduces it). A rate above an arm's capacity is not grown:
    its queue, and so its ratio, grows with the run's length."""
    n = level_prompts(axis, value, how.min_requests, WARMUP_SHARE)
    cap = min(max(how.max_requests, n), MAX_PROMPTS)
    saturated = {arm: bool(capacities and value > capacities[arm]) for arm in ("off", "on")}
    for _ in range(_TRIES):
        if axis == "concurrency":
            res = run_level(sc, wl, axis, value, num_prompts=n, seed=how.seed, limits=how.limits,
                            warmup_frac=WARMUP_SHARE)
            ratio, low, high = throughput_interval(res)
        else:
            ratio, low, high = rate_level(sc, wl, value, n, how)
        half = (high - low) / 2.0
        if half <= how.half_width or n >= cap or any(saturated.values()):
            break
        n = min(cap, int(math.ceil(n * min(max(_GROWTH * (half / how.half_width) ** 2, 1.25), _GROWTH_MAX))))
    warm = min(int(WARMUP_SHARE * n), n - 1)
    out = {"load": value, "requests": n, "warmup": warm, "measured_requests": n - warm, "ratio": ratio,
           "ratio_low": low, "ratio_high": high, "half_width": half, "target_met": half <= how.half_width}
    if axis == "concurrency":
        out.update(off_tokens_per_s=res["off"]["output_throughput"], on_tokens_per_s=res["on"]["output_throughput"])
    else:
        out["saturated"] = saturated
    return out


def rate_capacities(sc: Scenario, wl: Workload, how: Sizing) -> dict[str, float]:
    """Each arm's simulated capacity (requests/s with its running batch at the engine's limit): a
    rate above it saturates that arm (serving.sweep.capacity)."""
    return capacity(sc, wl, num_prompts=how.min_requests, seed=how.seed, limits=how.limits, warmup_frac=WARMUP_SHARE)


def size_levels(sc: Scenario, wl: Workload, axis: str, values: list[float], how: Sizing,
                capacities: dict[str, float] | None = None,
                progress: Callable[[int, int, float], None] | None = None) -> list[dict[str, Any]]:
    """Every level sized (size_level), in order of load; request rates against `capacities`."""
    out = []
    for i, v in enumerate(values):
        out.append(size_level(sc, wl, axis, v, how, capacities))
        if progress is not None:
            progress(i + 1, len(values), v)
    return out


def simulated_crossover(axis: str, levels: list[dict[str, Any]]) -> float | None:
    """Where the planned levels' simulated ratio crosses 1 (throughput on concurrency, mean e2e
    latency off/on on request rates, as `crossover simulate` reads them)."""
    return level_crossings([lv["load"] for lv in levels], [lv["ratio"] for lv in levels]).crossover
