"""Throughput with speculation off and on over batch, the speedup, and where the curves cross."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from . import memory
from .errors import CrossoverError
from .ops import model_ops
from .roofline import Plan, engine_step, target_plan
from .specs.deployment import Deployment
from .speculation import Speculation

Regime = Literal["crosses", "always_faster", "never_faster"]
DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


@dataclass(frozen=True)
class Scenario:
    """What to predict: a deployment, a speculation method and the context length (tokens in cache).

    With `prompt_len` and `output_len` (means, tokens) the curves carry the prefill share too: every
    step also prefills the prompts of the requests that replace the finished ones, and `batch` is the
    number of requests in flight (the concurrency). Without them, every step is pure decode.
    """

    deployment: Deployment
    speculation: Speculation
    context: float = 2048.0
    prompt_len: float | None = None
    output_len: float | None = None

    def __post_init__(self) -> None:
        if (self.prompt_len is None) != (self.output_len is None):
            raise CrossoverError("give both prompt and output lengths, or neither")
        if self.prompt_len is not None and (self.prompt_len < 1 or self.output_len < 1):  # type: ignore[operator]
            raise CrossoverError(f"prompt and output lengths must be >= 1 token (got {self.prompt_len:g}, "
                                 f"{self.output_len:g})")

    @property
    def mixed(self) -> bool:
        """Whether the prefill/decode mix is modelled."""
        return self.prompt_len is not None


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


@dataclass(frozen=True)
class Plans:
    """The compiled target and draft op lists of a scenario, built once per prediction."""

    target: Plan
    draft: Plan | None

    @classmethod
    def of(cls, sc: Scenario) -> "Plans":
        """Compile the scenario's forwards."""
        return cls(target_plan(sc.deployment), sc.speculation.draft_plan(sc.deployment))


def _mixed_forward(plan: Plan, dec: np.ndarray, q: float, ctx: float, prompts: np.ndarray, p_len: float,
                   window_cap: float | None = None) -> np.ndarray:
    """Seconds of one forward: `dec` sequences at width q over `ctx` cached tokens plus `prompts`
    whole prompts of `p_len` tokens prefilled in the same step (causal attention within each)."""
    w = plan.window[:, None]
    c = ctx if window_cap is None else min(ctx, window_cap)
    pc = p_len if window_cap is None else min(p_len, window_cap)
    kv = dec * np.minimum(c + q, w) + prompts * np.minimum(pc, w)
    qk = dec * q * np.minimum(c + (q + 1.0) / 2.0, w) + prompts * p_len * np.minimum((pc + 1.0) / 2.0, w)
    # logits at every decode/verify position and at each prompt's last position only
    return plan.from_sums(dec * q + prompts * p_len, kv, qk, sampled=dec * q + prompts).total


def _mixed_curves(sc: Scenario, b: np.ndarray, plans: Plans) -> Curves:
    """Closed form with the prefill share: prompts arrive in whole-prompt lumps, as an engine with
    chunked prefill schedules them when a prompt fits the step's token budget.

    At `batch` requests in flight yielding y tokens per step each, r = batch y / output_len requests
    finish (and new prompts are prefilled) per step; a step carries floor(r) or ceil(r) prompts
    (fraction r - floor(r) of the steps the higher). A request spends one prefill step (its first
    token) and (output_len - 1) / y decode steps: throughput = batch x output_len / that time.
    Speculation speeds up only the decode part (Amdahl), and the prompts in a step spend FLOPs that
    verification would have used.
    """
    dep, spec = sc.deployment, sc.speculation
    eff = dep.efficiency
    p_len, o_len = float(sc.prompt_len), float(sc.output_len)  # type: ignore[arg-type]
    ctx = sc.context
    budget = spec.draft_kv_budget

    def arm(y: float, width: float, speculate: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r = np.minimum(b * y / o_len, b)
        lo = np.floor(r)
        frac = r - lo
        # steps carrying floor(r) and ceil(r) prompts, evaluated together in one pass
        n = np.concatenate([lo, lo + 1.0])
        bb = np.concatenate([b, b])
        dec = np.maximum(bb - n, 0.0)
        verify = _mixed_forward(plans.target, dec, width, ctx, n, p_len) + eff.step_overhead_s
        draft = np.zeros_like(bb)
        if speculate:
            if plans.draft is not None:
                passes = np.zeros_like(bb)
                for w in sorted(set(spec.draft_pass_widths)):  # chains: k passes of width 1
                    one = _mixed_forward(plans.draft, dec, float(w), ctx, np.zeros_like(n), p_len, budget)
                    passes = passes + spec.draft_pass_widths.count(w) * (one + eff.draft_step_overhead_s)
                draft = np.where(dec > 0, passes, 0.0)
                if spec.method not in ("ngram", "medusa"):  # the draft reads the prompts too
                    pre = _mixed_forward(plans.draft, np.zeros_like(n), 1.0, 0.0, n, p_len, budget)
                    draft = draft + np.where(n > 0, pre - plans.draft.overhead_s, 0.0)
            draft = draft + np.where(dec > 0, eff.spec_overhead_s + dec * eff.spec_overhead_per_seq_s, 0.0)
        t = verify + draft
        m = b.size
        t_lo, t_hi = t[:m], t[m:]
        mean = (1.0 - frac) * t_lo + frac * t_hi
        prefill_step = np.where(lo >= 1, t_lo, t_hi)  # a step that carries at least one prompt
        e2e = prefill_step + (o_len - 1.0) / y * mean
        tput = b * o_len / e2e
        return (mean, (1.0 - frac) * draft[:m] + frac * draft[m:], (1.0 - frac) * verify[:m] + frac * verify[m:],
                tput, 0.5 * mean + prefill_step)

    off, _, _, tput_off, ttft_off = arm(1.0, 1.0, False)
    on, draft, verify, tput_on, ttft_on = arm(spec.tau, spec.verify_width, True)
    return Curves(b, off, on, draft, verify, tput_off, tput_on, ttft_off, ttft_on)


def evaluate(sc: Scenario, batch, plans: Plans | None = None) -> Curves:
    """Step times and throughputs off and on at each batch (fractional batches: the curve is continuous)."""
    plans = plans or Plans.of(sc)
    dep, spec = sc.deployment, sc.speculation
    b = np.asarray(batch, float)
    if sc.mixed:
        return _mixed_curves(sc, b, plans)
    n = b.size
    # Decode (q = 1) and verify (q = k + 1) of the same batches in one pass over the target's ops.
    both = engine_step(plans.target, dep, np.concatenate([b.ravel(), b.ravel()]),
                       np.repeat([1.0, spec.verify_width], n), sc.context).total
    off, verify = both[:n].reshape(b.shape), both[n:].reshape(b.shape)
    draft = spec.draft_time(dep, b, sc.context, plans.draft).total
    eff = dep.efficiency
    on = draft + verify + eff.spec_overhead_s + b * eff.spec_overhead_per_seq_s
    return Curves(b, off, on, np.broadcast_to(draft, b.shape), verify, b / off, b * spec.tau / on)


def speedup(sc: Scenario, batch, plans: Plans | None = None) -> np.ndarray:
    """Throughput ratio on / off at each batch."""
    return evaluate(sc, batch, plans).speedup


@dataclass
class Crossing:
    """A batch where speedup passes through 1: 'down' (speculation stops paying) or 'up'."""

    batch: float
    direction: Literal["down", "up"]


def find_crossings(sc: Scenario, b_max: float, plans: Plans | None = None, grid: int = 48, rounds: int = 1,
                   width: int = 32) -> list[Crossing]:
    """Roots of speedup(batch) = 1 on [1, b_max]: bracketed on a log grid, refined by vectorised bisection.

    One round of 32 points narrows each grid bracket to ~0.4% of the batch; the final secant step on
    the smooth curve then lands within ~1e-5 of the root (measured against two rounds: <= 9e-6
    relative), one curve evaluation fewer."""
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


def crossing_between_levels(loads, ratios) -> float | None:
    """First load where a measured or simulated ratio passes through 1, interpolated linearly in
    log(load) between the two bracketing levels; None when no pair of levels brackets 1."""
    x = np.asarray(loads, float)
    r = np.asarray(ratios, float) - 1.0
    for i in range(len(r)):
        if r[i] == 0:
            return float(x[i])
        if i + 1 < len(r) and np.sign(r[i]) != np.sign(r[i + 1]) and r[i + 1] != 0:
            lx = np.log(x[i]) + (np.log(x[i + 1]) - np.log(x[i])) * r[i] / (r[i] - r[i + 1])
            return float(np.exp(lx))
    return None


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
    held = sc.prompt_len + sc.output_len if sc.mixed else sc.context  # type: ignore[operator]
    length = held + spec.k + 1
    draft_length = length if spec.draft_kv_budget is None else min(held, spec.draft_kv_budget) + spec.k + 1
    if spec.method == "draft":
        d = spec.draft_deployment(dep)
        ops = model_ops(d.model, d.wdtype, d.tp)
        # The draft is sharded over its own TP; its share per target GPU assumes draft_tp <= tp.
        scale = d.tp / dep.tp
        # self-speculation drafts with the target's own weights: only its (budgeted) KV cache is extra
        shared = d.model == dep.model and d.tp == dep.tp
        return (0.0 if shared else memory.weight_bytes_per_gpu(d, ops) * scale,
                memory.kv_bytes_per_seq_per_gpu(d, ops, draft_length) * scale)
    ops = spec.draft_ops(dep)
    if not ops:
        return 0.0, 0.0
    # EAGLE and MTP drafts share the target's LM head; each other op is held at its own dtype
    # (an fp8 model's MTP layer is fp8, EAGLE heads are bf16)
    own = [op for op in ops if not (op.name in ("draft_lm_head", "lm_head") and spec.method in ("eagle", "mtp"))]
    return memory.op_weight_bytes(own, dep.tp), memory.kv_bytes_per_seq_per_gpu(dep, ops, draft_length)


def predict(sc: Scenario, batches=DEFAULT_BATCHES) -> Prediction:
    """Curves at `batches`, the crossover root on [1, max(batches)], and the memory limits."""
    b = np.asarray(batches, float)
    dep, spec = sc.deployment, sc.speculation
    plans = Plans.of(sc)
    curves = evaluate(sc, b, plans)
    # Memory holds each request's KV at its longest: the whole prompt + output when those are given.
    peak = sc.prompt_len + sc.output_len if sc.mixed else sc.context  # type: ignore[operator]
    max_off = memory.max_batch(dep, peak, slack_tokens=1)
    w, kv = draft_memory(sc)
    max_on = memory.max_batch(dep, peak, extra_weights_per_gpu=w, extra_kv_per_seq_per_gpu=kv,
                              slack_tokens=spec.k + 1)
    crossings = find_crossings(sc, float(b.max()), plans)
    return Prediction(sc, curves, spec.tau, max_off, max_on, crossings)
