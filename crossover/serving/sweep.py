"""Concurrency and request-rate sweeps of both arms, side by side, and the measured-style crossover."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ..curves import Scenario, crossing_between_levels
from ..errors import CrossoverError
from ..workload import Workload
from .engine import EngineLimits, kv_capacity_tokens
from .metrics import summarize
from .simulator import Arm, arrivals_poisson, simulate

Axis = Literal["concurrency", "request_rate"]


@dataclass
class Level:
    """One load level: the off and on results and their ratio."""

    value: float
    off: dict[str, float]
    on: dict[str, float]
    policy: dict[str, float] | None = None  # the arm that routes by load with the best-k schedule

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
    def crossover(self) -> float | None:
        """First load where the speedup passes through 1, interpolated in log(load) between levels."""
        return crossing_between_levels([lv.value for lv in self.levels], self.ratios)

    @property
    def side(self) -> str | None:
        """When nothing crosses: 'on' (speculation faster at every level) or 'off'."""
        if self.crossover is not None or not self.levels:
            return None
        return "on" if self.ratios[0] > 1 else "off"


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
            f"concurrency {concurrency:g} does not fit: {dep.tp} x {dep.hardware.name} holds KV for about "
            f"{int(cap_off // per_req)} requests of {workload.name} (mean {p + o:.0f} tokens) without "
            f"speculation and {fits_on} with it; use concurrency <= {fits_on}, a larger --tp or a smaller workload")


def run_level(sc: Scenario, workload: Workload, axis: Axis, value: float, *, num_prompts: int, seed: int,
              level_index: int, burstiness: float = 1.0, limits: EngineLimits = EngineLimits(),
              warmup_frac: float = 0.1, base: Path | None = None, arms: tuple[bool, ...] = (False, True),
              schedule: np.ndarray | None = None) -> dict:
    """Both arms (and the scheduled arm, given a schedule) at one level, on the same requests."""
    rng = np.random.default_rng([seed, level_index])
    prompt, output = workload.sample(rng, num_prompts, base)
    arrival = None
    if axis == "request_rate":
        arrival = arrivals_poisson(rng, num_prompts, value, burstiness)
    warm = min(int(warmup_frac * num_prompts), num_prompts - 1)
    stagger = 0.0
    if axis == "concurrency":
        # Clients start spread over one request's expected lifetime, as a long-running benchmark's
        # clients are after their first round: with equal lengths, a common start would lock them
        # into waves of prefill-only and decode-only steps that no steady state has.
        from ..roofline import step_time

        dec = float(step_time(sc.deployment, [value], 1, float(prompt.mean())).total[0])
        stagger = float(output.mean()) * dec
    out = {}
    runs = [("on" if sp else "off", Arm(sc, sp)) for sp in arms]
    if schedule is not None:
        runs.append(("policy", Arm(sc, True, schedule)))
    for i, (name, arm) in enumerate(runs):
        cap = kv_capacity_tokens(sc.deployment, sc if arm.speculate else None)
        arm_rng = np.random.default_rng([seed, level_index, i if name != "off" else 0, int(arm.speculate)])
        log = simulate(arm, prompt, output, arm_rng, concurrency=int(value) if axis == "concurrency" else None,
                       arrival=arrival, limits=limits, kv_capacity=cap, measure_from=warm, stagger_s=stagger)
        out[name] = summarize(log, warm)
    return out


def sweep(sc: Scenario, workload: Workload, axis: Axis, values: list[float], *, num_prompts: int = 1000,
          seed: int = 0, burstiness: float = 1.0, limits: EngineLimits = EngineLimits(), warmup_frac: float = 0.1,
          base: Path | None = None, schedule: np.ndarray | None = None) -> SweepResult:
    """Simulate every level for both arms (speculation off and on), and the scheduled arm if given."""
    if not values:
        raise CrossoverError(f"no {axis.replace('_', ' ')} levels given")
    if num_prompts < 2:
        raise CrossoverError(f"--num-prompts must be >= 2 (got {num_prompts})")
    if axis == "concurrency":
        for v in values:
            if v != int(v) or v < 1:
                raise CrossoverError(f"concurrency must be a positive integer (got {v:g})")
        check_fits(sc, workload, max(values), base)
    res = SweepResult(axis)
    for i, v in enumerate(sorted(values)):
        r = run_level(sc, workload, axis, v, num_prompts=num_prompts, seed=seed, level_index=i,
                      burstiness=burstiness, limits=limits, warmup_frac=warmup_frac, base=base, schedule=schedule)
        res.levels.append(Level(v, r["off"], r["on"], r.get("policy")))
    return res
