"""Fit the free parameters to a measured sweep, with uncertainties and a bootstrap crossover interval.

Free parameters: achieved bandwidth fraction, achieved FLOP/s fraction, per-step overhead, per
draft-forward overhead, and the acceptance rate when the files do not report it. Residuals are
ln(predicted / measured) of output throughput (and of mean TPOT where measured), both arms; the
fit is scipy.optimize.least_squares, bounded, with a robust (soft L1) loss. The fit is saved as a
small YAML that `--calibration FILE` applies to predict and simulate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .curves import Scenario, evaluate, find_crossings
from .errors import CrossoverError
from .speculation import Acceptance

# name -> (Efficiency field or "acceptance", lower, upper, scale for the optimiser)
PARAMETERS: dict[str, tuple[str, float, float]] = {
    "bandwidth_fraction": ("bandwidth_fraction", 0.2, 1.0),
    "flops_fraction": ("flops_fraction", 0.1, 1.0),
    "step_overhead_ms": ("step_overhead_s", 0.0, 100.0),
    "draft_step_overhead_ms": ("draft_step_overhead_s", 0.0, 50.0),
    "acceptance": ("acceptance", 0.0, 0.99),
}
_MS = {"step_overhead_ms", "draft_step_overhead_ms"}
# Bootstrap refits start at the full fit and only feed a 5-95% crossover interval: a relative
# tolerance of 1e-4 on cost and parameters moves the crossover far less than the resampling
# does (measured: interval ends unchanged to 3 figures) at about half the function evaluations.
BOOTSTRAP_TOL = 1e-4


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
    """A calibration result."""

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

    def parameters(self) -> dict[str, dict[str, Any]]:
        """name -> {value, stderr, at_bound} (overheads in ms); at_bound: the data pushed it to a limit."""
        out = {}
        for n, v, e in zip(self.names, self.values, self.stderr):
            lo, hi = PARAMETERS[n][1:]
            at = bool(abs(v - lo) <= 1e-6 * max(1.0, abs(lo)) or abs(v - hi) <= 1e-6 * max(1.0, abs(hi)))
            out[n] = {"value": float(v), "stderr": float(e), "at_bound": at}
        return out

    def to_yaml_dict(self) -> dict[str, Any]:
        """What `--calibration FILE` reads back."""
        out: dict[str, Any] = {"crossover_calibration": 1,
                               "parameters": {n: {"value": p["value"], "stderr": p["stderr"]}
                                              for n, p in self.parameters().items()}}
        out["fixed"] = dict(self.fixed)
        out["scenario"] = {
            "model": self.scenario.deployment.model.name, "hardware": self.scenario.deployment.hardware.name,
            "tp": self.scenario.deployment.tp, "method": self.scenario.speculation.method,
            "k": self.scenario.speculation.k,
        }
        return out


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
    dep = sc.deployment
    e = dep.efficiency
    if name == "bandwidth_fraction":
        return dep.bandwidth / dep.hardware.bandwidth_bytes_s
    if name == "flops_fraction":
        return dep.flops / dep.hardware.peak_flops(dep.compute_dtype)
    if name == "step_overhead_ms":
        return e.step_overhead_s * 1e3
    if name == "draft_step_overhead_ms":
        return e.draft_step_overhead_s * 1e3
    return min(max(sc.speculation.acceptance.alpha(sc.speculation.k), 0.01), 0.98)


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


def calibrate(sc: Scenario, obs: list[Observation], *, fit_acceptance: bool, load_axis: str = "concurrency",
              bootstrap: int = 60, seed: int = 0, fix: dict[str, float] | None = None) -> Fit:
    """Least-squares fit of the free parameters to both arms of a measured sweep."""
    if len(obs) < 2:
        raise CrossoverError("calibration needs at least two load levels measured in both arms")
    fix = fix or {}
    names = [n for n in PARAMETERS if (n != "acceptance" or fit_acceptance) and n not in fix]
    if sc.speculation.draft_forwards == 0:
        names = [n for n in names if n != "draft_step_overhead_ms"]
    n_res = len(residual_vector(sc, obs, [], np.zeros(0)))
    if n_res <= len(names):
        # fewer measurements than parameters: keep the ones the data constrain least at their defaults
        for drop in ("draft_step_overhead_ms", "flops_fraction"):
            if n_res <= len(names) and drop in names:
                names.remove(drop)
    base = apply(sc, list(fix), np.array(list(fix.values()), float)) if fix else sc
    lo = np.array([PARAMETERS[n][1] for n in names])
    hi = np.array([PARAMETERS[n][2] for n in names])
    x0 = np.clip([_initial(base, n) for n in names], lo + 1e-9, hi - 1e-9)
    sol = _solve(base, obs, names, x0, lo, hi)
    x = sol.x
    r = residual_vector(base, obs, names, x)
    dof = max(len(r) - len(x), 1)
    s2 = float(r @ r) / dof
    try:
        cov = np.linalg.pinv(sol.jac.T @ sol.jac) * s2
        stderr = np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:  # pragma: no cover - pinv does not raise on singular input
        stderr = np.full(len(x), np.nan)
    fitted = apply(base, names, x)
    b_max = max(max(o.load, o.on_load) for o in obs) * 2.0
    cross = find_crossings(fitted, b_max)
    crossover = cross[0].batch if cross else None
    interval = None
    if bootstrap:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(bootstrap):  # case bootstrap over load levels, refit from the solution
            idx = rng.integers(0, len(obs), len(obs))
            sample = [obs[i] for i in idx]
            if len({o.load for o in sample}) < 2:
                continue
            bx = _solve(base, sample, names, x, lo, hi, BOOTSTRAP_TOL).x
            c = find_crossings(apply(base, names, bx), b_max)
            draws.append(c[0].batch if c else np.inf)
        d = np.sort(np.asarray(draws, float))  # inf = no crossover in that refit
        if d.size:
            pick = lambda q: float(d[min(int(round(q * (d.size - 1))), d.size - 1)])  # noqa: E731
            interval = (pick(0.05), pick(0.95))
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
    return Fit(names, x, stderr, residuals, fitted, crossover, interval, load_axis, dict(fix), float(sol.cost))


def load_calibration(path: str | Path) -> dict[str, float]:
    """A saved calibration: parameter name -> value (overheads in ms, as written)."""
    from .specs.loader import read_yaml

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
    for name, value in (data.get("fixed") or {}).items():
        if name in PARAMETERS:
            out.setdefault(name, float(value))
    return out
