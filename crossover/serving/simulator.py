"""A discrete-event simulation of a continuous-batching engine (vLLM-style scheduler).

Each engine step: running sequences that finished their prompt decode (q = 1) or verify (q = k+1,
ragged for n-gram), and the leftover token budget prefills waiting prompts in chunks that share the
step (chunked prefill). The step's time is the roofline cost of exactly that mix (the same compiled
op lists as `crossover predict`), plus the draft forwards and overheads when speculation is on.
Sequences accept a random number of drafts per step (seeded numpy Generator), so acceptance is
ragged across the batch. Admission reserves a request's whole KV footprint (prompt + output), so
the engine never preempts; a request waits while the KV cache or max_num_seqs is full.

Steps where nothing but decoding can happen (no prefill pending, nothing admissible before the next
arrival or completion) are simulated as one vectorised segment: acceptance draws, contexts and step
times for up to SEGMENT steps at once. That keeps a 1,000-request level at well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..curves import Scenario
from ..errors import CrossoverError
from ..step import Forward, Mix, StepModel, ragged
from .engine import EngineLimits

SEGMENT = 256  # most decode-only steps simulated in one vectorised block


@dataclass
class Arm:
    """One server configuration: the scenario and whether speculation is on.

    With a `schedule` (k per running batch: schedule[b - 1]; batches past its end use the last
    entry) the arm routes by load step by step, as vLLM's dynamic speculation does.
    """

    scenario: Scenario
    speculate: bool
    schedule: np.ndarray | None = None


@dataclass(frozen=True)
class _Mode:
    """What one engine step does at a given k (0: plain decode)."""

    on: bool
    k: int
    model: StepModel
    surv: np.ndarray
    match: float
    width: float
    draft_forwards: int
    pass_widths: tuple[int, ...]

    @property
    def surv_ascending(self) -> np.ndarray:
        """The survival probabilities in increasing order (for a search per draw)."""
        return self.surv[::-1]


def _mode(dep, spec, k: int) -> _Mode:
    if k <= 0:
        return _Mode(False, 0, StepModel.of(dep, spec), np.zeros(0), 1.0, 1.0, 0, ())
    if k != spec.k:
        spec = spec.with_k(k)
    return _Mode(True, k, StepModel.of(dep, spec), spec.survival, spec.acceptance.match_rate, spec.verify_width, spec.draft_forwards,
                 spec.draft_pass_widths)


@dataclass
class RunLog:
    """What a benchmark client would see, per request and per engine step."""

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    step_end: list[np.ndarray]  # end times of steps (blocks of arrays)
    step_tokens: list[np.ndarray]  # output tokens emitted in each step
    step_prefill: list[np.ndarray]  # prompt tokens processed in each step
    itl_values: list[np.ndarray]  # inter-token (chunk) gaps of measured requests, seconds
    itl_counts: list[np.ndarray]  # how many measured requests saw each gap
    drafts_proposed: float = 0.0
    drafts_accepted: float = 0.0
    verify_steps: float = 0.0


def _first_step_only(work: Forward, steps: int) -> Forward:
    """A forward that runs in the first of `steps` steps and not in the others."""
    tokens = np.zeros(steps, np.int64)
    tokens[0] = work.tokens
    sampled = np.zeros(steps, np.int64)
    sampled[0] = work.sampled
    kv = np.zeros((len(work.kv), steps))
    kv[:, 0] = work.kv
    qk = np.zeros_like(kv)
    qk[:, 0] = work.qk
    return Forward(tokens, kv, qk, sampled)


def arrivals_poisson(rng: np.random.Generator, n: int, rate: float, burstiness: float = 1.0) -> np.ndarray:
    """Arrival times (s) of `n` requests at `rate` req/s; gamma inter-arrivals (shape = burstiness, 1 = Poisson)."""
    if rate <= 0 or burstiness <= 0:
        raise CrossoverError("request rate and burstiness must be > 0")
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def simulate(arm: Arm, prompt: np.ndarray, output: np.ndarray, rng: np.random.Generator, *,
             concurrency: int | None = None, arrival: np.ndarray | None = None,
             limits: EngineLimits = EngineLimits(), kv_capacity: float = np.inf, measure_from: int = 0,
             stagger_s: float = 0.0) -> RunLog:
    """Run `len(prompt)` requests closed-loop at `concurrency`, or open-loop at the given arrival times.

    Closed-loop clients send their first requests spread evenly over `stagger_s` seconds (0: all at
    once); with equal lengths, clients that start together stay in lock-step waves forever.
    Inter-token gaps are recorded for requests with index >= `measure_from` (warm-up excluded).
    """
    n = len(prompt)
    closed = concurrency is not None
    if closed:
        arr = np.full(n, np.inf)
        c0 = min(concurrency, n)  # type: ignore[type-var]
        arr[:c0] = np.arange(c0) * (stagger_s / c0)
    else:
        assert arrival is not None
        arr = np.asarray(arrival, float).copy()
    sc = arm.scenario
    dep, spec = sc.deployment, sc.speculation
    speculate = arm.speculate
    schedule = arm.schedule if speculate else None
    modes: dict[int, _Mode] = {}

    def mode_for(batch: int) -> _Mode:
        kk = (spec.k if speculate else 0) if schedule is None else int(schedule[min(batch, len(schedule)) - 1])
        if kk not in modes:
            modes[kk] = _mode(dep, spec, kk)
        return modes[kk]

    k = spec.k if speculate else 0
    draft_budget = spec.draft_kv_budget
    draft_prefills = speculate and spec.method not in ("ngram", "medusa")
    max_tokens = limits.max_num_batched_tokens
    need = (prompt + output + (np.ceil(spec.verify_width) if speculate else 1.0)).astype(float)
    if need.max() > kv_capacity:
        raise CrossoverError(
            f"a request of {int(need.max())} tokens does not fit in the KV cache ({int(kv_capacity)} tokens); "
            f"use a larger --tp or shorter lengths")
    log = RunLog(arr, prompt.astype(float), output.astype(float), np.full(n, np.nan), np.full(n, np.nan),
                 [], [], [], [], [])
    base = StepModel.of(dep, spec)
    has_draft = speculate and base.draft is not None

    # running state (parallel arrays, admission order)
    rid = np.zeros(0, dtype=np.int64)
    ctx = np.zeros(0)
    pre_left = np.zeros(0)
    remaining = np.zeros(0)
    last_t = np.zeros(0)
    kv_used = 0.0
    now = 0.0
    next_req = 0  # requests are admitted in index order (FIFO)
    issued = min(concurrency, n) if closed else n  # type: ignore[type-var]
    done = 0

    def draft_ctx(c: np.ndarray) -> np.ndarray:
        return np.minimum(c, draft_budget) if draft_budget is not None else c

    def draws(md: _Mode, steps: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(verify width, tokens emitted) per step and decoding sequence."""
        if not md.on:
            return np.ones((steps, m)), np.ones((steps, m))
        # drafts accepted = how many survival probabilities (decreasing) exceed one uniform draw
        acc = (md.k - np.searchsorted(md.surv_ascending, rng.random((steps, m)), side="right")).astype(float)
        if md.match < 1.0:
            matched = rng.random((steps, m)) < md.match
            return 1.0 + md.k * matched, 1.0 + acc * matched
        return np.full((steps, m), md.width), 1.0 + acc  # trees: all nodes verified, the path accepted

    while done < n:
        # ---- admission, FIFO, while sequences, KV and arrivals allow
        start = next_req
        while (next_req < issued and arr[next_req] <= now + 1e-15 and len(rid) + next_req - start < limits.max_num_seqs
               and kv_used + need[next_req] <= kv_capacity):
            kv_used += need[next_req]
            next_req += 1
        if next_req > start:
            new = np.arange(start, next_req)
            rid = np.concatenate([rid, new])
            ctx = np.concatenate([ctx, np.zeros(len(new))])
            pre_left = np.concatenate([pre_left, prompt[new].astype(float)])
            remaining = np.concatenate([remaining, output[new].astype(float)])
            last_t = np.concatenate([last_t, np.full(len(new), np.nan)])
        m = len(rid)
        if m == 0:
            if next_req >= issued:
                raise RuntimeError("simulation stalled")  # pragma: no cover - guarded by the fit check
            now = max(now, arr[next_req])
            continue

        decoding = pre_left == 0
        nd = int(decoding.sum())
        md = mode_for(m)  # k for this block (a schedule routes by the running batch)
        # ---- this step's prefill chunks: the token budget left after decodes/verifies, in FIFO order
        budget = max(max_tokens - nd * md.width, 0.0)
        pre_idx = np.nonzero(~decoding)[0]
        if len(pre_idx):
            left = pre_left[pre_idx]
            chunk = np.clip(budget - (np.cumsum(left) - left), 0.0, left)
            if nd == 0 and chunk.sum() == 0:
                chunk[0] = min(left[0], max_tokens)  # a prompt longer than the budget still progresses
            simple = bool(np.all(chunk == left))  # every pending prompt finishes prefill this step
        else:
            left = chunk = np.zeros(0)
            simple = True
        next_arrival = arr[next_req] if next_req < issued else np.inf
        admissible = (next_req < issued and m < limits.max_num_seqs and kv_used + need[next_req] <= kv_capacity)

        # A block of steps: step 0 runs decodes plus all prefill chunks; from step 1 every sequence
        # decodes. It ends at the first completion, the SEGMENT cap, or the step running when the next
        # admissible request arrives. With prefill left over, the block is that one step.
        horizon = int(min(SEGMENT, remaining.min())) if simple else 1
        if len(pre_idx):
            horizon = max(horizon, 1)
        q, emit = draws(md, horizon, m)
        prefilling = ~decoding
        adv = emit.copy()  # context advance per step
        if len(pre_idx):
            q[0, pre_idx] = chunk  # prefilling sequences process their chunk, emit nothing ...
            emit[0, pre_idx] = 0.0
            adv[0, pre_idx] = chunk
            first = pre_idx[chunk == left]
            emit[0, first] = 1.0  # ... except the first token, sampled when a prompt's last chunk runs
        else:
            first = pre_idx
        cum = np.cumsum(emit, axis=0)
        fin_any = (cum >= remaining).any(axis=1)
        steps = int(np.argmax(fin_any)) + 1 if fin_any.any() else horizon
        q, emit, adv, cum = q[:steps], emit[:steps], adv[:steps], cum[:steps]
        emit = np.maximum(np.minimum(emit, remaining - (cum - emit)), 0.0)  # no tokens past the output length
        ctx_t = ctx + (np.cumsum(adv, axis=0) - adv)  # context at the start of each step
        live = q > 0
        sampled = q.sum(axis=1)
        if len(pre_idx):  # a prompt chunk needs logits only when it is the prompt's last
            sampled[0] = q[0, decoding].sum() + len(first)
        # a prompt waiting for budget attends nothing this step
        target_work = ragged(md.model.target, np.where(live, q, 0.0), np.where(live, ctx_t, -q),
                             sampled=sampled.astype(np.int64))
        verifying: np.ndarray | float = 0.0
        passes: tuple = ()
        if md.on:
            n_dec = np.full(steps, float(m))
            n_dec[0] = nd
            if len(pre_idx):
                dec = np.ones((steps, m))
                dec[0, prefilling] = 0.0
                dec_ctx = np.where(dec > 0, draft_ctx(ctx_t), 0.0)  # q = 0 there: attends nothing
                proposed = np.where(dec > 0, q - 1.0, 0.0)
            else:
                dec, dec_ctx, proposed = None, draft_ctx(ctx_t), q - 1.0
            verifying = n_dec
            if md.model.draft is not None and md.draft_forwards:
                ones = np.ones((steps, m)) if dec is None else dec
                passes = tuple((md.pass_widths.count(w), ragged(md.model.draft, ones * w, dec_ctx,
                                                                 tokens=(n_dec * w).astype(np.int64)))
                               for w in sorted(set(md.pass_widths)))  # chains: k passes of width 1; trees widen
            accepted = np.minimum(emit - 1.0, proposed).clip(0)
            log.drafts_proposed += float(proposed.sum())
            log.drafts_accepted += float(accepted.sum() if dec is None else accepted[dec > 0].sum())
            log.verify_steps += float(n_dec.sum())
        prefill = None
        if has_draft and draft_prefills and len(pre_idx) and chunk.sum():
            # the draft also reads every prompt (its KV cache / hidden states), whatever k is now
            prefill = _first_step_only(ragged(base.draft, chunk, draft_ctx(ctx[pre_idx]),
                                              tokens=np.int64(chunk.sum()), sampled=np.int64(len(first))), steps)
        dt = md.model.price(Mix(target_work, verifying, passes, prefill)).total
        ends = now + np.cumsum(dt)
        if admissible and steps > 1 and ends[-1] > next_arrival:
            cut = int(np.searchsorted(ends, next_arrival)) + 1  # the step running at the arrival completes
            if cut < steps:
                steps, q, emit, adv, ends, dt = cut, q[:cut], emit[:cut], adv[:cut], ends[:cut], dt[:cut]
        # ---- what a client sees
        measured = rid >= measure_from
        got = (emit > 0) & measured
        if steps > 1:  # a sequence that emits in consecutive steps sees the step time as its gap
            log.itl_values.append(dt[1:])
            log.itl_counts.append((got[1:] & got[:-1]).sum(axis=1).astype(float))
        # gaps that start before this block or after a silent step
        starts = np.where(got[0], last_t, np.nan)
        gap0 = ends[0] - starts
        ok = ~np.isnan(gap0)
        log.itl_values.append(gap0[ok])
        log.itl_counts.append(np.ones(int(ok.sum())))
        if steps > 1:
            silent_then = got[1:] & ~got[:-1]
            if silent_then.any():  # only a just-prefilled sequence can be silent in step 0
                t_idx, s_idx = np.nonzero(silent_then)
                log.itl_values.append(ends[t_idx + 1] - np.where(np.isnan(last_t[s_idx]), ends[0], last_t[s_idx]))
                log.itl_counts.append(np.ones(len(t_idx)))
        log.first_token[rid[first]] = ends[0]
        log.step_end.append(ends)
        log.step_tokens.append(emit.sum(axis=1))
        pre_tokens = np.zeros(steps)
        pre_tokens[0] = chunk.sum()
        log.step_prefill.append(pre_tokens)
        total_adv = adv.sum(axis=0)
        total_emit = emit.sum(axis=0)
        ctx = ctx + total_adv
        pre_left[pre_idx] -= chunk
        remaining = remaining - total_emit
        emitted_any = emit.any(axis=0)
        last_emit_step = steps - 1 - np.argmax(emit[::-1] > 0, axis=0)
        last_t = np.where(emitted_any, ends[last_emit_step], last_t)
        now = float(ends[-1])
        # ---- completions
        fin = remaining <= 0
        if fin.any():
            ids = rid[fin]
            log.finish[ids] = now
            kv_used -= float(need[ids].sum())
            done += len(ids)
            keep = ~fin
            rid, ctx, pre_left, remaining, last_t = rid[keep], ctx[keep], pre_left[keep], remaining[keep], last_t[keep]
            if closed:  # each finished client sends its next request now
                add = min(len(ids), n - issued)
                arr[issued: issued + add] = now
                issued += add
    return log
