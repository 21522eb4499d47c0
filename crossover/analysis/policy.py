"""Speculation policy: the best k at each load, as a schedule (engines.py writes the engine configs)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..model.scenario import Scenario
from .curves import evaluate
from ..errors import CrossoverError
from ..model.speculation import MAX_K


@dataclass
class Policy:
    """Throughput of every k (0 = speculation off) at every batch, and the best k."""

    scenario: Scenario
    batches: np.ndarray  # integer batches 1..b_max
    ks: list[int]
    tput: np.ndarray  # (len(ks), len(batches)) output tokens/s
    configured_k: int
    schedule: list[dict[str, int]] = field(default_factory=list)

    @property
    def best_k(self) -> np.ndarray:
        """The k of highest throughput at each batch (ties: the smaller k)."""
        return np.asarray(self.ks)[np.argmax(self.tput, axis=0)]

    @property
    def best_tput(self) -> np.ndarray:
        """Output tokens/s when following the schedule."""
        return self.tput.max(axis=0)

    @property
    def off_ranges(self) -> list[tuple[int, int]]:
        """The batch ranges (inclusive) where speculation does not pay (best k 0). Usually one, to the end
        of the range; more where it pays again beyond a CUDA-graph limit (both servers outside their
        graphs: the speculating one, with fewer steps per token, pays that host time less often)."""
        return [(r["batch_min"], r["batch_max"]) for r in ranges(self.batches, self.best_k) if r["k"] == 0]

    @property
    def speculate_below_batch(self) -> int | None:
        """The first batch where speculation stops paying (None: it pays at every batch; 1: not even at
        batch 1); `off_ranges` says whether it pays again above it."""
        off = self.off_ranges
        return off[0][0] if off else None

    def gains(self) -> dict[str, float]:
        """Schedule throughput over always-on (configured k) and always-off, across the batch range."""
        best = self.best_tput
        on = self.tput[self.ks.index(self.configured_k)]
        off = self.tput[0]
        return {
            "mean_gain_over_always_on": float(np.mean(best / on)),
            "max_gain_over_always_on": float(np.max(best / on)),
            "mean_gain_over_always_off": float(np.mean(best / off)),
            "max_gain_over_always_off": float(np.max(best / off)),
        }


def dynamic_sd_throughput(pol: Policy) -> np.ndarray | None:
    """Output tokens/s following the schedule on one vLLM V1 server that runs it as Dynamic SD
    (num_speculative_tokens_per_batch_size), which on vLLM's model runner V1 runs every step with
    PIECEWISE CUDA graphs (attention outside the graph; vllm issue #49548: 59.6 -> 50.0 tok/s single
    stream): each batch at its k with both steps piecewise, k = 0 batches as plain decodes of that
    server. None where the engine is not vLLM V1 running full graphs (nothing changes there)."""
    sc = pol.scenario
    engine = sc.deployment.engine
    if engine.framework != "vllm" or engine.verify_layout != "multi_query" or not engine.full_graphs:
        return None
    pw = sc.with_engine(engine.configured(cuda_graphs="piecewise"))
    b = pol.batches.astype(float)
    out = np.empty_like(b)
    for k in sorted({int(x) for x in pol.best_k}):
        at = pol.best_k == k
        c = evaluate(Scenario(pw.deployment, sc.speculation.with_k(max(k, 1)), sc.context, sc.prompt_len,
                              sc.output_len), b[at])
        out[at] = c.tokens_per_s_off if k == 0 else c.tokens_per_s_on
    return out


def best_k_policy(sc: Scenario, b_max: int, k_max: int) -> Policy:
    """Throughput of k = 0..k_max at every integer batch 1..b_max; the schedule of the best k."""
    if not 1 <= k_max <= MAX_K:
        raise CrossoverError(f"--k-max must be in 1..{MAX_K} (got {k_max})")
    if b_max < 1:
        raise CrossoverError(f"the batch range must reach at least 1 (got {b_max})")
    acc = sc.speculation.acceptance
    if acc.kind == "per_position" and k_max > len(acc.value):  # type: ignore[arg-type]
        raise CrossoverError(f"--k-max {k_max} exceeds the {len(acc.value)} per-position rates given")  # type: ignore[arg-type]
    b = np.arange(1, b_max + 1, dtype=float)
    rows = []
    for k in range(1, k_max + 1):
        s = Scenario(sc.deployment, sc.speculation.with_k(k), sc.context, sc.prompt_len, sc.output_len)
        c = evaluate(s, b)
        if k == 1:
            rows.append(c.tokens_per_s_off)
        rows.append(c.tokens_per_s_on)
    pol = Policy(sc, b.astype(int), list(range(0, k_max + 1)), np.vstack(rows), min(sc.speculation.k, k_max))
    pol.schedule = ranges(pol.batches, pol.best_k)
    return pol


def ranges(batches: np.ndarray, ks: np.ndarray) -> list[dict[str, int]]:
    """Contiguous batch ranges of equal k: [{batch_min, batch_max, k}, ...]."""
    out: list[dict[str, int]] = []
    for bt, k in zip(batches, ks):
        if out and out[-1]["k"] == int(k):
            out[-1]["batch_max"] = int(bt)
        else:
            out.append({"batch_min": int(bt), "batch_max": int(bt), "k": int(k)})
    return out


def running_context(prompt: np.ndarray, output: np.ndarray) -> float:
    """The mean context of the sequences a serving engine is running, for requests of these lengths.

    A request stays in the running batch for about as many steps as it has output tokens, and its
    context averages prompt + output / 2 over that time, so the running batch is length-biased: its
    mean context is E[(P + O/2) O] / E[O], not E[P] + E[O]/2. With spread output lengths (ShareGPT's
    lognormal) the long requests dominate the batch, and pricing the decode at the unbiased mean
    under-reads the KV cache (~420 vs ~320 tokens for sharegpt), which puts the closed form's
    crossover too early against the simulator's.
    """
    p, o = np.asarray(prompt, float), np.asarray(output, float)
    return float(np.mean((p + o / 2.0) * o) / np.mean(o))


def routing_policy(sc: Scenario, prompt: np.ndarray, output: np.ndarray, b_max: int, k_max: int | None = None) -> Policy:
    """The best-k schedule a serving engine routes by, as the simulator runs one: `batch` is the
    running batch (requests in flight, prefilling ones included) and decodes are priced at the running
    batch's mean context (`running_context` of the requests' lengths). k = 0 is plain decode: a routed
    server's draft reads nothing while it is off and catches up on its sequences' new tokens when
    speculation resumes (the simulator prices that read; the closed form leaves it out, a cost paid
    only at switches).

    Without the running context, the closed form at sharegpt's mean lengths switched an EAGLE arm off
    at batch 117 while the simulator's steady state still measured speculation ahead up to ~135.
    """
    k_max = sc.speculation.k if k_max is None else k_max
    if not sc.mixed:
        return best_k_policy(sc, b_max, k_max)
    return best_k_policy(replace(sc, context=running_context(prompt, output)), b_max, k_max)
