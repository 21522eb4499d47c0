"""Throughput with speculation off and on over batch, the speedup, and where the curves cross."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from . import memory
from .roofline import Plan, engine_step, model_ops, target_plan
from .speculation import Speculation
from .specs.deployment import Deployment

Regime = Literal["crosses", "always_faster", "never_faster"]
DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


@dataclass(frozen=True)
class Scenario:
    """What to predict: a deployment, a speculation method and the context length (tokens in cache)."""

    deployment: Deployment
    speculation: Speculation
    context: float = 2048.0


@dataclass
class Curves:
    """Arrays over batch: step seconds, tokens/s and the speedup (on / off)."""

    batch: np.ndarray
    step_off: np.ndarray
    step_on: np.ndarray
    draft: np.ndarray
    verify: np.ndarray

    @property
    def tokens_per_s_off(self) -> np.ndarray:
        """Output tokens/s without speculation: batch / step."""
        return self.batch / self.step_off

    def tokens_per_s_on(self, tau: float) -> np.ndarray:
        """Output tokens/s with speculation: batch x tau / step."""
        return self.batch * tau / self.step_on


@dataclass(frozen=True)
class Plans:
    """The compiled target and draft op lists of a scenario, built once per prediction."""

    target: Plan
    draft: Plan | None

    @classmethod
    def of(cls, sc: Scenario) -> "Plans":
        """Compile the scenario's forwards."""
        return cls(target_plan(sc.deployment), sc.speculation.draft_plan(sc.deployment))


def evaluate(sc: Scenario, batch, plans: Plans | None = None) -> Curves:
    """Step times off and on at each batch (batch may be fractional: the curve is continuous)."""
    plans = plans or Plans.of(sc)
    dep, spec = sc.deployment, sc.speculation
    b = np.asarray(batch, float)
    n = b.size
    # Decode (q = 1) and verify (q = k + 1) of the same batches in one pass over the target's ops.
    both = engine_step(plans.target, dep, np.concatenate([b.ravel(), b.ravel()]),
                       np.repeat([1.0, spec.verify_width], n), sc.context).total
    off, verify = both[:n].reshape(b.shape), both[n:].reshape(b.shape)
    draft = spec.draft_time(dep, b, sc.context, plans.draft).total
    on = draft + verify + dep.efficiency.spec_overhead_s
    return Curves(b, off, on, np.broadcast_to(draft, b.shape), verify)


def speedup(sc: Scenario, batch, plans: Plans | None = None) -> np.ndarray:
    """Throughput ratio on / off at each batch."""
    c = evaluate(sc, batch, plans)
    return sc.speculation.tau * c.step_off / c.step_on


@dataclass
class Crossing:
    """A batch where speedup passes through 1: 'down' (speculation stops paying) or 'up'."""

    batch: float
    direction: Literal["down", "up"]


def find_crossings(sc: Scenario, b_max: float, plans: Plans | None = None, grid: int = 48, rounds: int = 2,
                   width: int = 24) -> list[Crossing]:
    """Roots of speedup(batch) = 1 on [1, b_max]: bracketed on a log grid, refined by vectorised bisection."""
    if b_max <= 1:
        return []
    plans = plans or Plans.of(sc)
    xs = np.geomspace(1.0, b_max, grid)
    f = speedup(sc, xs, plans) - 1.0
    idx = np.nonzero(np.signbit(f[:-1]) != np.signbit(f[1:]))[0]
    if idx.size == 0:
        return []
    lo, hi = xs[idx], xs[idx + 1]
    flo = f[idx]
    for _ in range(rounds):  # each round narrows every bracket `width - 1` fold in one call
        pts = np.linspace(lo, hi, width).T  # (n_brackets, width)
        fv = (speedup(sc, pts.ravel(), plans) - 1.0).reshape(pts.shape)
        sign_change = np.signbit(fv[:, :-1]) != np.signbit(fv[:, 1:])
        j = np.argmax(sign_change, axis=1)
        rows = np.arange(len(lo))
        lo, hi, flo = pts[rows, j], pts[rows, j + 1], fv[rows, j]
    fhi = speedup(sc, hi, plans) - 1.0
    root = lo - flo * (hi - lo) / np.where(fhi != flo, fhi - flo, 1.0)  # final secant step
    return [Crossing(float(r), "down" if fl > 0 else "up") for r, fl in zip(root, flo)]


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
        return self.tau * self.curves.step_off / self.curves.step_on

    @property
    def crossover_batch(self) -> float | None:
        """The first batch where speedup passes through 1 (None when it never does)."""
        return self.crossings[0].batch if self.crossings else None

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


def draft_memory(sc: Scenario) -> tuple[float, float]:
    """(weights per GPU, KV bytes per sequence per GPU) the speculation method adds."""
    spec, dep = sc.speculation, sc.deployment
    length = sc.context + spec.k + 1
    draft_length = length if spec.draft_kv_budget is None else min(sc.context, spec.draft_kv_budget) + spec.k + 1
    if spec.method == "draft":
        d = spec.draft_deployment(dep)
        ops = model_ops(d.model, d.wdtype, d.tp)
        # The draft is sharded over its own TP; its share per target GPU assumes draft_tp <= tp.
        scale = d.tp / dep.tp
        return (memory.weight_bytes_per_gpu(d, ops) * scale,
                memory.kv_bytes_per_seq_per_gpu(d, ops, draft_length) * scale)
    ops = spec.draft_ops(dep)
    if not ops:
        return 0.0, 0.0
    weights = 0.0
    for op in ops:
        if op.name in ("draft_lm_head", "lm_head") and spec.method in ("eagle", "mtp"):
            continue  # shares the target's LM head
        if op.kind == "gemm":
            weights += op.count * op.params * 2.0 / (dep.tp if op.sharded else 1)
        elif op.kind == "experts":
            weights += op.count * op.num_experts * op.params * 2.0 / dep.tp
    return weights, memory.kv_bytes_per_seq_per_gpu(dep, ops, draft_length)


def predict(sc: Scenario, batches=DEFAULT_BATCHES) -> Prediction:
    """Curves at `batches`, the crossover root on [1, max(batches)], and the memory limits."""
    b = np.asarray(batches, float)
    dep, spec = sc.deployment, sc.speculation
    plans = Plans.of(sc)
    curves = evaluate(sc, b, plans)
    max_off = memory.max_batch(dep, sc.context, slack_tokens=1)
    w, kv = draft_memory(sc)
    max_on = memory.max_batch(dep, sc.context, extra_weights_per_gpu=w, extra_kv_per_seq_per_gpu=kv,
                              slack_tokens=spec.k + 1)
    crossings = find_crossings(sc, float(b.max()), plans)
    return Prediction(sc, curves, spec.tau, max_off, max_on, crossings)
