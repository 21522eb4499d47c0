"""Throughput with speculation off and on over batch, the speedup, and where the curves cross."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np

from ..defaults import DEFAULT_BATCHES
from ..model.scenario import Scenario, memory_limits
from ..model.step import Mix, StepModel, prompts_per_step

Regime = Literal["crosses", "always_faster", "never_faster"]


@dataclass
class Curves:
    """Arrays over batch: mean step seconds, output tokens/s, draft and verify seconds."""

    batch: np.ndarray
    step_off: np.ndarray
    step_on: np.ndarray
    draft: np.ndarray
    verify: np.ndarray
    tokens_per_s_off: np.ndarray
    tokens_per_s_on: np.ndarray
    # with the prefill share: time to first token, ~ half a running step of wait plus the step
    # that carries the prompt (seconds); None for pure decode
    ttft_off: np.ndarray | None = None
    ttft_on: np.ndarray | None = None

    @property
    def speedup(self) -> np.ndarray:
        """Output throughput on / off."""
        return self.tokens_per_s_on / self.tokens_per_s_off


def _mixed_curves(sc: Scenario, b: np.ndarray, model: StepModel) -> Curves:
    """Closed form with the prefill share: prompts arrive in whole-prompt lumps, as an engine with
    chunked prefill schedules them when a prompt fits the step's token budget.

    At `batch` requests in flight yielding y tokens per step each, r = batch y / output_len requests
    finish (and new prompts are prefilled) per step; a step carries floor(r) or ceil(r) prompts
    (fraction r - floor(r) of the steps the higher). A request spends one prefill step (its first
    token) and (output_len - 1) / y decode steps: throughput = batch x output_len / that time.
    Speculation speeds up only the decode part (Amdahl), and the prompts in a step spend FLOPs that
    verification would have used.
    """
    spec = sc.speculation
    p_len, o_len = float(sc.prompt_len), float(sc.output_len)  # type: ignore[arg-type]

    def arm(y: float, speculate: bool) -> tuple[np.ndarray, ...]:
        lo, frac = prompts_per_step(b, y, o_len)
        # steps carrying floor(r) and ceil(r) prompts, priced together in one pass
        n = np.concatenate([lo, lo + 1.0])
        dec = np.maximum(np.concatenate([b, b]) - n, 0.0)
        step = model.price(model.with_prompts(dec, n, p_len, sc.context, spec if speculate else None))
        t, verify, draft = step.total, step.verify, step.draft
        m = b.size
        t_lo, t_hi = t[:m], t[m:]
        mean = (1.0 - frac) * t_lo + frac * t_hi
        prefill_step = np.where(lo >= 1, t_lo, t_hi)  # a step that carries at least one prompt
        e2e = prefill_step + (o_len - 1.0) / y * mean
        return (mean, (1.0 - frac) * draft[:m] + frac * draft[m:], (1.0 - frac) * verify[:m] + frac * verify[m:],
                b * o_len / e2e, 0.5 * mean + prefill_step)

    off, _, _, tput_off, ttft_off = arm(1.0, False)
    on, draft, verify, tput_on, ttft_on = arm(spec.tau, True)
    return Curves(b, off, on, draft, verify, tput_off, tput_on, ttft_off, ttft_on)


def evaluate(sc: Scenario, batch, model: StepModel | None = None) -> Curves:
    """Step times and throughputs off and on at each batch (fractional batches: the curve is continuous)."""
    model = model or StepModel.of(sc.deployment, sc.speculation)
    spec = sc.speculation
    b = np.asarray(batch, float)
    if sc.mixed:
        return _mixed_curves(sc, b, model)
    # Off (q = 1, nothing drafted) and on of the same batches priced in one pass: the draft passes
    # and speculative overheads apply only where sequences verify.
    n = b.size
    flat = np.concatenate([b.ravel(), b.ravel()])
    target = model.decode(flat, sc.context, spec, width=np.repeat([1.0, spec.verify_width], n), passes=()).target
    passes = model.draft_passes(b.ravel(), sc.context, spec)  # the speculating half's (draft_at)
    both = model.price(Mix(target, np.concatenate([np.zeros(n), b.ravel()]), passes,
                           uniform=np.concatenate([np.ones(n, bool), np.full(n, model.uniform_verify(spec))]),
                           sequences=flat, draft_at=slice(n, 2 * n)))
    off, on = both.total[:n].reshape(b.shape), both.total[n:].reshape(b.shape)
    draft, verify = both.draft[n:].reshape(b.shape), both.verify[n:].reshape(b.shape)
    return Curves(b, off, on, draft, verify, b / off, b * spec.tau / on)


def speedup(sc: Scenario, batch, model: StepModel | None = None) -> np.ndarray:
    """Throughput ratio on / off at each batch."""
    return evaluate(sc, batch, model).speedup


def stops_paying(crossings: list) -> float | None:
    """The first batch of `crossings` where the speedup falls through 1 (None: none does)."""
    return next((c.batch for c in crossings if c.direction == "down"), None)


@dataclass
class Crossing:
    """A batch where speedup passes through 1: 'down' (speculation stops paying) or 'up'."""

    batch: float
    direction: Literal["down", "up"]


# Points of the log grid the crossover is bracketed and located on. Against 3 rounds of 32-point
# bisection on the priced curve, over 207 roots (6 models x 6 methods x 3 engines, pure decode and
# with the prefill share, ranges to 64 and 512): at 64 points the cubic lands within 7e-7 of the root
# (median), 6e-6 (p90); a step in the curve is located within 1/32^2 of its grid bracket (two rounds
# of 32 points priced across it). 48 points: 2.5e-6 / 1.8e-5.
CROSSING_GRID = 64


@lru_cache(maxsize=64)
def crossing_grid(b_max: float, grid: int = CROSSING_GRID) -> np.ndarray:
    """The log grid of batches find_crossings brackets and locates the roots on (memoised per range,
    read-only)."""
    xs = np.geomspace(1.0, b_max, grid)
    xs.flags.writeable = False
    return xs


def _cubic_root(f: np.ndarray, i: int) -> float:
    """Where the cubic through the 4 grid values around bracket (i, i + 1) of a uniform grid (in
    grid steps from point 0) passes through 0: Newton from the linear estimate, kept inside the
    bracket by bisection (the cubic takes the bracket's two values, of opposite signs, at its ends)."""
    if len(f) < 4:  # too few points for a cubic: the linear estimate
        return i + float(f[i]) / float(f[i] - f[i + 1])
    j = min(max(i - 1, 0), len(f) - 4)
    f0, f1, f2, f3 = (float(v) for v in f[j:j + 4])
    # Newton's forward differences: p(u) = f0 + u d1 + u(u-1)/2 d2 + u(u-1)(u-2)/6 d3
    d1, d2, d3 = f1 - f0, f2 - 2.0 * f1 + f0, f3 - 3.0 * f2 + 3.0 * f1 - f0
    c3, c2 = d3 / 6.0, d2 / 2.0 - d3 / 2.0
    c1 = d1 - d2 / 2.0 + d3 / 3.0
    lo, hi = float(i - j), float(i - j + 1)
    p_lo = float(f[i])
    u = lo + p_lo / (p_lo - float(f[i + 1]))  # the linear estimate
    for _ in range(12):
        p = f0 + u * (c1 + u * (c2 + u * c3))
        if p == 0.0:
            break
        if (p > 0.0) == (p_lo > 0.0):
            lo, p_lo = u, p
        else:
            hi = u
        dp = c1 + u * (2.0 * c2 + 3.0 * u * c3)
        step = u - p / dp if dp != 0.0 else lo - 1.0
        u = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo < 1e-12 or abs(p / dp if dp else 1.0) < 1e-12:
            break
    return j + u


def _smooth(f: np.ndarray, i: int) -> bool:
    """Whether the grid values around bracket (i, i + 1) look like one smooth curve: their third
    difference is small beside the bracket's first (a step in the curve, e.g. where the forward
    leaves its CUDA graph, makes it as large)."""
    if len(f) < 4:
        return False
    j = min(max(i - 1, 0), len(f) - 4)
    d3 = float(f[j + 3] - 3.0 * f[j + 2] + 3.0 * f[j + 1] - f[j])
    return abs(d3) <= ROUGH * abs(float(f[i + 1] - f[i]))


# A bracket whose third difference exceeds this share of its first difference holds a step, not a
# smooth root: a smooth curve's is ~h^2 of it (h ~ 0.1 in ln batch on a 64-point grid to 512).
ROUGH = 0.05


def find_crossings(sc: Scenario, b_max: float, model: StepModel | None = None, grid: int = CROSSING_GRID,
                   on_grid: tuple[np.ndarray, np.ndarray] | None = None, width: int = 32) -> list[Crossing]:
    """Roots of speedup(batch) = 1 on [1, b_max], found on the curve evaluated at crossing_grid's
    batches: each sign change brackets a root, which the cubic through the 4 grid values around it
    (in log batch, where the grid is uniform) locates. Only where those values show a step rather
    than a smooth curve (a CUDA-graph limit, a memory boundary; `_smooth`) is the bracket priced again,
    at `width` points in one call, then the sub-bracket holding the sign change likewise, and the root
    located between two of those points by a secant: where the speedup jumps through 1 (a step that
    loses its CUDA graph) the crossover is the jump, within 1/width^2 of the grid bracket. `on_grid`:
    the grid's batches and the speedup already evaluated there (predict prices them in the same pass
    as the batches asked for)."""
    if b_max <= 1:
        return []
    model = model or StepModel.of(sc.deployment, sc.speculation)
    if on_grid is None:
        xs = crossing_grid(b_max, grid)
        f = speedup(sc, xs, model) - 1.0
    else:
        xs, f = on_grid[0], on_grid[1] - 1.0
    idx = np.nonzero(np.signbit(f[:-1]) != np.signbit(f[1:]))[0]
    if idx.size == 0:
        return []
    lx0, h = float(np.log(xs[0])), float(np.log(xs[-1] / xs[0])) / (len(xs) - 1)
    roots = {int(i): float(np.exp(lx0 + h * _cubic_root(f, int(i)))) for i in idx if _smooth(f, int(i))}
    rough = np.array([i for i in idx if int(i) not in roots], int)
    if rough.size:  # steps: priced across their brackets in one call, twice (1/width^2 of the bracket)
        lo, hi = xs[rough], xs[rough + 1]
        rows = np.arange(rough.size)
        for _ in range(2):
            pts = np.linspace(lo, hi, width).T  # (brackets, width)
            fv = (speedup(sc, pts.ravel(), model) - 1.0).reshape(pts.shape)
            j = np.argmax(np.signbit(fv[:, :-1]) != np.signbit(fv[:, 1:]), axis=1)
            lo, hi, flo, fhi = pts[rows, j], pts[rows, j + 1], fv[rows, j], fv[rows, j + 1]
        # a smooth but steep root: the secant; a jump through 1 (the step is the crossover): where it lies
        root = lo - flo * (hi - lo) / np.where(fhi != flo, fhi - flo, 1.0)
        roots.update(zip(rough.tolist(), root.tolist()))
    return [Crossing(roots[int(i)], "down" if f[i] > 0 else "up") for i in idx]


@dataclass
class Prediction:
    """The on/off curves at the requested batches, the crossover and the memory limits."""

    scenario: Scenario
    curves: Curves
    tau: float
    max_batch_off: int
    max_batch_on: int
    crossings: list[Crossing] = field(default_factory=list)

    @property
    def speedup(self) -> np.ndarray:
        """On / off throughput ratio at each requested batch."""
        return self.curves.speedup

    @property
    def crossover_batch(self) -> float | None:
        """The first batch where speculation stops paying off: speedup falls through 1 (None when it never
        does). A rise through 1 below it (a MoE target whose verify tokens load more experts at batch 1,
        an off server's graph limit) is one of `crossings`, not the crossover."""
        return stops_paying(self.crossings)

    @property
    def regime(self) -> Regime:
        """'crosses', 'always_faster' or 'never_faster' over the batch range searched."""
        if self.crossings:
            return "crosses"
        return "always_faster" if float(self.speedup[0]) > 1.0 else "never_faster"

    @property
    def fits_off(self) -> np.ndarray:
        """Whether each batch fits in memory without speculation."""
        return self.curves.batch <= self.max_batch_off

    @property
    def fits_on(self) -> np.ndarray:
        """Whether each batch fits in memory with the draft's weights and KV cache."""
        return self.curves.batch <= self.max_batch_on

    @property
    def crossover_at_graph_limit(self) -> dict | None:
        """Where the crossover is a server's CUDA-graph limit (its uniform step outgrows the largest graph
        there and runs its attention outside it: the speedup jumps through 1): `server` (speculating or
        plain), the `batch` (every data-parallel rank's: each steps its share), the `limit`, its `unit` and
        the step's `width` in tokens a request. None elsewhere."""
        from ..model.graphs import limit_batch

        cb = self.crossover_batch
        if cb is None:
            return None
        dep, spec = self.scenario.deployment, self.scenario.speculation
        for server, engine, width in (("speculating", dep.speculating_engine, spec.verify_width),
                                      ("plain", dep.engine, 1.0)):
            speculating = server == "speculating"
            b = limit_batch(engine, speculating, width)
            if b is None:
                continue
            b *= dep.data_parallel  # (each rank's count is a ceil: within one batch a rank)
            if abs(cb - b) <= max(1e-3 * b, float(dep.data_parallel - 1)):
                return {"server": server, "batch": b, "limit": int(engine.capture_limit(speculating)),
                        "unit": engine.graph_capture_unit, "width": float(width)}
        return None


    @property
    def crossover_at_graph_size(self) -> dict | None:
        """Where the crossover is the edge between two captured CUDA-graph sizes (not a graph limit): a
        server's step replays the `size` graph up to `batch` and pads to the `next` one above it, so the
        padding, not a smooth trend, carries the speedup through 1 (where both servers pad alike it is flat
        between sizes). `server`, `batch`, `size`, `next`, `unit`; None elsewhere."""
        from ..model.graphs import graph_key

        cb = self.crossover_batch
        if cb is None or self.crossover_at_graph_limit is not None:
            return None
        dep, spec = self.scenario.deployment, self.scenario.speculation
        b = np.array([cb * (1 - 1e-3), cb * (1 + 1e-3)]) / dep.data_parallel  # a rank's, either side of it
        for server, engine, width in (("speculating", dep.speculating_engine, spec.verify_width), ("plain", dep.engine, 1.0)):
            speculating = server == "speculating"
            if engine.captured(speculating) is None:
                continue
            key = graph_key(b * width, b if speculating else np.zeros(2), engine)
            lo, hi = engine.padded_key(key, speculating)
            if hi > lo and key[1] <= engine.capture_limit(speculating):
                return {"server": server, "batch": float(cb), "size": float(lo), "next": float(hi),
                        "unit": engine.graph_capture_unit}
        return None


def predict(sc: Scenario, batches=DEFAULT_BATCHES) -> Prediction:
    """Curves at `batches`, the crossover root on [1, max(batches)], and the memory limits."""
    b = np.asarray(batches, float)
    dep, spec = sc.deployment, sc.speculation
    max_off, max_on = memory_limits(sc)
    model = StepModel.of(dep, spec)
    b_max = float(b.max())
    if b_max > 1:  # the batches asked for and the crossover's grid priced in one pass
        both = evaluate(sc, np.concatenate([b.ravel(), crossing_grid(b_max)]), model)
        n = b.size
        curves = Curves(*(None if v is None else v[:n].reshape(b.shape) for v in (
            both.batch, both.step_off, both.step_on, both.draft, both.verify, both.tokens_per_s_off,
            both.tokens_per_s_on, both.ttft_off, both.ttft_on)))
        crossings = find_crossings(sc, b_max, model, on_grid=(both.batch[n:], both.speedup[n:]))
    else:
        curves = evaluate(sc, b, model)
        crossings = find_crossings(sc, b_max, model)
    return Prediction(sc, curves, spec.tau, max_off, max_on, crossings)
