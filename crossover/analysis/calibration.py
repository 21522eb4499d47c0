"""Fit the free parameters to a measured sweep, with uncertainties and a bootstrap crossover interval.

Free parameters: achieved bandwidth fraction, achieved FLOP/s fraction, per-step overhead, per
draft-forward overhead, and the acceptance rate when the files do not report it. Residuals are
ln(predicted / measured) of output throughput (and of mean TPOT where measured), both arms; the
fit is scipy.optimize.least_squares, bounded, with a robust (soft L1) loss. The crossover interval
is a parametric bootstrap: synthetic sweeps drawn from the fitted model plus noise of the residuals'
size (its scale drawn from its posterior, so few levels widen it as Student's t does), the parameters
held at defaults varied over their uncertainty, the rest refitted. The fit is saved as a small YAML
that `--calibration FILE` applies to predict and simulate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..model.scenario import Scenario
from .curves import evaluate, find_crossings, speedup
from ..errors import CrossoverError
from ..model.acceptance import Acceptance

# name -> (Efficiency field or "acceptance", lower bound, upper bound). The bounds are physical
# limits or the edge of what an engine that works at all reaches; a fit that runs into one says the
# model misses something in the sweep (wrong TP, dtype or model, prefix caching), so a parameter at
# a bound is fixed at its default instead of being reported as a measurement.
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
    # Per sequential draft forward, ms. At least 0. At most 50: half the step bound, as a draft
    # forward is a smaller model's step (default 0.1 ms, Efficiency.draft_step_overhead_s).
    "draft_step_overhead_ms": ("draft_step_overhead_s", 0.0, 50.0),
    # Per-token acceptance rate, a probability. At least 0: no draft token accepted. Below 1: a rate
    # of 1 never rejects (tau = k + 1 at every load; Acceptance.rate refuses it); 0.99 keeps the
    # closed forms finite.
    "acceptance": ("acceptance", 0.0, 0.99),
}
# When a sweep has fewer levels than free parameters, they are fixed at their defaults in this
# order (the last ones the crossover hinges on first): the draft overhead is seen only through the
# on arm's small difference, the FLOP/s fraction only at loads where the step turns compute-bound.
DROP_ORDER = ("draft_step_overhead_ms", "flops_fraction", "step_overhead_ms", "bandwidth_fraction", "acceptance")
_MS = {"step_overhead_ms", "draft_step_overhead_ms"}
# Bootstrap refits: Gauss-Newton steps with the Jacobian of the fit frozen (each a residual
# evaluation per synthetic sweep, not a least-squares solve); the crossover of each on a log grid of
# this many loads, interpolated (spacing ~10% of the load to twice the largest level: far finer than
# the spread of the refits).
BOOTSTRAP_STEPS = 2
BOOTSTRAP_GRID = 64


@dataclass
class Observation:
    """One measured level: the load, both arms' output tokens/s and (optional) mean TPOT in ms.

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

    @property
    def on_load(self) -> float:
        """Requests in flight with speculation on."""
        return self.load if self.load_on is None else self.load_on


@dataclass
class Fit:
    """A calibration result. `fixed`: values the caller fixed; `at_default`: parameters the data could
    not identify, held at the scenario's value (the documented default unless set), each with why."""

    names: list[str]
    values: np.ndarray
    stderr: np.ndarray
    residuals: list[dict[str, Any]]
    scenario: Scenario
    crossover: float | None
    crossover_interval: tuple[float, float] | None
    load_axis: str
    fixed: dict[str, float] = field(default_factory=dict)
    cost: float = 0.0
    at_default: dict[str, dict[str, Any]] = field(default_factory=dict)

    def parameters(self) -> dict[str, dict[str, Any]]:
        """name -> {value, stderr, at_bound} (overheads in ms) of the fitted parameters."""
        return {n: {"value": float(v), "stderr": float(e), "at_bound": _at_bound(n, v)}
                for n, v, e in zip(self.names, self.values, self.stderr)}

    def to_yaml_dict(self) -> dict[str, Any]:
        """What `--calibration FILE` reads back (`fixed_at_default` is a record; defaults apply anyway)."""
        out: dict[str, Any] = {"crossover_calibration": 1,
                               "parameters": {n: {"value": p["value"], "stderr": p["stderr"]}
                                              for n, p in self.parameters().items()}}
        out["fixed"] = dict(self.fixed)
        out["fixed_at_default"] = {n: dict(d) for n, d in self.at_default.items()}
        out["scenario"] = {
            "model": self.scenario.deployment.model.name, "hardware": self.scenario.deployment.hardware.name,
            "tp": self.scenario.deployment.tp, "method": self.scenario.speculation.method,
            "k": self.scenario.speculation.k, "weight_dtype": self.scenario.deployment.wdtype,
            "kv_dtype": self.scenario.deployment.kv_dtype,
        }
        return out


def _at_bound(name: str, v: float) -> bool:
    """Within 0.1% of the bounded range of a bound: the solver stops just inside an active bound."""
    lo, hi = PARAMETERS[name][1:]
    return bool(min(v - lo, hi - v) <= 1e-3 * (hi - lo))


def apply(sc: Scenario, names: list[str], values: np.ndarray) -> Scenario:
    """The scenario with fitted values substituted."""
    eff_changes: dict[str, float] = {}
    spec = sc.speculation
    for n, v in zip(names, values):
        target = PARAMETERS[n][0]
        if target == "acceptance":
            spec = replace(spec, acceptance=Acceptance.rate(float(v), spec.acceptance.match_rate))
        else:
            eff_changes[target] = float(v) / 1e3 if n in _MS else float(v)
    dep = sc.deployment.with_efficiency(**eff_changes) if eff_changes else sc.deployment
    return Scenario(dep, spec, sc.context, sc.prompt_len, sc.output_len)


def _initial(sc: Scenario, name: str) -> float:
    """The scenario's value of a parameter: the documented default unless the caller set it."""
    dep = sc.deployment
    e = dep.efficiency
    if name == "bandwidth_fraction":
        return dep.bandwidth / dep.hardware.bandwidth_bytes_s
    if name == "flops_fraction":
        return dep.flops / dep.hardware.peak_flops(dep.compute_dtype)
    if name == "step_overhead_ms":  # the override, else the engine profile's
        return dep.step_overhead_s * 1e3
    if name == "draft_step_overhead_ms":
        return dep.draft_step_overhead_s * 1e3
    return sc.speculation.acceptance.alpha(sc.speculation.k)


def _predict(sc: Scenario, obs: list[Observation]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    c = evaluate(sc, [o.load for o in obs])
    tau = sc.speculation.tau
    c_on = c if all(o.load_on is None for o in obs) else evaluate(sc, [o.on_load for o in obs])
    # mean TPOT: decode time per output token of a request (prefill step excluded)
    return c.tokens_per_s_off, c_on.tokens_per_s_on, c.step_off * 1e3, c_on.step_on * 1e3 / tau


def residual_vector(sc: Scenario, obs: list[Observation], names: list[str], values: np.ndarray) -> np.ndarray:
    """ln(predicted / measured) for every measured quantity."""
    s = apply(sc, names, values)
    off, on, tp_off, tp_on = _predict(s, obs)
    res = []
    for i, o in enumerate(obs):
        if o.use_throughput:
            res += [np.log(off[i] / o.tput_off), np.log(on[i] / o.tput_on)]
        if o.tpot_off:
            res.append(np.log(tp_off[i] / o.tpot_off))
        if o.tpot_on:
            res.append(np.log(tp_on[i] / o.tpot_on))
    return np.asarray(res)


def _solve(sc, obs, names, x0, lo, hi, tol: float = 1e-8):
    from scipy.optimize import least_squares

    return least_squares(lambda x: residual_vector(sc, obs, names, x), x0, bounds=(lo, hi), loss="soft_l1",
                         f_scale=0.1, x_scale="jac", max_nfev=200, ftol=tol, xtol=tol, gtol=tol)


def _stderr(sol, r: np.ndarray) -> np.ndarray:
    """Standard errors from the Jacobian at the solution: sqrt(diag((J^T J)^+ s^2))."""
    s2 = float(r @ r) / max(len(r) - len(sol.x), 1)
    return np.sqrt(np.clip(np.diag(np.linalg.pinv(sol.jac.T @ sol.jac) * s2), 0, None))


def _unidentified(names: list[str], x: np.ndarray, stderr: np.ndarray, active: np.ndarray) -> tuple[int, str] | None:
    """The parameter the data identify least, with why: one at a bound first, then the one whose
    standard error exceeds its value by the largest factor; None when every one is identified."""
    for i, n in enumerate(names):
        if active[i] or _at_bound(n, x[i]):
            lo, hi = PARAMETERS[n][1:]
            return i, f"at its bound {lo if abs(x[i] - lo) <= abs(x[i] - hi) else hi:g} (fitted {x[i]:.4g})"
    ratio = stderr / np.maximum(np.abs(x), 1e-300)
    i = int(np.argmax(ratio))
    if ratio[i] > 1:
        return i, f"not identified: stderr {stderr[i]:.2g} exceeds the fitted value {x[i]:.3g}"
    return None


# A mean TPOT outside these bounds is no measurement: below 1 us a request would stream a million
# tokens/s (denormals and unit slips land here), above 1e7 ms (~3 hours) a token is a stall.
TPOT_MS_RANGE = (1e-3, 1e7)


def _check_observation(o: Observation, load_axis: str) -> None:
    """One line for a level no fit can use: an arm that delivered nothing, an absurd latency."""
    files = o.label.split(" | ") if o.label.count(" | ") == 1 else [o.label or "level"] * 2
    where = lambda arm: f"{files[arm == 'on']} at {load_axis} {o.load:g}"  # noqa: E731
    if o.use_throughput:
        for arm, v in (("off", o.tput_off), ("on", o.tput_on)):
            if not (np.isfinite(v) and v > 0):
                raise CrossoverError(f"{where(arm)}: the {arm} arm's output_throughput is {v:g} tokens/s; a level where an "
                                     f"arm delivered nothing cannot be fitted: drop or rerun it")
    for arm, v in (("off", o.tpot_off), ("on", o.tpot_on)):
        if v is not None and v != 0 and not TPOT_MS_RANGE[0] <= v <= TPOT_MS_RANGE[1]:
            raise CrossoverError(f"{where(arm)}: the {arm} arm's mean TPOT {v:g} ms is no measurement (expected "
                                 f"{TPOT_MS_RANGE[0]:g}-{TPOT_MS_RANGE[1]:g} ms)")


def _first_crossing(sc: Scenario, loads: np.ndarray) -> float:
    """The first load where speedup passes 1 on a log grid, interpolated in log load (inf: none)."""
    f = speedup(sc, loads) - 1.0
    i = np.nonzero(np.signbit(f[:-1]) != np.signbit(f[1:]))[0]
    if i.size == 0:
        return np.inf
    j = i[0]
    t = f[j] / (f[j] - f[j + 1])
    return float(np.exp(np.log(loads[j]) + t * (np.log(loads[j + 1]) - np.log(loads[j]))))


def _interval(base: Scenario, obs: list[Observation], names: list[str], x: np.ndarray, jac: np.ndarray,
              held: dict[str, tuple[float, float]], draws: int, b_max: float, seed: int,
              level: float = 0.90, progress: Callable[[int, int], None] | None = None) -> tuple[float, float]:
    """The crossover's `level` interval by a parametric bootstrap, vectorised over the draws.

    Each draw is a synthetic sweep: the fitted prediction times exp(noise), the noise scale drawn
    from its posterior given the residuals (s^2 dof / chi^2_dof), parameters held at defaults
    drawn about their values with their spread (truncated to the bounds), and the fitted ones
    refitted by Gauss-Newton steps from the fit with its Jacobian frozen. inf: no crossover.
    `progress(done, total)` after each draw's refit step and crossing (total: draws x (steps + 1))."""
    rng = np.random.default_rng(seed)
    r0 = residual_vector(base, obs, names, x)
    dof = max(len(r0) - len(names), 1)
    sigma = np.sqrt(float(r0 @ r0) / dof * dof / rng.chisquare(dof, draws))
    eps = rng.standard_normal((draws, len(r0))) * sigma[:, None]
    hn = list(held)
    h_lo, h_hi = (np.array([PARAMETERS[n][i] for n in hn]) for i in (1, 2))
    centre, spread = (np.array([held[n][i] for n in hn]) for i in (0, 1))
    hv = np.clip(centre + spread * rng.standard_normal((draws, len(hn))), h_lo, h_hi)
    lo, hi = (np.array([PARAMETERS[n][i] for n in names]) for i in (1, 2))
    step = np.linalg.pinv(jac) if names else np.zeros((0, len(r0)))
    xb = np.tile(x, (draws, 1))
    steps = BOOTSTRAP_STEPS if names else 0
    tick = progress or (lambda done, total: None)

    def each(f, offset: int) -> list:  # f(draw) for every draw, progress after each
        return [(f(j), tick(offset + j + 1, draws * (steps + 1)))[0] for j in range(draws)]

    for it in range(steps):
        rb = -eps if it == 0 and not hn else np.array(each(
            lambda j: residual_vector(base, obs, names + hn, np.concatenate([xb[j], hv[j]])), it * draws)) - r0 - eps
        xb = np.clip(xb - rb @ step.T, lo, hi)
    loads = np.geomspace(1.0, b_max, BOOTSTRAP_GRID)
    d = np.array(each(lambda j: _first_crossing(apply(base, names + hn, np.concatenate([xb[j], hv[j]])), loads),
                      steps * draws))
    q = (1.0 - level) / 2.0
    return float(np.quantile(d, q, method="inverted_cdf")), float(np.quantile(d, 1 - q, method="inverted_cdf"))


def calibrate(sc: Scenario, obs: list[Observation], *, fit_acceptance: bool, load_axis: str = "concurrency",
              bootstrap: int = 60, seed: int = 0, fix: dict[str, float] | None = None, progress=None) -> Fit:
    """Least-squares fit of the identifiable parameters to both arms of a measured sweep.

    At most one parameter fewer than distinct levels is fitted (the rest, in DROP_ORDER, stay at
    their defaults); after each fit a parameter at a bound or whose standard error exceeds its value
    is fixed at its default and the rest refitted. `Fit.at_default` says which and why; `progress` follows
    the bootstrap (_interval)."""
    for o in obs:
        _check_observation(o, load_axis)
    levels = len({o.load for o in obs})
    if levels < 2:
        raise CrossoverError("calibration needs at least two load levels measured in both arms")
    fix = fix or {}
    names = [n for n in PARAMETERS if (n != "acceptance" or fit_acceptance) and n not in fix]
    if sc.speculation.draft_forwards == 0:
        names = [n for n in names if n != "draft_step_overhead_ms"]
    base = apply(sc, list(fix), np.array(list(fix.values()), float)) if fix else sc
    n_res = len(residual_vector(base, obs, [], np.zeros(0)))
    most = max(min(levels - 1, n_res - 1), 0)
    at_default: dict[str, dict[str, Any]] = {}
    held: dict[str, tuple[float, float]] = {}  # held at default: (centre, spread) its bootstrap draws use
    for drop in DROP_ORDER:
        if len(names) > most and drop in names:
            names.remove(drop)
            at_default[drop] = {"value": _initial(base, drop),
                                "reason": f"not identifiable: {levels} levels fit at most {most} parameter(s)"}
            # no information in the data: it varies in the bootstrap by as much as its default
            held[drop] = (_initial(base, drop), abs(_initial(base, drop)))
    lo = np.array([PARAMETERS[n][1] for n in names])
    hi = np.array([PARAMETERS[n][2] for n in names])
    x = np.clip([_initial(base, n) for n in names], lo + 1e-9, hi - 1e-9)
    stderr, cost, jac = np.zeros(0), 0.0, np.zeros((n_res, 0))
    while names:
        sol = _solve(base, obs, names, x, lo, hi)
        x, cost, jac = sol.x, float(sol.cost), sol.jac
        stderr = _stderr(sol, residual_vector(base, obs, names, x))
        worst = _unidentified(names, x, stderr, sol.active_mask)
        if worst is None:
            break
        i, reason = worst
        at_default[names[i]] = {"value": _initial(base, names[i]), "reason": reason}
        # its fitted value and uncertainty, wide enough to reach the default it is held at
        held[names[i]] = (float(x[i]), max(float(stderr[i]), abs(_initial(base, names[i]) - x[i])))
        keep = np.arange(len(names)) != i
        names = [n for j, n in enumerate(names) if keep[j]]
        x, lo, hi = np.clip(x[keep], lo[keep] + 1e-9, hi[keep] - 1e-9), lo[keep], hi[keep]
        stderr, jac = np.zeros(0), np.zeros((n_res, 0))
    fitted = apply(base, names, x)
    b_max = max(max(o.load, o.on_load) for o in obs) * 2.0
    cross = find_crossings(fitted, b_max)
    crossover = cross[0].batch if cross else None
    interval = _interval(base, obs, names, x, jac, held, bootstrap, b_max, seed, progress=progress) if bootstrap else None
    off, on, tp_off, tp_on = _predict(fitted, obs)
    residuals = []
    for i, o in enumerate(obs):
        r: dict[str, Any] = {load_axis: o.load}
        if o.load_on is not None:
            r["in_flight_on"] = o.load_on
        if o.use_throughput:
            r["tokens_per_s_off"] = {"measured": o.tput_off, "predicted": float(off[i]),
                                     "ln_ratio": float(np.log(off[i] / o.tput_off))}
            r["tokens_per_s_on"] = {"measured": o.tput_on, "predicted": float(on[i]),
                                    "ln_ratio": float(np.log(on[i] / o.tput_on))}
        for arm, meas, pred in (("off", o.tpot_off, tp_off[i]), ("on", o.tpot_on, tp_on[i])):
            if meas:
                r[f"mean_tpot_ms_{arm}"] = {"measured": meas, "predicted": float(pred),
                                            "ln_ratio": float(np.log(pred / meas))}
        residuals.append(r)
    return Fit(names, x, stderr, residuals, fitted, crossover, interval, load_axis, dict(fix), cost, at_default)


def load_calibration(path: str | Path) -> dict[str, float]:
    """A saved calibration: parameter name -> value (overheads in ms, as written)."""
    from ..specs.loader import read_yaml

    data = read_yaml(Path(path))
    params = data.get("parameters")
    if not isinstance(params, dict) or data.get("crossover_calibration") != 1:
        raise CrossoverError(f"{path}: not a crossover calibration file (expected `crossover_calibration: 1` "
                             f"and `parameters`)")
    out: dict[str, float] = {}
    for name, entry in params.items():
        if name not in PARAMETERS:
            raise CrossoverError(f"{path}: unknown parameter {name!r}; expected one of {', '.join(PARAMETERS)}")
        value = entry.get("value") if isinstance(entry, dict) else entry
        if not isinstance(value, (int, float)) or value != value:
            raise CrossoverError(f"{path}: parameter {name!r} needs a numeric `value`")
        lo, hi = PARAMETERS[name][1:]
        if not lo <= value <= hi:
            raise CrossoverError(f"{path}: parameter {name!r} = {value} lies outside [{lo}, {hi}]")
        out[name] = float(value)
    fixed = data.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise CrossoverError(f"{path}: `fixed` must map parameter names to numbers, got {fixed!r}")
    for name, value in fixed.items():
        if name in PARAMETERS:
            lo, hi = PARAMETERS[name][1:]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise CrossoverError(f"{path}: fixed {name!r} must be a number in [{lo}, {hi}], got {value!r}")
            out.setdefault(name, float(value))
    return out


def saved_scenario(path: str | Path) -> dict[str, Any] | None:
    """The scenario a saved calibration was fitted on (model, hardware, tp, method, k, dtypes), or
    None for a file written before fits recorded it."""
    from ..specs.loader import read_yaml

    saved = read_yaml(Path(path)).get("scenario")
    if saved is None:
        return None
    if not isinstance(saved, dict):
        raise CrossoverError(f"{path}: `scenario` must be a mapping (model, hardware, tp, ...), got {saved!r}")
    return saved


def check_transfer(saved_scenario: dict[str, Any] | None, model_name: str, hardware_name: str, tp: int,
                   force: bool = False, *, source: str | Path = "the calibration",
                   transferred: Sequence[str] = ()) -> str | None:
    """Refuse a calibration fitted on another model, hardware or TP (its efficiencies and overheads
    were measured there) unless `force`; with `force`, the one-line note of what was transferred.
    None when the scenarios agree or the file records none."""
    if not saved_scenario:
        return None
    want = {"model": model_name, "hardware": hardware_name, "tp": tp}
    diffs = [f"{key} {saved_scenario.get(key)} -> {value}" for key, value in want.items()
             if key in saved_scenario and str(saved_scenario[key]) != str(value)]
    if not diffs:
        return None
    fitted = f"{saved_scenario.get('model')} on {saved_scenario.get('tp')} x {saved_scenario.get('hardware')}"
    if not force:
        raise CrossoverError(f"{source}: fitted on {fitted}, not this scenario ({', '.join(diffs)}); its values "
                             f"were measured there: give --force to apply them anyway")
    what = ", ".join(transferred) if transferred else "its parameters"
    return f"note: --force: {what} fitted on {fitted} applied to {model_name} on {tp} x {hardware_name} ({', '.join(diffs)})"

