"""What-if grids: speedup over two axes (k, acceptance, context, batch, hardware), fully vectorised."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..model import memory
from ..model.scenario import Scenario
from .crossings import crossing_between_levels
from ..errors import CrossoverError
from ..specs import load_hardware
from ..model.acceptance import tau_from_rate
from ..model.forward import uniform
from ..model.speculation import MAX_K
from ..model.step import StepModel

AXES = ("batch", "k", "acceptance", "context", "hardware")
# Bounds on an axis before anything is allocated: at most MAX_POINTS values, k up to MAX_K (the
# speculation's own bound); batch and context are checked against the scenario's memory and positions in `grid`.
MAX_POINTS = 1000
MAX_AXIS_VALUE = 1e9


@dataclass
class Grid:
    """speedup[y, x] over the two axes' values."""

    x_axis: str
    x: list
    y_axis: str
    y: list
    speedup: np.ndarray

    def crossover_along_x(self) -> list[float | None]:
        """For each y, the first x where speedup passes through 1 (log-linear between grid points)."""
        out = []
        for row in self.speedup:
            if self.x_axis in ("hardware",):
                out.append(None)
                continue
            xs = np.asarray(self.x, float)
            if self.x_axis in ("batch", "context") and np.all(xs > 0):
                out.append(crossing_between_levels(xs, row))
            else:  # linear axes: interpolate linearly
                r = row - 1.0
                hit = None
                for i in range(len(r) - 1):
                    if np.sign(r[i]) != np.sign(r[i + 1]):
                        hit = float(xs[i] + (xs[i + 1] - xs[i]) * r[i] / (r[i] - r[i + 1]))
                        break
                out.append(hit)
        return out


def parse_axis(spec: str, points: int) -> tuple[str, list]:
    """'batch=1..512' (geometric for batch/context, integers for k), 'k=1..8', 'acceptance=0.5..0.9',
    or an explicit list 'hardware=h100-sxm,a100-80gb-sxm'."""
    if "=" not in spec:
        raise CrossoverError(f"axis {spec!r}: write NAME=LOW..HIGH or NAME=V1,V2 (NAME one of {', '.join(AXES)})")
    name, values = (t.strip() for t in spec.split("=", 1))
    if name not in AXES:
        raise CrossoverError(f"unknown axis {name!r}; choose from {', '.join(AXES)}")
    if name == "hardware":
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not vals:
            raise CrossoverError("hardware axis: give names, e.g. hardware=h100-sxm,a100-80gb-sxm")
        return name, vals
    if not 2 <= points <= MAX_POINTS:
        raise CrossoverError(f"points must lie in [2, {MAX_POINTS}] (--points; got {points})")
    try:
        if ".." in values:
            lo, hi = (float(v) for v in values.split("..", 1))
            _finite(spec, (lo, hi))
            if hi < lo:
                raise CrossoverError(f"axis {spec!r}: the range {values} is reversed; write {name}={values.split('..', 1)[1].strip()}.."
                                     f"{values.split('..', 1)[0].strip()} (low to high)")
            if name == "k":
                _check_k(lo, hi)
                vals = list(range(int(lo), int(hi) + 1))
            elif name in ("batch", "context") and lo > 0:
                vals = list(np.geomspace(lo, hi, points))
            else:
                vals = list(np.linspace(lo, hi, points))
        else:
            vals = [float(v) for v in values.split(",") if v.strip()]
            _finite(spec, vals)
    except CrossoverError:
        raise
    except ValueError:
        raise CrossoverError(f"axis {spec!r}: values must be numbers") from None
    if not vals:
        raise CrossoverError(f"axis {spec!r} has no values")
    if len(vals) > MAX_POINTS:
        raise CrossoverError(f"axis {spec!r}: at most {MAX_POINTS} values")
    if name == "k":
        _check_k(min(vals), max(vals))
        if any(v != int(v) for v in vals):
            raise CrossoverError("k values must be integers >= 1")
    if name == "acceptance" and any(not 0 <= v < 1 for v in vals):
        pct = [v for v in vals if 1 < v <= 100]
        hint = f"; did you mean {pct[0] / 100:.2f} (a fraction, not a percentage)?" if pct else ""
        raise CrossoverError("acceptance values must lie in [0, 1)" + hint)
    if name in ("batch",) and any(v <= 0 for v in vals):
        raise CrossoverError("batch values must be > 0")
    if name == "context" and any(v < 0 for v in vals):
        raise CrossoverError("context values must be >= 0")
    return name, [int(v) for v in vals] if name == "k" else vals


def _finite(spec: str, vals) -> None:
    bad = [v for v in vals if not np.isfinite(v) or abs(v) > MAX_AXIS_VALUE]
    if bad:
        raise CrossoverError(f"axis {spec!r}: {bad[0]:g} is not a finite value up to {MAX_AXIS_VALUE:g}")


def _check_k(lo: float, hi: float) -> None:
    if lo < 1 or hi > MAX_K:
        raise CrossoverError(f"k values must be integers in [1, {MAX_K}] (the most drafted tokens engines verify)")


def _check_limits(sc: Scenario, batches, contexts) -> None:
    """Batch values within what the KV cache could ever hold; contexts within the model's positions."""
    ceiling = memory.batch_ceiling(sc.deployment)
    if batches is not None and float(np.max(batches)) > ceiling:
        raise CrossoverError(f"batch {float(np.max(batches)):g} (what-if axis) exceeds {ceiling}, the most sequences "
                             f"the KV cache of {sc.deployment.gpus} x {sc.deployment.hardware.name} could ever hold")
    limit = sc.deployment.model.max_position_embeddings
    if contexts is not None and limit is not None and float(np.max(contexts)) > limit:
        raise CrossoverError(f"context {float(np.max(contexts)):g} (what-if axis) exceeds "
                             f"{sc.deployment.model.name}'s {limit} positions (max_position_embeddings)")


def _speedup(sc: Scenario, batch, context, k, alpha) -> np.ndarray:
    """Pure-decode speedup; inputs broadcast against each other (pass each axis as a row or a column
    and every term is computed only over the axes it depends on)."""
    spec = sc.speculation
    acc = spec.acceptance if spec.acceptance.kind == "rate" else spec.acceptance.as_rate(spec.k)
    match = spec.acceptance.match_rate
    width = 1.0 + (match * k if spec.method == "ngram" else k)
    model = StepModel.of(sc.deployment, spec)
    off = model.price(model.decode(batch, context)).total  # batch x context only
    if spec.method == "medusa":  # the heads are the draft: its cost grows with k itself
        ks = np.unique(k)
        parts = []
        for kk in ks:
            s = replace(spec, k=int(kk), acceptance=acc)
            m = StepModel.of(sc.deployment, s)
            parts.append(m.price(m.decode(batch, context, s, width=width)).total)
        on = np.choose(np.searchsorted(ks, k), parts) if len(ks) > 1 else parts[0]
    else:  # k sequential forwards of one draft step (none for n-gram)
        one = replace(spec, k=1, acceptance=acc)
        mode = model.catch_up(one)
        if mode == "none":
            passes = tuple((k * count, fwd) for count, fwd in model.draft_passes(batch, context, one))
        else:  # the catch-up on the k + 1 verified positions (k an array), then the chain's width-1 passes
            catch = model.draft_passes(batch, context, one, verify_width=width)[0][1]
            single = uniform(model.draft, batch, 1.0, model.draft_context(context))
            passes = ((1, catch), (k - 1 if mode == "first_pass" else k, single))
        on = model.price(model.decode(batch, context, spec, width=width, passes=passes)).total
    tau = 1.0 + match * (tau_from_rate(np.clip(alpha, 0.0, 0.999999), k) - 1.0)
    return tau * off / on


def grid(sc: Scenario, x_axis: str, xs: list, y_axis: str, ys: list) -> Grid:
    """Speedup on the grid (y rows, x columns); other inputs from the scenario."""
    if x_axis == y_axis:
        raise CrossoverError("choose two different axes")
    spec = sc.speculation
    if spec.tree is not None:
        raise CrossoverError("what-if grids apply to chains; drop --tree")
    if spec.acceptance.kind == "per_position" and "acceptance" not in (x_axis, y_axis):
        raise CrossoverError("what-if grids need an i.i.d. acceptance or tau (per-position rates fix k)")
    base_alpha = spec.acceptance.alpha(spec.k)
    hw_axis = "hardware" if "hardware" in (x_axis, y_axis) else None
    hw_values = (xs if x_axis == "hardware" else ys) if hw_axis else [None]
    out = np.zeros((len(ys), len(xs)))
    for hi, hw in enumerate(hw_values):
        s = sc
        if hw is not None:
            s = Scenario(sc.deployment.on_hardware(load_hardware(hw)), spec, sc.context)
        # x varies along columns (a row vector), y along rows (a column vector): broadcasting keeps
        # every term on the axes it depends on
        X = np.asarray([0.0] if x_axis == "hardware" else xs, float)[None, :]
        Y = np.asarray([0.0] if y_axis == "hardware" else ys, float)[:, None]
        vals = {"batch": None, "k": None, "acceptance": None, "context": None}
        for name, arr in ((x_axis, X), (y_axis, Y)):
            if name != "hardware":
                vals[name] = arr
        if vals["batch"] is None:
            raise CrossoverError("one axis must be batch (the load), e.g. --x batch=1..512")
        k = vals["k"] if vals["k"] is not None else np.float64(spec.k)
        alpha = vals["acceptance"] if vals["acceptance"] is not None else np.float64(base_alpha)
        context = vals["context"] if vals["context"] is not None else np.float64(sc.context)
        _check_limits(s, vals["batch"], vals["context"])
        with np.errstate(all="ignore"):
            sp = np.broadcast_to(_speedup(s, vals["batch"], context, k, alpha), (Y.shape[0], X.shape[1]))
        if not np.all(np.isfinite(sp)):
            raise CrossoverError("the what-if grid holds a speedup that is not a finite number; narrow the axes")
        if hw is None:
            out = sp
        elif x_axis == "hardware":
            out[:, hi] = sp[:, 0]
        else:
            out[hi, :] = sp[0, :]
    return Grid(x_axis, list(xs), y_axis, list(ys), out)
