"""Adaptive verification: draft until confidence runs out, verify only what is worth it at this load.

The draft reports a confidence c_j for each token it proposes; for a calibrated draft the target
accepts that token with probability c_j, so the probability that the first j drafts all survive is
the cumulative product S_j = c_1 ... c_j (DSpark's "cumulative confidence"). Confidences are drawn
per position from Beta distributions whose means are the acceptance model's conditional rates and
whose concentration `kappa` sets how informative confidence is (small kappa: confident and hopeless
tokens are easy to tell apart; large kappa: every token looks average, and adaptivity gains nothing).

Two rules, as engines apply them:
- threshold: a sequence stops drafting at the first j with S_j < threshold (EAGLE-2-style);
- load budget (DSpark): at batch b the engine verifies the B drafted tokens of highest S_j across
  the whole batch, B chosen to maximise expected tokens per second,
  (b + sum of the top-B S_j) / (draft time + verify time at b + B tokens) (vLLM DSpark blog).
With threshold 0 and no budget every sequence verifies k_max drafts: exactly fixed k = k_max.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..model.scenario import Scenario
from ..errors import CrossoverError
from ..model.step import StepModel


@dataclass
class AdaptiveResult:
    """Per batch: output tokens/s, mean verified drafts per sequence, tokens per step (tau)."""

    batch: np.ndarray
    tokens_per_s: np.ndarray
    verified_drafts: np.ndarray
    tau: np.ndarray


def cumulative_confidence(sc: Scenario, k_max: int, kappa: float, samples: int, seed: int) -> np.ndarray:
    """(samples, k_max) draws of S_j = c_1 ... c_j."""
    if kappa <= 0:
        raise CrossoverError(f"confidence concentration must be > 0 (got {kappa:g})")
    cond = np.clip(sc.speculation.acceptance.conditional(k_max), 1e-6, 1 - 1e-6)  # Beta needs (0, 1)
    rng = np.random.default_rng(seed)
    c = rng.beta(kappa * cond, kappa * (1.0 - cond), size=(samples, k_max))
    return np.cumprod(c, axis=1)


def adaptive_throughput(sc: Scenario, batches, k_max: int, *, threshold: float = 0.0, kappa: float = 2.0,
                        load_budget: bool = True, samples: int = 4096, seed: int = 0) -> AdaptiveResult:
    """Throughput of adaptive verification at each batch (draft forwards: k_max sequential passes)."""
    if not 0.0 <= threshold < 1.0:
        raise CrossoverError(f"confidence threshold must lie in [0, 1) (got {threshold:g})")
    if sc.speculation.tree is not None or sc.speculation.method == "ngram":
        raise CrossoverError("adaptive verification applies to chain drafts (draft, eagle, eagle3, medusa, mtp)")
    b = np.asarray(batches, float)
    s = cumulative_confidence(sc, k_max, kappa, samples, seed)
    s = np.where(s >= threshold, s, 0.0)
    s = np.where(np.cumsum(s == 0.0, axis=1) > 0, 0.0, s)  # drafting stopped at the first miss
    drafted = (s > 0).sum(axis=1).astype(float)
    spec = replace(sc.speculation, k=k_max)
    model = StepModel.of(sc.deployment, spec)
    passes = model.draft_passes(b, sc.context, spec)  # k_max sequential draft passes
    if not load_budget:
        if threshold == 0.0:  # every draft verified: exact expectations, E[c_1...c_j] = survival_j
            w, tau = float(k_max), 1.0 + float(sc.speculation.acceptance.survival(k_max).sum())
        else:
            w, tau = float(drafted.mean()), 1.0 + float(s.sum(axis=1).mean())
        step = model.price(model.decode(b, sc.context, spec, width=1.0 + w, passes=passes)).total
        return AdaptiveResult(b, b * tau / step, np.full_like(b, w), np.full_like(b, tau))
    # Budget: the population of candidate S_j, best first; the top share f of them, per sequence.
    pool = np.sort(s[s > 0])[::-1]
    cum = np.concatenate([[0.0], np.cumsum(pool)]) / samples  # expected accepted per sequence, top m/samples
    grid = np.linspace(0.0, pool.size / samples, 64)  # verified drafts per sequence
    acc = np.interp(grid * samples, np.arange(cum.size), cum)
    best_t = np.zeros_like(b)
    best_w = np.zeros_like(b)
    best_tau = np.zeros_like(b)
    # every batch (rows) against every verified share (columns) in one pricing
    col = b[:, None]
    steps = model.price(model.decode(col, sc.context, spec, width=1.0 + grid[None, :],
                                     passes=model.draft_passes(col, sc.context, spec))).total
    for i, bi in enumerate(b):
        step = steps[i]
        tput = bi * (1.0 + acc) / step
        j = int(np.argmax(tput))
        best_t[i], best_w[i], best_tau[i] = tput[j], grid[j], 1.0 + acc[j]
    return AdaptiveResult(b, best_t, best_w, best_tau)
