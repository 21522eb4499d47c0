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
from .routing import Router, check_route

SEGMENT = 256  # most decode-only steps simulated in one vectorised block


@dataclass
class Arm:
    """One server configuration: the scenario and whether speculation is on.

    With a `schedule` (k per running batch: schedule[b - 1]; batches past its end use the last
    entry) the arm routes by load step by step, as vLLM's dynamic speculation does. With
    `hysteresis` (low, high) it routes by queue length: it speculates at the scenario's k until the
    running batch rises above `high`, then decodes plainly until it falls below `low` (low <= high;
    the band keeps it from flapping on every admission and completion).
    """

    scenario: Scenario
    speculate: bool
    schedule: np.ndarray | None = None
    hysteresis: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        check_route(self.schedule, self.hysteresis)


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


@dataclass
class _Block:
    """A block of engine steps: step 0 runs the decodes plus every prefill chunk; from step 1 every
    sequence decodes. Arrays are (steps, running sequences)."""

    md: _Mode
    q: np.ndarray  # positions each sequence processes per step (verify width, or its prompt chunk)
    emit: np.ndarray  # output tokens each sequence emits per step
    adv: np.ndarray  # context advance per step
    ctx: np.ndarray  # context at the start of each step
    decoding: np.ndarray  # per sequence: past its prompt at the block's start
    pre_idx: np.ndarray  # sequences prefilling in step 0 ...
    chunk: np.ndarray  # ... and their chunk sizes
    first: np.ndarray  # sequences whose prompt completes in step 0 (their first token)
    dt: np.ndarray | None = None  # seconds per step
    ends: np.ndarray | None = None  # end time of each step

    @property
    def steps(self) -> int:
        return len(self.q)

    def truncate(self, steps: int) -> None:
        """Keep the first `steps` steps."""
        self.q, self.emit, self.adv, self.ctx = self.q[:steps], self.emit[:steps], self.adv[:steps], self.ctx[:steps]
        if self.dt is not None:
            self.dt, self.ends = self.dt[:steps], self.ends[:steps]  # type: ignore[index]


class _Engine:
    """A continuous-batching engine over a list of requests: admit, chunk prefill, price a block of
    steps, account what clients see, retire completions."""

    def __init__(self, arm: Arm, prompt: np.ndarray, output: np.ndarray, rng: np.random.Generator,
                 concurrency: int | None, arrival: np.ndarray | None, limits: EngineLimits, kv_capacity: float,
                 measure_from: int, stagger_s: float) -> None:
        n = len(prompt)
        self.n, self.rng, self.limits, self.kv_capacity, self.measure_from = n, rng, limits, kv_capacity, measure_from
        self.closed = concurrency is not None
        if self.closed:
            arr = np.full(n, np.inf)
            c0 = min(concurrency, n)  # type: ignore[type-var]
            arr[:c0] = np.arange(c0) * (stagger_s / c0)
        else:
            assert arrival is not None
            arr = np.asarray(arrival, float).copy()
        self.arr, self.prompt, self.output = arr, prompt, output
        sc = arm.scenario
        self.dep, self.spec, self.speculate = sc.deployment, sc.speculation, arm.speculate
        self.route = Router(self.spec.k, arm.speculate, arm.schedule, arm.hysteresis)
        self.modes: dict[int, _Mode] = {}
        self.draft_budget = self.spec.draft_kv_budget
        self.draft_prefills = arm.speculate and self.spec.draft_reads_prompts
        self.need = (prompt + output + (np.ceil(self.spec.verify_width) if arm.speculate else 1.0)).astype(float)
        if self.need.max() > kv_capacity:
            raise CrossoverError(
                f"a request of {int(self.need.max())} tokens does not fit in the KV cache ({int(kv_capacity)} tokens); "
                f"use a larger --tp or shorter lengths")
        self.log = RunLog(arr, prompt.astype(float), output.astype(float), np.full(n, np.nan), np.full(n, np.nan),
                          [], [], [], [], [])
        self.base = StepModel.of(self.dep, self.spec)
        self.has_draft = arm.speculate and self.base.draft is not None
        # running sequences (parallel arrays, admission order)
        self.rid = np.zeros(0, dtype=np.int64)
        self.ctx = np.zeros(0)
        self.pre_left = np.zeros(0)
        self.remaining = np.zeros(0)
        self.last_t = np.zeros(0)
        self.kv_used = 0.0
        self.now = 0.0
        self.next_req = 0  # requests are admitted in index order (FIFO)
        self.issued = min(concurrency, n) if self.closed else n  # type: ignore[type-var]
        self.done = 0

    def run(self) -> RunLog:
        """Steps until every request completes."""
        while self.done < self.n:
            self.admit()
            if not len(self.rid):
                if self.next_req >= self.issued:
                    raise RuntimeError("simulation stalled")  # pragma: no cover - guarded by the fit check
                self.now = max(self.now, self.arr[self.next_req])
                continue
            admissible = self.admissible()
            block = self.schedule_block()
            self.price(block)
            next_arrival = self.arr[self.next_req] if self.next_req < self.issued else np.inf
            if admissible and block.steps > 1 and block.ends[-1] > next_arrival:  # type: ignore[index]
                # the step running when the next admissible request arrives completes the block
                cut = int(np.searchsorted(block.ends, next_arrival)) + 1  # type: ignore[arg-type]
                if cut < block.steps:
                    block.truncate(cut)
            self.account(block)
            self.advance(block)
        return self.log

    # ------------------------------------------------------------------ admit

    def admit(self) -> None:
        """FIFO admission while running sequences, the KV cache and arrivals allow."""
        start = self.next_req
        while (self.next_req < self.issued and self.arr[self.next_req] <= self.now + 1e-15
               and len(self.rid) + self.next_req - start < self.limits.max_num_seqs
               and self.kv_used + self.need[self.next_req] <= self.kv_capacity):
            self.kv_used += self.need[self.next_req]
            self.next_req += 1
        if self.next_req > start:
            new = np.arange(start, self.next_req)
            self.rid = np.concatenate([self.rid, new])
            self.ctx = np.concatenate([self.ctx, np.zeros(len(new))])
            self.pre_left = np.concatenate([self.pre_left, self.prompt[new].astype(float)])
            self.remaining = np.concatenate([self.remaining, self.output[new].astype(float)])
            self.last_t = np.concatenate([self.last_t, np.full(len(new), np.nan)])

    def admissible(self) -> bool:
        """Whether the next issued request would be admitted once it arrives."""
        return bool(self.next_req < self.issued and len(self.rid) < self.limits.max_num_seqs
                    and self.kv_used + self.need[self.next_req] <= self.kv_capacity)

    def mode_for(self, batch: int) -> _Mode:
        """What a step does at this running batch (a schedule routes k by load)."""
        k = self.route(batch)
        if k not in self.modes:
            self.modes[k] = _mode(self.dep, self.spec, k)
        return self.modes[k]

    # ------------------------------------------------------------------ chunk prefill, draw acceptance

    def draws(self, md: _Mode, steps: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(verify width, tokens emitted) per step and decoding sequence."""
        if not md.on:
            return np.ones((steps, m)), np.ones((steps, m))
        # drafts accepted = how many survival probabilities (decreasing) exceed one uniform draw
        acc = (md.k - np.searchsorted(md.surv_ascending, self.rng.random((steps, m)), side="right")).astype(float)
        if md.match < 1.0:
            matched = self.rng.random((steps, m)) < md.match
            return 1.0 + md.k * matched, 1.0 + acc * matched
        return np.full((steps, m), md.width), 1.0 + acc  # trees: all nodes verified, the path accepted

    def schedule_block(self) -> _Block:
        """The next block: prefill chunks from the token budget left after decodes and verifies (FIFO),
        acceptance draws, up to the first completion or SEGMENT steps (one step with prefill left)."""
        m = len(self.rid)
        decoding = self.pre_left == 0
        nd = int(decoding.sum())
        md = self.mode_for(m)
        max_tokens = self.limits.max_num_batched_tokens
        budget = max(max_tokens - nd * md.width, 0.0)
        pre_idx = np.nonzero(~decoding)[0]
        if len(pre_idx):
            left = self.pre_left[pre_idx]
            chunk = np.clip(budget - (np.cumsum(left) - left), 0.0, left)
            if nd == 0 and chunk.sum() == 0:
                chunk[0] = min(left[0], max_tokens)  # a prompt longer than the budget still progresses
            simple = bool(np.all(chunk == left))  # every pending prompt finishes prefill this step
        else:
            left = chunk = np.zeros(0)
            simple = True
        horizon = int(min(SEGMENT, self.remaining.min())) if simple else 1
        if len(pre_idx):
            horizon = max(horizon, 1)
        q, emit = self.draws(md, horizon, m)
        adv = emit.copy()
        first = pre_idx
        if len(pre_idx):
            q[0, pre_idx] = chunk  # prefilling sequences process their chunk, emit nothing ...
            emit[0, pre_idx] = 0.0
            adv[0, pre_idx] = chunk
            first = pre_idx[chunk == left]
            emit[0, first] = 1.0  # ... except the first token, sampled when a prompt's last chunk runs
        cum = np.cumsum(emit, axis=0)
        fin_any = (cum >= self.remaining).any(axis=1)
        steps = int(np.argmax(fin_any)) + 1 if fin_any.any() else horizon
        q, emit, adv, cum = q[:steps], emit[:steps], adv[:steps], cum[:steps]
        emit = np.maximum(np.minimum(emit, self.remaining - (cum - emit)), 0.0)  # no tokens past the output
        ctx_t = self.ctx + (np.cumsum(adv, axis=0) - adv)  # context at the start of each step
        return _Block(md, q, emit, adv, ctx_t, decoding, pre_idx, chunk, first)

    # ------------------------------------------------------------------ step: price the block

    def draft_ctx(self, c: np.ndarray) -> np.ndarray:
        return np.minimum(c, self.draft_budget) if self.draft_budget is not None else c

    def price(self, b: _Block) -> None:
        """Each step's seconds from the step model, for exactly its mix."""
        md, q, steps, m = b.md, b.q, b.steps, len(self.rid)
        live = q > 0
        sampled = q.sum(axis=1)
        if len(b.pre_idx):  # a prompt chunk needs logits only when it is the prompt's last
            sampled[0] = q[0, b.decoding].sum() + len(b.first)
        # a prompt waiting for budget attends nothing this step
        verifying_rows = None
        if md.on:  # sequences that decode (and so verify) in each step: all but step 0's prompts
            verifying_rows = live.copy()
            verifying_rows[0] &= b.decoding
        target = md.model.ragged_target(np.where(live, q, 0.0), np.where(live, b.ctx, -q),
                                        sampled=sampled.astype(np.int64), verifying=verifying_rows)
        verifying: np.ndarray | float = 0.0
        passes: tuple = ()
        if md.on:
            n_dec = np.full(steps, float(m))
            n_dec[0] = int(b.decoding.sum())
            if len(b.pre_idx):
                dec = np.ones((steps, m))
                dec[0, ~b.decoding] = 0.0
                dec_ctx = np.where(dec > 0, self.draft_ctx(b.ctx), 0.0)  # q = 0 there: attends nothing
                proposed = np.where(dec > 0, q - 1.0, 0.0)
            else:
                dec, dec_ctx, proposed = None, self.draft_ctx(b.ctx), q - 1.0
            verifying = n_dec
            if md.model.draft is not None and md.draft_forwards:
                ones = np.ones((steps, m)) if dec is None else dec
                passes = tuple((md.pass_widths.count(w), ragged(md.model.draft, ones * w, dec_ctx,
                                                                 tokens=(n_dec * w).astype(np.int64)))
                               for w in sorted(set(md.pass_widths)))  # chains: k passes of width 1; trees widen
            accepted = np.minimum(b.emit - 1.0, proposed).clip(0)
            self.log.drafts_proposed += float(proposed.sum())
            self.log.drafts_accepted += float(accepted.sum() if dec is None else accepted[dec > 0].sum())
            self.log.verify_steps += float(n_dec.sum())
        prefill = None
        if self.has_draft and self.draft_prefills and len(b.pre_idx) and b.chunk.sum():
            # the draft also reads every prompt (its KV cache / hidden states), whatever k is now
            prefill = _first_step_only(ragged(self.base.draft, b.chunk, self.draft_ctx(self.ctx[b.pre_idx]),
                                              tokens=np.int64(b.chunk.sum()), sampled=np.int64(len(b.first))), steps)
        # a step whose sequences verify different widths (n-gram misses) or prefill beside decodes is ragged
        uniform = np.where(live, q, np.inf).min(axis=1) == np.where(live, q, -np.inf).max(axis=1)
        b.dt = md.model.price(Mix(target, verifying, passes, prefill, uniform, live.sum(axis=1))).total
        b.ends = self.now + np.cumsum(b.dt)

    # ------------------------------------------------------------------ account latencies

    def account(self, b: _Block) -> None:
        """What a benchmark client sees: first tokens, inter-token gaps, tokens per step."""
        log, ends, dt, last_t = self.log, b.ends, b.dt, self.last_t
        assert ends is not None and dt is not None
        got = (b.emit > 0) & (self.rid >= self.measure_from)
        if b.steps > 1:  # a sequence that emits in consecutive steps sees the step time as its gap
            log.itl_values.append(dt[1:])
            log.itl_counts.append((got[1:] & got[:-1]).sum(axis=1).astype(float))
        # gaps that start before this block or after a silent step
        gap0 = ends[0] - np.where(got[0], last_t, np.nan)
        ok = ~np.isnan(gap0)
        log.itl_values.append(gap0[ok])
        log.itl_counts.append(np.ones(int(ok.sum())))
        if b.steps > 1:
            silent_then = got[1:] & ~got[:-1]
            if silent_then.any():  # only a just-prefilled sequence can be silent in step 0
                t_idx, s_idx = np.nonzero(silent_then)
                log.itl_values.append(ends[t_idx + 1] - np.where(np.isnan(last_t[s_idx]), ends[0], last_t[s_idx]))
                log.itl_counts.append(np.ones(len(t_idx)))
        log.first_token[self.rid[b.first]] = ends[0]
        log.step_end.append(ends)
        log.step_tokens.append(b.emit.sum(axis=1))
        pre_tokens = np.zeros(b.steps)
        pre_tokens[0] = b.chunk.sum()
        log.step_prefill.append(pre_tokens)

    # ------------------------------------------------------------------ advance and retire

    def advance(self, b: _Block) -> None:
        """Contexts, prompts and outputs move on; finished requests leave (and, closed-loop, their
        clients send the next)."""
        ends = b.ends
        assert ends is not None
        self.ctx = self.ctx + b.adv.sum(axis=0)
        self.pre_left[b.pre_idx] -= b.chunk
        self.remaining = self.remaining - b.emit.sum(axis=0)
        last_emit_step = b.steps - 1 - np.argmax(b.emit[::-1] > 0, axis=0)
        self.last_t = np.where(b.emit.any(axis=0), ends[last_emit_step], self.last_t)
        self.now = float(ends[-1])
        fin = self.remaining <= 0
        if not fin.any():
            return
        ids = self.rid[fin]
        self.log.finish[ids] = self.now
        self.kv_used -= float(self.need[ids].sum())
        self.done += len(ids)
        keep = ~fin
        self.rid, self.ctx, self.pre_left = self.rid[keep], self.ctx[keep], self.pre_left[keep]
        self.remaining, self.last_t = self.remaining[keep], self.last_t[keep]
        if self.closed:  # each finished client sends its next request now
            add = min(len(ids), self.n - self.issued)
            self.arr[self.issued: self.issued + add] = self.now
            self.issued += add


def simulate(arm: Arm, prompt: np.ndarray, output: np.ndarray, rng: np.random.Generator, *,
             concurrency: int | None = None, arrival: np.ndarray | None = None,
             limits: EngineLimits = EngineLimits(), kv_capacity: float = np.inf, measure_from: int = 0,
             stagger_s: float = 0.0) -> RunLog:
    """Run `len(prompt)` requests closed-loop at `concurrency`, or open-loop at the given arrival times.

    Closed-loop clients send their first requests spread evenly over `stagger_s` seconds (0: all at
    once); with equal lengths, clients that start together stay in lock-step waves forever.
    Inter-token gaps are recorded for requests with index >= `measure_from` (warm-up excluded).
    """
    return _Engine(arm, prompt, output, rng, concurrency, arrival, limits, kv_capacity, measure_from,
                   stagger_s).run()
