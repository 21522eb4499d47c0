"""What a fit to a measured sweep prices: the free parameters with their bounds, a measured level
(`Observation`), the scenario with fitted values substituted, the prediction at the measured levels
with each level's own acceptance length, the residuals, the first crossing of the fitted curves,
and the engine's baseline fitted to the off arm alone (`fit_off_arm`, for `measured`'s diagnosis:
numpy only, no scipy). `calibration` (the fit) and `calibration_bootstrap` (its interval) are built
on these.

Sign convention, the same in every verb's output: ln(measured / predicted). Positive: the
measurement is above the model (more tokens/s, or a longer TPOT).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..model.acceptance import Acceptance, rate_from_tau
from ..model.scenario import Scenario
from .curves import evaluate

# name -> (Efficiency field or "acceptance", lower bound, upper bound). The bounds are physical
# limits or the edge of what an engine that works at all reaches; a fit that runs into one says the
# model misses something in the sweep (wrong TP, dtype or model, prefix caching), so a parameter at
# a bound is held there (the most physics allows) and reported as a limit, not as a measurement.
PARAMETERS: dict[str, tuple[str, float, float]] = {
    # Achieved fraction of peak HBM bandwidth. At most 1: the vendor peak is the physical limit (the
    # speed-of-light bound of the physics check). At least 0.2: decode kernels reach 0.69-0.84 of peak
    # for weights and ~0.42 for paged KV reads (gpt-fast README; Nsight on an H100 70B decode,
    # mikamirai.com/blog/gpu-memory-bandwidth); half the lowest of those is no longer a bandwidth.
    "bandwidth_fraction": ("bandwidth_fraction", 0.2, 1.0),
    # Achieved fraction of peak dense FLOP/s. At most 1: the peak. At least 0.1: the best-shape
    # matmul reaches 0.73-0.80 on NVIDIA and 0.51-0.63 on AMD parts (stas00/ml-engineering,
    # compute/accelerator/README.md, Maximum Achievable Matmul FLOPS); small decode GEMMs lose up to
    # a few-fold more, below 0.1 the step is not compute-bound at all.
    "flops_fraction": ("flops_fraction", 0.1, 1.0),
    # Per engine step, ms. At least 0: no negative time. At most 100: modern engines expose ~0.5-2 ms
    # per step (github.com/xLLM-AI/xllm/pull/713, github.com/NVIDIA/TensorRT-LLM/issues/13957; the
    # sources of Efficiency.step_overhead_s); 100 ms is a whole decode step of a 70B model at TP 1,
    # more is a stall (preemption, prefill interference), not a per-step cost.
    "step_overhead_ms": ("step_overhead_s", 0.0, 100.0),
    # Host time per verifying sequence of a speculative step, us (Efficiency.spec_overhead_per_seq_s:
    # the bookkeeping and the attention outside the full CUDA graph that grow with the batch, which is
    # what turns a speculative arm's speedup down with load beyond the kernels; vLLM's profile charges
    # none apart, a PIECEWISE step ~40 us per sequence, engines/vllm.yaml). At least 0: no negative time.
    # At most 500: 200 sequences would then add 100 ms to a step, the step bound above.
    "spec_per_seq_us": ("spec_overhead_per_seq_s", 0.0, 500.0),
    # Per sequential draft forward, ms. At least 0. At most 50: half the step bound, as a draft
    # forward is a smaller model's step (default 0.1 ms, Efficiency.draft_step_overhead_s).
    "draft_step_overhead_ms": ("draft_step_overhead_s", 0.0, 50.0),
    # Per-token acceptance rate, a probability. At least 0: no draft token accepted. Below 1: a rate
    # of 1 never rejects (tau = k + 1 at every load; Acceptance.rate refuses it); 0.99 keeps the
    # closed forms finite.
    "acceptance": ("acceptance", 0.0, 0.99),
}
# When a sweep has fewer levels than free parameters, they wait at their defaults in this order
# (the first waits first; one comes back when a fitted one is held at a bound or unidentified): the
# draft overhead is seen only through the on arm's small difference, the per-sequence host time only
# where the on arm falls behind with load, the FLOP/s fraction only where the step turns compute-bound.
DROP_ORDER = ("draft_step_overhead_ms", "spec_per_seq_us", "flops_fraction", "step_overhead_ms",
              "bandwidth_fraction", "acceptance")
SCALE = {"step_overhead_ms": 1e-3, "draft_step_overhead_ms": 1e-3, "spec_per_seq_us": 1e-6}  # to seconds
# A fit reproduces its sweep when every residual is within this (|ln(measured / predicted)| <= 0.1,
# ~10%): twice the run-to-run spread of a serving benchmark's throughput; beyond it at some level,
# the model with any parameter values inside the bounds misses what the sweep measured there.
RESIDUAL_LIMIT = 0.1


@dataclass
class Observation:
    """One measured level: the load, both arms' output tokens/s, (optional) mean TPOT in ms, and
    the acceptance length (tau) the on-arm file reports at this level (None: the scenario's).

    For a request-rate sweep the load of each arm is its requests in flight (Little's law: rate x
    mean end-to-end latency), which differs between the arms (`load_on`), and throughput only
    echoes the offered rate (`use_throughput` False): the fit then rests on TPOT.
    """

    load: float
    tput_off: float
    tput_on: float
    tpot_off: float | None = None
    tpot_on: float | None = None
    label: str = ""
    load_on: float | None = None
    use_throughput: bool = True
    tau_on: float | None = None

    @property
    def on_load(self) -> float:
        """Requests in flight with speculation on."""
        return self.load if self.load_on is None else self.load_on


def apply(sc: Scenario, names: Sequence[str], values) -> Scenario:
    """The scenario with fitted values substituted."""
    eff_changes: dict[str, float] = {}
    spec = sc.speculation
    for n, v in zip(names, values):
        target = PARAMETERS[n][0]
        if target == "acceptance":
            spec = replace(spec, acceptance=Acceptance.rate(float(v), spec.acceptance.match_rate))
        else:
            eff_changes[target] = float(v) * SCALE.get(n, 1.0)
    dep = sc.deployment.with_efficiency(**eff_changes) if eff_changes else sc.deployment
    return Scenario(dep, spec, sc.context, sc.prompt_len, sc.output_len)


def initial(sc: Scenario, name: str) -> float:
    """The scenario's value of a parameter: the documented default unless the caller set it."""
    dep = sc.deployment
    if name == "bandwidth_fraction":
        return dep.bandwidth / dep.hardware.bandwidth_bytes_s
    if name == "flops_fraction":
        return dep.flops / dep.hardware.peak_flops(dep.compute_dtype)
    if name == "acceptance":
        return sc.speculation.acceptance.alpha(sc.speculation.k)
    return getattr(dep, PARAMETERS[name][0]) / SCALE[name]  # the override, else the engine profile's


def per_level_tau(sc: Scenario) -> bool:
    """Whether a level's own tau can replace the scenario's: a chain (a tree's tau is its own shape's)."""
    return sc.speculation.tree is None and sc.speculation.acceptance.kind in ("tau", "rate")


@lru_cache(maxsize=4096)
def _rate(tau: float, k: int) -> float:
    """The i.i.d. rate of a mean length at window k, once per value (a bisection each time otherwise)."""
    return rate_from_tau(min(max(tau, 1.0), k + 1.0 - 1e-9), k)


def as_rate(sc: Scenario) -> Scenario:
    """The scenario with a mean acceptance length as the i.i.d. rate that gives it (the same survival,
    tau and prices; its tau is not re-derived at every evaluation)."""
    spec = sc.speculation
    if spec.acceptance.kind != "tau" or not per_level_tau(sc):
        return sc
    spec = replace(spec, acceptance=Acceptance.rate(_rate(float(spec.acceptance.value), spec.k), spec.acceptance.match_rate))
    return Scenario(sc.deployment, spec, sc.context, sc.prompt_len, sc.output_len)


def with_tau(sc: Scenario, tau: float | None) -> Scenario:
    """The scenario at another mean acceptance length (a drafted step's, as the files report it; None:
    the scenario itself), as the i.i.d. rate that gives it."""
    spec = sc.speculation
    if tau is None or not per_level_tau(sc):
        return sc
    spec = replace(spec, acceptance=Acceptance.rate(_rate(float(tau), spec.k), spec.acceptance.match_rate))
    return Scenario(sc.deployment, spec, sc.context, sc.prompt_len, sc.output_len)


def predict(sc: Scenario, obs: Sequence[Observation]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(off tokens/s, on tokens/s, off mean TPOT ms, on mean TPOT ms) at each level, the on arm at the
    level's own tau where the files report one (tau falls with load: one mean tau for every level
    moves the on arm up at high load and down at low, and the crossover with it)."""
    n = len(obs)
    off, on, tp_off, tp_on = (np.empty(n) for _ in range(4))
    c_off = evaluate(sc, [o.load for o in obs])
    off[:], tp_off[:] = c_off.tokens_per_s_off, c_off.step_off * 1e3  # mean TPOT: decode time per token
    groups: dict[float | None, list[int]] = {}
    for i, o in enumerate(obs):
        groups.setdefault(o.tau_on if per_level_tau(sc) else None, []).append(i)
    for tau, rows in groups.items():
        s, idx = with_tau(sc, tau), np.array(rows)
        if s is sc and all(obs[i].load_on is None for i in rows):  # the off arm's evaluation has it
            t_on, step_on = c_off.tokens_per_s_on[idx], c_off.step_on[idx]
        else:
            c = evaluate(s, [obs[i].on_load for i in rows])
            t_on, step_on = c.tokens_per_s_on, c.step_on
        on[idx], tp_on[idx] = t_on, step_on * 1e3 / s.speculation.tau
    return off, on, tp_off, tp_on


def residual_vector(sc: Scenario, obs: Sequence[Observation], names: Sequence[str], values) -> np.ndarray:
    """ln(measured / predicted) for every measured quantity (throughput where used, mean TPOT where
    measured; both arms)."""
    off, on, tp_off, tp_on = predict(apply(sc, names, values), obs)
    res = []
    for i, o in enumerate(obs):
        if o.use_throughput:
            res += [np.log(o.tput_off / off[i]), np.log(o.tput_on / on[i])]
        if o.tpot_off:
            res.append(np.log(o.tpot_off / tp_off[i]))
        if o.tpot_on:
            res.append(np.log(o.tpot_on / tp_on[i]))
    return np.asarray(res)


def speedup_between_levels(sc: Scenario, obs: Sequence[Observation], loads) -> np.ndarray:
    """Throughput on / off at `loads`, the on arm at each load's tau: interpolated in log load between
    the measured levels' taus (held at the end levels' outside them). The curves at each level's tau
    are priced on the whole grid and mixed with the same weights (on tokens/s is linear in tau for
    pure decode, and near it with the prefill share)."""
    loads = np.asarray(loads, float)
    taus = sorted({(o.load, o.tau_on) for o in obs if o.tau_on is not None}) if per_level_tau(sc) else []
    if len({t for _, t in taus}) <= 1:
        return evaluate(with_tau(sc, taus[0][1] if taus else None), loads).speedup
    x = np.log([load for load, _ in taus])
    curves = [evaluate(with_tau(sc, tau), loads).speedup for _, tau in taus]
    pos = np.clip(np.interp(np.log(loads), x, np.arange(len(x), dtype=float)), 0, len(x) - 1)
    j = np.minimum(np.floor(pos).astype(int), len(x) - 2)
    w = pos - j
    stack = np.array(curves)
    cols = np.arange(len(loads))
    return (1 - w) * stack[j, cols] + w * stack[j + 1, cols]


def first_crossing(sc: Scenario, obs: Sequence[Observation], b_max: float, grid: int = 64,
                   refine: bool = False) -> float:
    """The first load in [1, b_max] where the fitted speedup (`speedup_between_levels`) passes 1,
    interpolated in log load on a log grid (refined on 33 points inside the bracket with `refine`);
    inf where the curves never cross there."""
    loads = np.geomspace(1.0, max(b_max, 1.0 + 1e-9), grid)
    f = speedup_between_levels(sc, obs, loads) - 1.0
    i = np.nonzero(np.signbit(f[:-1]) != np.signbit(f[1:]))[0]
    if i.size == 0:
        return np.inf
    j = i[0]
    if refine:
        loads = np.geomspace(loads[j], loads[j + 1], 33)
        f = speedup_between_levels(sc, obs, loads) - 1.0
        j = int(np.nonzero(np.signbit(f[:-1]) != np.signbit(f[1:]))[0][0])
    t = f[j] / (f[j] - f[j + 1])
    return float(np.exp(np.log(loads[j]) + t * (np.log(loads[j + 1]) - np.log(loads[j]))))


def off_residuals(sc: Scenario, obs: Sequence[Observation], names: Sequence[str], values) -> np.ndarray:
    """ln(measured / predicted) of the off arm alone: its throughput (where used) and mean TPOT."""
    c = evaluate(apply(sc, names, values), [o.load for o in obs])
    res = []
    for i, o in enumerate(obs):
        if o.use_throughput:
            res.append(np.log(o.tput_off / c.tokens_per_s_off[i]))
        if o.tpot_off:
            res.append(np.log(o.tpot_off / (c.step_off[i] * 1e3)))
    return np.asarray(res)


def at_bound(name: str, v: float) -> bool:
    """Within 0.1% of the bounded range of a bound: a solver stops just inside an active bound."""
    lo, hi = PARAMETERS[name][1:]
    return bool(min(v - lo, hi - v) <= 1e-3 * (hi - lo))


def _least_squares(f, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, iters: int = 40) -> np.ndarray:
    """min |f(x)|^2 within [lo, hi] by Levenberg-Marquardt steps (forward-difference Jacobian, steps
    clipped to the bounds): a few parameters and a handful of residuals, no scipy in `measured`."""
    x = np.clip(np.asarray(x0, float), lo, hi)
    r = f(x)
    cost, lam = float(r @ r), 1e-3
    h = 1e-4 * (hi - lo)
    for _ in range(iters):
        step = np.where(x + h <= hi, h, -h)
        jac = np.stack([(f(x + np.eye(len(x))[j] * step[j]) - r) / step[j] for j in range(len(x))], axis=1)
        a, g = jac.T @ jac, jac.T @ r
        for _ in range(12):
            dx = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
            xn = np.clip(x + dx, lo, hi)
            rn = f(xn)
            cn = float(rn @ rn)
            if cn < cost:
                break
            lam *= 10.0
        else:
            return x
        done = cost - cn <= 1e-12 * max(cost, 1e-300)
        x, r, cost, lam = xn, rn, cn, max(lam / 10.0, 1e-9)
        if done:
            break
    return x


def fit_off_arm(sc: Scenario, obs: Sequence[Observation]) -> tuple[Scenario, dict]:
    """The engine's baseline from the sweep's own off arm (issue 22 item 3): its host time per step,
    with three levels or more its achieved bandwidth, with four its achieved FLOP/s (where the off arm
    bends over at high load), fitted to the off arm's throughput and mean TPOT alone (bounded least
    squares); everything else stays the scenario's. The on arm priced on this baseline is what this
    engine should have done with speculation. Returns the scenario with the fitted values and
    {parameters, at_bound, max_ln_off} (the largest |ln(measured / predicted)| left on the off arm);
    fewer than two levels: the scenario as it is."""
    sc = as_rate(sc)
    levels = len({o.load for o in obs})
    if levels < 2:
        return sc, {"parameters": {}, "at_bound": [], "max_ln_off": None}
    names = ["step_overhead_ms", "bandwidth_fraction", "flops_fraction"][:levels - 1]  # one fewer than the levels
    lo, hi = (np.array([PARAMETERS[n][i] for n in names]) for i in (1, 2))
    x = _least_squares(lambda v: off_residuals(sc, obs, names, v), np.array([initial(sc, n) for n in names]), lo, hi)
    r = off_residuals(sc, obs, names, x)
    return apply(sc, names, x), {"parameters": {n: round(float(v), 6) for n, v in zip(names, x)},
                                 "at_bound": [n for n, v in zip(names, x) if at_bound(n, v)],
                                 "max_ln_off": float(np.abs(r).max()) if len(r) else None}
