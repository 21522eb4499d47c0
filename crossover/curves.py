"""Throughput with speculation off and on over batch, the speedup, and where the curves cross."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from . import memory
from .crossings import EQUAL_RTOL, LevelCrossings, crossing_between_levels, level_crossings  # noqa: F401 - API
from .errors import CrossoverError
from .specs.deployment import Deployment
from .speculation import Speculation
from .step import Mix, StepModel

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
    tp_auto: bool = False  # the TP was chosen automatically (the smallest that holds enough sequences)

    def __post_init__(self) -> None:
        if (self.prompt_len is None) != (self.output_len is None):
            raise CrossoverError("give both prompt and output lengths, or neither")
        if self.prompt_len is not None and (self.prompt_len < 1 or self.output_len < 1):  # type: ignore[operator]
            raise CrossoverError(f"prompt and output lengths must be >= 1 token (got {self.prompt_len:g}, "
                                 f"{self.output_len:g})")
        pads = self.speculation.method == "ngram" and self.deployment.engine.ngram_miss == "padded"
        if self.speculation.pad_misses != pads:  # the engine decides how n-gram misses are verified
            object.__setattr__(self, "speculation", replace(self.speculation, pad_misses=pads))

    @property
    def held_tokens(self) -> float:
        """Tokens each sequence's KV cache holds at its longest: the whole prompt + output when the
        lengths are given, else the context."""
        return self.prompt_len + self.output_len if self.mixed else self.context  # type: ignore[operator]

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
        r = np.minimum(b * y / o_len, b)
        lo = np.floor(r)
        frac = r - lo
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
    mix = model.decode(flat, sc.context, spec, width=np.repeat([1.0, spec.verify_width], n))
    both = model.price(Mix(mix.target, np.concatenate([np.zeros(n), b.ravel()]), mix.draft_passes,
                           uniform=np.concatenate([np.ones(n, bool), np.full(n, model.uniform_verify(spec))]),
                           sequences=flat))
    off, on = both.total[:n].reshape(b.shape), both.total[n:].reshape(b.shape)
    draft, verify = both.draft[n:].reshape(b.shape), both.verify[n:].reshape(b.shape)
    return Curves(b, off, on, draft, verify, b / off, b * spec.tau / on)


def speedup(sc: Scenario, batch, model: StepModel | None = None) -> np.ndarray:
    """Throughput ratio on / off at each batch."""
    return evaluate(sc, batch, model).speedup


@dataclass
class Crossing:
    """A batch where speedup passes through 1: 'down' (speculation stops paying) or 'up'."""

    batch: float
    direction: Literal["down", "up"]


def find_crossings(sc: Scenario, b_max: float, model: StepModel | None = None, grid: int = 48, rounds: int = 1,
                   width: int = 32) -> list[Crossing]:
    """Roots of speedup(batch) = 1 on [1, b_max]: bracketed on a log grid, refined by vectorised bisection.

    One round of 32 points narrows each grid bracket to ~0.4% of the batch; the final secant step on
    the smooth curve then lands within ~1e-5 of the root (measured against two rounds: <= 9e-6
    relative), one curve evaluation fewer."""
    if b_max <= 1:
        return []
    model = model or StepModel.of(sc.deployment, sc.speculation)
    xs = np.geomspace(1.0, b_max, grid)
    f = speedup(sc, xs, model) - 1.0
    idx = np.nonzero(np.signbit(f[:-1]) != np.signbit(f[1:]))[0]
    if idx.size == 0:
        return []
    lo, hi = xs[idx], xs[idx + 1]
    flo = f[idx]
    for _ in range(rounds):  # each round narrows every bracket `width - 1` fold in one call
        pts = np.linspace(lo, hi, width).T  # (n_brackets, width)
        fv = (speedup(sc, pts.ravel(), model) - 1.0).reshape(pts.shape)
        sign_change = np.signbit(fv[:, :-1]) != np.signbit(fv[:, 1:])
        j = np.argmax(sign_change, axis=1)
        rows = np.arange(len(lo))
        lo, hi, flo = pts[rows, j], pts[rows, j + 1], fv[rows, j]
    fhi = speedup(sc, hi, model) - 1.0
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
    """(weights per GPU, KV bytes per sequence per GPU) the scenario's speculation adds, each
    sequence holding its whole prompt + output (or the context)."""
    return sc.speculation.memory(sc.deployment, sc.held_tokens)


def memory_limits(sc: Scenario) -> tuple[int, int]:
    """The largest batch without and with speculation (its draft's weights and KV cache), each
    request's KV held at its longest; a one-line error when not one sequence fits."""
    dep, peak = sc.deployment, sc.held_tokens
    memory.check_fits(dep, peak)
    w, kv = draft_memory(sc)
    return (memory.max_batch(dep, peak, slack_tokens=1),
            memory.max_batch(dep, peak, extra_weights_per_gpu=w, extra_kv_per_seq_per_gpu=kv,
                             slack_tokens=sc.speculation.k + 1))


def predict(sc: Scenario, batches=DEFAULT_BATCHES) -> Prediction:
    """Curves at `batches`, the crossover root on [1, max(batches)], and the memory limits."""
    b = np.asarray(batches, float)
    dep, spec = sc.deployment, sc.speculation
    max_off, max_on = memory_limits(sc)
    model = StepModel.of(dep, spec)
    curves = evaluate(sc, b, model)
    crossings = find_crossings(sc, float(b.max()), model)
    return Prediction(sc, curves, spec.tau, max_off, max_on, crossings)
