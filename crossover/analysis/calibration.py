"""Fit the free parameters to a measured sweep, with uncertainties and a bootstrap crossover interval.

Free parameters (sweep_fit.PARAMETERS): achieved bandwidth fraction, achieved FLOP/s
fraction, per-step overhead, host time per verifying sequence, per draft-forward overhead, and the
acceptance rate when the files do not report it. Residuals are ln(measured / predicted) of output
throughput (and of mean TPOT where measured), both arms, the on arm at each level's own acceptance
length where the files report one; the fit is scipy.optimize.least_squares, bounded, with a robust
(soft L1) loss. A parameter the data push to a bound is held there (the most physics allows), one
they cannot identify at its default, and a parameter waiting for want of levels takes the freed place.
The crossover interval is a parametric bootstrap (calibration_bootstrap). The fit says whether it
reproduces the sweep (every residual within RESIDUAL_LIMIT, something identified); it is saved as a
small YAML that `--calibration FILE` applies to predict and simulate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import CrossoverError
from ..model.scenario import Scenario
from .calibration_bootstrap import interval
from .sweep_fit import (DROP_ORDER, PARAMETERS, RESIDUAL_LIMIT, Observation, apply, as_rate, at_bound, first_crossing,
                        initial, predict, residual_vector)

__all__ = ["Fit", "Observation", "PARAMETERS", "apply", "calibrate", "check_transfer", "load_calibration",
           "saved_scenario"]


@dataclass
class Fit:
    """A calibration result. `fixed`: values the caller fixed; `at_default`: parameters the data could
    not identify, held at the scenario's value (the documented default unless set), each with why;
    `at_bound`: parameters the data pushed to a bound, held there, each with why."""

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
    at_bound: dict[str, dict[str, Any]] = field(default_factory=dict)
    never_cross: float | None = None  # share of the bootstrap draws whose curves never cross (None: no bootstrap)
    searched: float = 0.0  # the crossover is searched up to this load (twice the largest level)

    def parameters(self) -> dict[str, dict[str, Any]]:
        """name -> {value, stderr, at_bound} (overheads in ms, per-sequence time in us) of the fitted parameters."""
        return {n: {"value": float(v), "stderr": float(e), "at_bound": at_bound(n, v)}
                for n, v, e in zip(self.names, self.values, self.stderr)}

    def disagreements(self) -> list[dict[str, Any]]:
        """Every residual beyond RESIDUAL_LIMIT: {level, quantity, ln} (ln of measured / predicted)."""
        out = []
        for r in self.residuals:
            for key, v in r.items():
                if isinstance(v, dict) and abs(v["ln_ratio"]) > RESIDUAL_LIMIT:
                    out.append({"level": r[self.load_axis], "quantity": key, "ln": v["ln_ratio"]})
        return out

    @property
    def reproduces(self) -> bool:
        """Whether the fitted model reproduces the sweep: something identified, every residual within
        RESIDUAL_LIMIT."""
        return bool(self.names) and not self.disagreements()

    def to_yaml_dict(self) -> dict[str, Any]:
        """What `--calibration FILE` reads back: the fitted values and those held at a bound (the
        fitted curve uses both; `fixed_at_default` is a record, defaults apply anyway)."""
        params = {n: {"value": p["value"], "stderr": p["stderr"]} for n, p in self.parameters().items()}
        params.update({n: {"value": float(d["value"]), "stderr": 0.0, "at_bound": True} for n, d in self.at_bound.items()})
        out: dict[str, Any] = {"crossover_calibration": 1, "parameters": params}
        out["fixed"] = dict(self.fixed)
        out["fixed_at_default"] = {n: dict(d) for n, d in self.at_default.items()}
        out["scenario"] = {
            "model": self.scenario.deployment.model.name, "hardware": self.scenario.deployment.hardware.name,
            "tp": self.scenario.deployment.tp, "method": self.scenario.speculation.method,
            "k": self.scenario.speculation.k, "weight_dtype": self.scenario.deployment.wdtype,
            "kv_dtype": self.scenario.deployment.kv_dtype,
        }
        if self.scenario.deployment.data_parallel > 1:  # (1 where the file says none)
            out["scenario"]["data_parallel"] = self.scenario.deployment.data_parallel
        return out


def _solve(sc, obs, names, x0, lo, hi, tol: float = 1e-8):
    from scipy.optimize import least_squares

    return least_squares(lambda x: residual_vector(sc, obs, names, x), x0, bounds=(lo, hi), loss="soft_l1",
                         f_scale=0.1, x_scale="jac", max_nfev=200, ftol=tol, xtol=tol, gtol=tol)


def _stderr(sol, r: np.ndarray) -> np.ndarray:
    """Standard errors from the Jacobian at the solution: sqrt(diag((J^T J)^+ s^2))."""
    s2 = float(r @ r) / max(len(r) - len(sol.x), 1)
    return np.sqrt(np.clip(np.diag(np.linalg.pinv(sol.jac.T @ sol.jac) * s2), 0, None))


def _unidentified(names: list[str], x: np.ndarray, stderr: np.ndarray,
                  active: np.ndarray) -> tuple[int, str, float | None] | None:
    """The parameter the data identify least, with why and the bound it sits at: one at a bound
    first, then the one whose standard error exceeds its value by the largest factor (bound None);
    None when every one is identified."""
    for i, n in enumerate(names):
        if active[i] or at_bound(n, x[i]):
            lo, hi = PARAMETERS[n][1:]
            bound = lo if abs(x[i] - lo) <= abs(x[i] - hi) else hi
            # (a fitted value within rounding of the bound is the bound: its digits are solver noise)
            near = abs(x[i] - bound) <= 1e-9 * max(abs(hi - lo) if np.isfinite(hi - lo) else 1.0, 1e-300)
            fitted = "" if near else f" (fitted {x[i]:.4g})"
            return i, f"at its bound {bound:g}{fitted}: held there, the data push it past it", bound
    ratio = stderr / np.maximum(np.abs(x), 1e-300)
    i = int(np.argmax(ratio))
    if ratio[i] > 1:
        return i, f"not identified: stderr {stderr[i]:.2g} exceeds the fitted value {x[i]:.3g}", None
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


def _residual_dicts(fitted: Scenario, obs: Sequence[Observation], load_axis: str) -> list[dict[str, Any]]:
    """Per level: measured, predicted and ln(measured / predicted) of every quantity fitted."""
    off, on, tp_off, tp_on = predict(fitted, obs)
    residuals = []
    for i, o in enumerate(obs):
        r: dict[str, Any] = {load_axis: o.load}
        if o.load_on is not None:
            r["in_flight_on"] = o.load_on
        pairs = [("tokens_per_s_off", o.tput_off, off[i]), ("tokens_per_s_on", o.tput_on, on[i])] if o.use_throughput else []
        pairs += [(f"mean_tpot_ms_{arm}", meas, pred) for arm, meas, pred in (("off", o.tpot_off, tp_off[i]),
                                                                              ("on", o.tpot_on, tp_on[i])) if meas]
        for key, meas, pred in pairs:
            r[key] = {"measured": meas, "predicted": float(pred), "ln_ratio": float(np.log(meas / pred))}
        residuals.append(r)
    return residuals


def calibrate(sc: Scenario, obs: list[Observation], *, fit_acceptance: bool, load_axis: str = "concurrency",
              bootstrap: int = 60, seed: int = 0, fix: dict[str, float] | None = None, progress=None) -> Fit:
    """Least-squares fit of the identifiable parameters to both arms of a measured sweep.

    At most one parameter fewer than distinct levels is fitted (the rest wait at their defaults, in
    DROP_ORDER); after each fit a parameter at a bound is held at that bound, one whose standard
    error exceeds its value at its default, the next waiting one takes its place and the rest are
    refitted. `Fit.at_bound` and `Fit.at_default` say which and why; `progress` follows the bootstrap."""
    for o in obs:
        _check_observation(o, load_axis)
    levels = len({o.load for o in obs})
    if levels < 2:
        raise CrossoverError("calibration needs at least two load levels measured in both arms")
    fix, sc = fix or {}, as_rate(sc)
    names = [n for n in PARAMETERS if (n != "acceptance" or fit_acceptance) and n not in fix]
    if sc.speculation.draft_forwards == 0:
        names = [n for n in names if n != "draft_step_overhead_ms"]
    base = apply(sc, list(fix), np.array(list(fix.values()), float)) if fix else sc
    n_res = len(residual_vector(base, obs, [], np.zeros(0)))
    most = max(min(levels - 1, n_res - 1), 0)
    waiting = [n for n in DROP_ORDER if n in names][:max(len(names) - most, 0)]
    names = [n for n in names if n not in waiting]
    at_default = {n: {"value": initial(base, n), "reason": f"not identifiable: {levels} levels fit at most {most} "
                                                          f"parameter(s)"} for n in waiting}
    at_bound: dict[str, dict[str, Any]] = {}
    # held at a default or a bound: (centre, spread) its bootstrap draws use; one waiting for want of
    # levels has no information in the data: it varies by as much as its default
    held = {n: (initial(base, n), abs(initial(base, n))) for n in waiting}
    x = np.array([initial(base, n) for n in names])
    stderr, cost, jac = np.zeros(0), 0.0, np.zeros((n_res, 0))
    while names:
        lo, hi = (np.array([PARAMETERS[n][i] for n in names]) for i in (1, 2))
        x = np.clip(x, lo + 1e-9, hi - 1e-9)
        sol = _solve(base, obs, names, x, lo, hi)
        x, cost, jac = sol.x, float(sol.cost), sol.jac
        stderr = _stderr(sol, residual_vector(base, obs, names, x))
        worst = _unidentified(names, x, stderr, sol.active_mask)
        if worst is None:
            break
        i, reason, bound = worst
        name, default = names[i], initial(base, names[i])
        if bound is None:  # its fitted value and uncertainty, wide enough to reach the default it is held at
            at_default[name] = {"value": default, "reason": reason}
            held[name] = (float(x[i]), max(float(stderr[i]), abs(default - x[i])))
        else:  # held at the bound the data push it to; in the bootstrap it may move back towards its default
            at_bound[name] = {"value": bound, "reason": reason}
            held[name] = (bound, max(float(stderr[i]), abs(default - bound)))
            base = apply(base, [name], [bound])
        keep = np.arange(len(names)) != i
        names, x = [n for j, n in enumerate(names) if keep[j]], x[keep]
        if waiting:  # the freed place: the parameter that waited last comes back
            back = waiting.pop()
            del at_default[back], held[back]
            names, x = names + [back], np.append(x, initial(base, back))
        stderr, jac = np.zeros(0), np.zeros((n_res, 0))
    fitted = apply(base, names, x)
    b_max = max(max(o.load, o.on_load) for o in obs) * 2.0
    cross = first_crossing(fitted, obs, b_max, grid=96, refine=True)
    iv = interval(base, obs, names, x, jac, held, bootstrap, b_max, seed, progress=progress) if bootstrap else None
    return Fit(names, x, stderr, _residual_dicts(fitted, obs, load_axis), fitted, cross if np.isfinite(cross) else None,
               iv.bounds if iv else None, load_axis, dict(fix), cost, at_default, at_bound,
               iv.never_cross if iv else None, b_max)


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
                   transferred: Sequence[str] = (), data_parallel: int = 1) -> str | None:
    """Refuse a calibration fitted on another model, hardware, TP or data parallelism (its efficiencies and
    overheads were measured there) unless `force`; with `force`, the one-line note of what was transferred.
    None when the scenarios agree or the file records none."""
    if not saved_scenario:
        return None
    saved = {"data_parallel": 1, **saved_scenario} if "tp" in saved_scenario else saved_scenario
    want = {"model": model_name, "hardware": hardware_name, "tp": tp, "data_parallel": data_parallel}
    diffs = [f"{key} {saved.get(key)} -> {value}" for key, value in want.items()
             if key in saved and str(saved[key]) != str(value)]
    if not diffs:
        return None
    fitted = f"{saved_scenario.get('model')} on {saved_scenario.get('tp')} x {saved_scenario.get('hardware')}"
    if not force:
        raise CrossoverError(f"{source}: fitted on {fitted}, not this scenario ({', '.join(diffs)}); its values "
                             f"were measured there: give --force to apply them anyway")
    what = ", ".join(transferred) if transferred else "its parameters"
    return f"note: --force: {what} fitted on {fitted} applied to {model_name} on {tp} x {hardware_name} ({', '.join(diffs)})"

