"""Concurrency and request-rate sweeps of both arms, side by side, and the measured-style crossover."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from ..defaults import DEFAULT_BURSTINESS, DEFAULT_NUM_PROMPTS, DEFAULT_SEED
from ..analysis.crossings import level_crossings
from ..model.scenario import Scenario
from ..errors import CrossoverError
from ..model.step import step_time
from ..specs.workload import Workload
from .engine import EngineLimits, kv_capacity_tokens
from .metrics import steady_request_rate, summarize
from .simulator import Arm, arrivals_poisson, simulate

Axis = Literal["concurrency", "request_rate"]


@dataclass
class Level:
    """One load level: the off and on results and their ratio."""

    value: float
    off: dict[str, float]
    on: dict[str, float]
    policy: dict[str, float] | None = None  # the arm that routes by load (best-k schedule or hysteresis)

    def ratio(self, axis: Axis) -> float:
        """Speedup at this level: output throughput on/off (concurrency), mean e2e latency off/on (rate).

        At a fixed request rate below saturation both arms deliver the same throughput, so the
        gain shows in latency (the vLLM spec-decode blog's convention); past saturation the
        slower arm's queue grows and its latency explodes.
        """
        if axis == "concurrency":
            return self.on["output_throughput"] / self.off["output_throughput"]
        return self.off["mean_e2el_ms"] / self.on["mean_e2el_ms"]


@dataclass
class SweepResult:
    """Levels, the interpolated crossover (or the side the sweep stayed on)."""

    axis: Axis
    levels: list[Level] = field(default_factory=list)

    @property
    def ratios(self) -> np.ndarray:
        """Speedup per level."""
        return np.array([lv.ratio(self.axis) for lv in self.levels])

    @property
    def level_crossings(self):
        """Every sign change of the speedup - 1 between levels, the first sustained one, or the side."""
        return level_crossings([lv.value for lv in self.levels], self.ratios)

    @property
    def load_fit(self) -> dict | None:
        """Kong et al.'s L(QPS) = C1 / (1 - QPS C2) fitted to each arm's mean end-to-end latency over its
        levels below saturation (analysis/load_fit.py) and the break-even rate the two imply: a
        request-rate sweep with two such levels or more per arm; None otherwise."""
        from ..analysis.load_fit import break_even, fit_load

        if self.axis != "request_rate":
            return None
        fits = {}
        for arm in ("off", "on"):
            rows = [(lv.value, getattr(lv, arm)) for lv in self.levels if not getattr(lv, arm).get("saturated")]
            fits[arm] = fit_load([q for q, _ in rows], [m.get("mean_e2el_ms", np.nan) / 1e3 for _, m in rows])
        if fits["off"] is None or fits["on"] is None:
            return None
        return {"off": fits["off"].to_dict(), "on": fits["on"].to_dict(), **break_even(fits["off"], fits["on"])}

    @property
    def crossover_interval(self) -> tuple[float, float | None] | None:
        """Where the crossover lies given each level's 95% throughput intervals (concurrency sweeps):
        from the crossing of the pessimistic ratio (on low / off high; the first level when it is
        below 1 there already) to that of the optimistic one (None: beyond the last level)."""
        if self.axis != "concurrency" or self.crossover is None:
            return None
        loads = [lv.value for lv in self.levels]
        try:
            low = [lv.on["output_throughput_ci_low"] / lv.off["output_throughput_ci_high"] for lv in self.levels]
            high = [lv.on["output_throughput_ci_high"] / max(lv.off["output_throughput_ci_low"], 1e-12)
                    for lv in self.levels]
        except (KeyError, ZeroDivisionError):
            return None
        a, b = level_crossings(loads, low, rtol=0.0).crossover, level_crossings(loads, high, rtol=0.0).crossover
        lo = min(a, self.crossover) if a is not None else loads[0]
        hi = max(b, self.crossover) if b is not None else None
        return lo, hi

    @property
    def crossover(self) -> float | None:
        """First sustained load where the speedup passes through 1, interpolated in log(load) between levels."""
        return self.level_crossings.crossover

    @property
    def side(self) -> str | None:
        """When nothing crosses: 'on' (speculation faster at every level), 'off', or 'equal' (within noise)."""
        if not self.levels:
            return None
        return self.level_crossings.side


def check_fits(sc: Scenario, workload: Workload, concurrency: float, base: Path | None = None) -> None:
    """Fail with what fits when `concurrency` requests of the workload cannot share the KV cache."""
    p, o = workload.means(base=base)
    per_req = p + o + sc.speculation.k + 1
    cap_off = kv_capacity_tokens(sc.deployment)
    cap_on = kv_capacity_tokens(sc.deployment, sc)
    fits_on = int(cap_on // per_req)
    if concurrency > fits_on:
        dep = sc.deployment
        raise CrossoverError(
            f"concurrency {concurrency:g} does not fit: {dep.gpus} x {dep.hardware.name} holds KV for about "
            f"{int(cap_off // per_req)} requests of {workload.name} (mean {p + o:.0f} tokens) without "
            f"speculation and {fits_on} with it; use concurrency <= {fits_on}, a larger --tp or a smaller workload")


# Sizes: a concurrency level measures at least this many rounds of its clients after the warm-up;
# a sweep holds at most MAX_LEVELS levels of at most MAX_PROMPTS requests (minutes each at the top).
STEADY_COMPLETIONS = 10
MAX_LEVELS = 64
MAX_PROMPTS = 200_000
MAX_SIMULATED_S = 1e9  # a run's clock beyond this (float seconds) loses its milliseconds

AXIS_CODE = {"concurrency": 0, "request_rate": 1}
ARM_CODE = {"off": 0, "on": 1, "policy": 2}
CAPACITY_CODE = 2  # the closed-loop run at the engine's limit that sizes an open-loop level's capacity


def level_entropy(seed: int, axis: Axis, value: float) -> list[int]:
    """The seed of one level's random streams: (seed, axis, the level's value as its 64 IEEE bits), so a
    level draws the same requests whatever other levels the sweep holds and in whatever order."""
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise CrossoverError(f"--seed must be a whole number >= 0 (got {seed})")
    bits = int.from_bytes(struct.pack("<d", float(value)), "little")
    return [int(seed), AXIS_CODE[axis], bits]


def _stagger(sc: Scenario, concurrency: float, prompt: np.ndarray, output: np.ndarray) -> float:
    """Closed-loop clients start spread over one request's expected lifetime, as a long-running
    benchmark's clients are after their first round: with equal lengths, a common start would lock
    them into waves of prefill-only and decode-only steps that no steady state has."""
    dec = float(step_time(sc.deployment, [concurrency], 1, float(prompt.mean())).total[0])
    return float(output.mean()) * dec


def _runs(sc: Scenario, arms: tuple[bool, ...], schedule: np.ndarray | tuple[int, int] | None) -> list[tuple[str, Arm]]:
    """The fixed arms, and the routed one: a best-k schedule (k per running batch) or a
    (low, high) hysteresis band on the running batch."""
    runs = [("on" if sp else "off", Arm(sc, sp)) for sp in arms]
    if isinstance(schedule, tuple):
        runs.append(("policy", Arm(sc, True, hysteresis=(int(schedule[0]), int(schedule[1])))))
    elif schedule is not None:
        runs.append(("policy", Arm(sc, True, schedule)))
    return runs


def capacity(sc: Scenario, workload: Workload, *, num_prompts: int, seed: int, limits: EngineLimits | None = None,
             warmup_frac: float = 0.1, base: Path | None = None, arms: tuple[bool, ...] = (False, True),
             schedule: np.ndarray | tuple[int, int] | None = None) -> dict[str, float]:
    """Per arm, the requests/s the server completes with its running batch at the engine's limit
    (max_num_seqs clients closed-loop, KV permitting): an offered rate above it saturates that arm."""
    limits = EngineLimits.of(sc.deployment) if limits is None else limits  # the engine's defaults on this GPU
    # four rounds of the batch the engine can run: its seats, or fewer where the KV cache holds fewer
    # requests at their full length (the other clients wait in its queue)
    running = min(limits.max_num_seqs, max(int(kv_capacity_tokens(sc.deployment) // max(sc.held_tokens, 1.0)), 1))
    n = max(num_prompts, 4 * running)
    entropy = [int(seed), CAPACITY_CODE, limits.max_num_seqs, limits.max_num_batched_tokens]
    prompt, output = workload.sample(np.random.default_rng(entropy), n, base)
    warm = min(int(warmup_frac * n), n - 1)
    conc = limits.max_num_seqs
    stagger = _stagger(sc, conc, prompt, output)
    out = {}
    for name, arm in _runs(sc, arms, schedule):
        cap = kv_capacity_tokens(sc.deployment, sc if arm.speculate else None)
        log = simulate(arm, prompt, output, np.random.default_rng(entropy + [ARM_CODE[name]]), concurrency=conc,
                       limits=limits, kv_capacity=cap, measure_from=warm, stagger_s=stagger)
        out[name] = steady_request_rate(log, warm)
    return out


def run_level(sc: Scenario, workload: Workload, axis: Axis, value: float, *, num_prompts: int, seed: int,
              burstiness: float = DEFAULT_BURSTINESS, limits: EngineLimits | None = None,
              warmup_frac: float = 0.1, base: Path | None = None, arms: tuple[bool, ...] = (False, True),
              schedule: np.ndarray | tuple[int, int] | None = None, capacities: dict[str, float] | None = None) -> dict:
    """Both arms (and the scheduled arm, given a schedule) at one level, on the same requests.

    The requests (lengths, arrivals) come from (seed, axis, value) and each arm's acceptance draws
    from that and the arm, so a level is the same alone or inside any sweep. An open-loop level is marked `saturated` per arm against
    `capacities` (computed here when not given; see `capacity`).
    """
    limits = EngineLimits.of(sc.deployment) if limits is None else limits  # the engine's defaults on this GPU
    entropy = level_entropy(seed, axis, value)
    rng = np.random.default_rng(entropy)
    prompt, output = workload.sample(rng, num_prompts, base)
    arrival = None
    if axis == "request_rate":
        arrival = arrivals_poisson(rng, num_prompts, value, burstiness)
        if capacities is None:
            capacities = capacity(sc, workload, num_prompts=num_prompts, seed=seed, limits=limits,
                                  warmup_frac=warmup_frac, base=base, arms=arms, schedule=schedule)
    warm = min(int(warmup_frac * num_prompts), num_prompts - 1)
    stagger = _stagger(sc, value, prompt, output) if axis == "concurrency" else 0.0
    out = {}
    for name, arm in _runs(sc, arms, schedule):
        cap = kv_capacity_tokens(sc.deployment, sc if arm.speculate else None)
        arm_rng = np.random.default_rng(entropy + [ARM_CODE[name]])
        log = simulate(arm, prompt, output, arm_rng, concurrency=int(value) if axis == "concurrency" else None,
                       arrival=arrival, limits=limits, kv_capacity=cap, measure_from=warm, stagger_s=stagger)
        if axis == "request_rate":
            out[name] = summarize(log, warm, offered_rate=value, capacity=capacities[name])  # type: ignore[index]
        else:
            out[name] = summarize(log, warm)
    return out


def level_prompts(axis: Axis, value: float, num_prompts: int, warmup_frac: float) -> int:
    """Requests simulated at a level: at least `num_prompts`, and for a concurrency level enough that
    STEADY_COMPLETIONS x concurrency of them complete after the warm-up (a steady state to measure)."""
    if axis != "concurrency":
        return num_prompts
    return max(num_prompts, int(np.ceil(STEADY_COMPLETIONS * value / (1.0 - warmup_frac))))


def sweep(sc: Scenario, workload: Workload, axis: Axis, values: list[float], *,
          num_prompts: int = DEFAULT_NUM_PROMPTS, seed: int = DEFAULT_SEED, burstiness: float = DEFAULT_BURSTINESS, limits: EngineLimits | None = None, warmup_frac: float = 0.1,
          base: Path | None = None, schedule: np.ndarray | tuple[int, int] | None = None,
          progress: Callable[[int, int, float], None] | None = None) -> SweepResult:
    """Simulate every level for both arms (speculation off and on), and the routed arm if given a
    `schedule` (k per running batch) or a (low, high) hysteresis band;
    `progress(levels done, levels, load)` is called after each level."""
    limits = EngineLimits.of(sc.deployment) if limits is None else limits  # the engine's defaults on this GPU
    if not values:
        raise CrossoverError(f"no {axis.replace('_', ' ')} levels given")
    if len(values) > MAX_LEVELS:
        raise CrossoverError(f"{len(values)} {axis.replace('_', ' ')} levels: at most {MAX_LEVELS} per sweep")
    if num_prompts < 2:
        raise CrossoverError(f"--num-prompts must be >= 2 (got {num_prompts})")
    if num_prompts > MAX_PROMPTS:
        raise CrossoverError(f"--num-prompts {num_prompts} exceeds {MAX_PROMPTS} requests per level; a steady "
                             f"state needs about 10 x the concurrency, which the sweep adds by itself")
    if axis == "request_rate":
        for v in values:
            if not (np.isfinite(v) and v > 0):
                raise CrossoverError(f"request rate must be a finite number > 0 (got {v:g})")
            if num_prompts / v > MAX_SIMULATED_S:  # the clock in seconds would round millisecond steps away
                raise CrossoverError(
                    f"request rate {v:g} req/s: {num_prompts} requests would arrive over {num_prompts / v:.3g} s, "
                    f"beyond the {MAX_SIMULATED_S:g} s (~30 years) a simulation keeps step times exact in; "
                    f"give a rate >= {num_prompts / MAX_SIMULATED_S:.3g} req/s")
    if axis == "concurrency":
        for v in values:
            if v != int(v) or v < 1:
                raise CrossoverError(f"concurrency must be a positive integer (got {v:g})")
        check_fits(sc, workload, max(values), base)
    level_entropy(seed, axis, values[0])  # a bad seed fails before any level runs
    caps = None
    if axis == "request_rate":
        caps = capacity(sc, workload, num_prompts=num_prompts, seed=seed, limits=limits, warmup_frac=warmup_frac,
                        base=base, schedule=schedule)
    res = SweepResult(axis)
    for i, v in enumerate(sorted(values)):
        r = run_level(sc, workload, axis, v, num_prompts=level_prompts(axis, v, num_prompts, warmup_frac), seed=seed,
                      burstiness=burstiness, limits=limits, warmup_frac=warmup_frac, base=base, schedule=schedule,
                      capacities=caps)
        res.levels.append(Level(v, r["off"], r["on"], r.get("policy")))
        if progress is not None:
            progress(i + 1, len(values), v)
    return res
