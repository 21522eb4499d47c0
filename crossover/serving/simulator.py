"""A discrete-event simulation of a continuous-batching engine (vLLM-style scheduler).

Each engine step: running sequences that finished their prompt decode (q = 1) or verify (q = k+1,
ragged for n-gram), and the leftover token budget prefills waiting prompts in chunks that share the
step (chunked prefill). The step's time is the roofline cost of exactly that mix (the same compiled
op lists as `crossover predict`), plus the draft forwards and overheads when speculation is on.
Sequences accept a random number of drafts per step (seeded numpy Generator), so acceptance is
ragged across the batch. Admission reserves a request's whole KV footprint (prompt + output), so
the engine never preempts; a request waits while the KV cache or max_num_seqs is full.

The engine runs in blocks: a step with every prefill chunk, then up to SEGMENT decode steps until the
first completion, cut at the step where an admissible request arrives. A compiled loop (loop.py,
numba) schedules the blocks, draws acceptance and records each step's work; `_Engine.price` prices the
recorded steps through `StepModel.price` (one Mix per mode) whenever the loop needs their seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.scenario import Scenario
from ..errors import CrossoverError
from ..model.forward import Forward
from ..model.step import Mix, StepModel
from .engine import EngineLimits, seated
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
    padded: bool = False  # n-gram misses verify k+1 padded positions (else the bonus only)
    # (positions per sequence, passes, sampled per sequence or None: all) per group of draft forwards
    # (StepModel.draft_groups: the method's passes and the head's catch-up on the verified positions)
    groups: tuple = ()

    @property
    def surv_ascending(self) -> np.ndarray:
        """The survival probabilities in increasing order (for a search per draw)."""
        return self.surv[::-1]


def _mode(dep, spec, k: int) -> _Mode:
    if k <= 0:
        return _Mode(False, 0, StepModel.of(dep, spec), np.zeros(0), 1.0, 1.0, 0, ())
    if k != spec.k:
        spec = spec.with_k(k)
    model = StepModel.of(dep, spec)
    return _Mode(True, k, model, spec.survival, spec.acceptance.match_rate, spec.verify_width, spec.draft_forwards,
                 spec.draft_pass_widths, spec.pad_misses, model.draft_groups(spec))


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


def arrivals_poisson(rng: np.random.Generator, n: int, rate: float, burstiness: float = 1.0) -> np.ndarray:
    """Arrival times (s) of `n` requests at `rate` req/s; gamma inter-arrivals (shape = burstiness, 1 = Poisson)."""
    if rate <= 0 or burstiness <= 0:
        raise CrossoverError("request rate and burstiness must be > 0")
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


class _Engine:
    """A continuous-batching engine over a list of requests. The compiled loop (loop.py) admits,
    chunks prefill, draws acceptance, records each step's work and what clients see; this class builds
    its arrays (`state`, `params`, `records`, `scratch`: records.py's named tuples and layout) and
    prices the recorded steps (`price`) whenever the loop needs their seconds, and at the end."""

    def __init__(self, arm: Arm, prompt: np.ndarray, output: np.ndarray, rng: np.random.Generator,
                 concurrency: int | None, arrival: np.ndarray | None, limits: EngineLimits, kv_capacity: float,
                 measure_from: int, stagger_s: float) -> None:
        from . import records as r  # the loop's layout (numba: a simulation runs the compiled loop next)

        n = len(prompt)
        self.n, self.rng, self.limits = n, rng, limits
        closed = concurrency is not None
        if closed:
            arr = np.full(n, np.inf)
            c0 = min(concurrency, n)  # type: ignore[type-var]
            arr[:c0] = np.arange(c0) * (stagger_s / c0)
        else:
            assert arrival is not None
            arr = np.asarray(arrival, float).copy()
        sc = arm.scenario
        self.dep, self.spec = seated(sc.deployment, limits, sc.speculation.k if arm.speculate else 0), sc.speculation
        self.route = Router(self.spec.k, arm.speculate, arm.schedule, arm.hysteresis)
        need = (prompt + output + (np.ceil(self.spec.verify_width) if arm.speculate else 1.0)).astype(float)
        if need.max() > kv_capacity:
            raise CrossoverError(
                f"a request of {int(need.max())} tokens does not fit in the KV cache ({int(kv_capacity)} tokens); "
                f"use a larger --tp or shorter lengths")
        self.base = StepModel.of(self.dep, self.spec)
        # without chunked prefill, prompts run in steps of their own that do not speculate (k = 0)
        ks = sorted(set(self.route.ks) | (set() if self.dep.engine.chunked_prefill else {0}))
        self.modes = {k: _mode(self.dep, self.spec, k) for k in ks}
        self.order = list(self.modes.values())  # mode index -> mode
        self.draft_prefill = arm.speculate and self.spec.draft_reads_prompts and self.base.draft is not None
        self.expansion = self.dep.speculating_engine.verify_layout == "batch_expansion" and arm.speculate
        # the verifying sequences' KV priced: MLA's prefill path, the n-gram lookup's search over it
        self.verify_kv = arm.speculate and (self.dep.mla_verify_prefill or (
            self.spec.method == "ngram" and self.dep.ngram_lookup_per_token_s > 0.0))
        groups = [self._groups(md) for md in self.order]
        tw = np.asarray(self.base.target.windows, float)
        dw = np.asarray(self.base.draft.windows if self.base.draft else (), float)
        assert all(md.model.draft is None or md.model.draft.windows == self.base.draft.windows for md in self.order)
        W, Wd, G = len(tw), len(dw), max(1, max(len(g) for g in groups))
        L = np.zeros(r.L_LEN, np.int64)  # where each step's work sits in the float (SF) and integer (SI) records
        L[r.L_KV] = r.SF_LEN
        L[r.L_QK] = L[r.L_KV] + W
        L[r.L_EXP] = L[r.L_QK] + W
        L[r.L_VKV] = L[r.L_EXP] + W
        L[r.L_PKV] = L[r.L_VKV] + W
        L[r.L_PQK] = L[r.L_PKV] + Wd
        L[r.L_DKV] = L[r.L_PQK] + Wd
        L[r.L_DQK] = L[r.L_DKV] + G * Wd
        L[r.L_DTOK] = r.SI_LEN
        L[r.L_W], L[r.L_WD], L[r.L_G] = W, Wd, G
        nf, ni = int(L[r.L_DQK]) + G * Wd, r.SI_LEN + G
        kmax = max(md.k for md in self.order)
        k2m = np.full(kmax + 1, -1, np.int64)
        MI, MF = np.zeros((len(self.order), r.MI_LEN), np.int64), np.zeros((len(self.order), r.MF_LEN))
        for i, (md, g) in enumerate(zip(self.order, groups)):
            k2m[md.k] = i
            MI[i, r.MI_ON], MI[i, r.MI_K], MI[i, r.MI_NSURV], MI[i, r.MI_NGROUPS] = md.on, md.k, len(md.surv), len(g)
            MF[i, r.MF_WIDTH], MF[i, r.MF_MATCH] = md.width, md.match
            MF[i, r.MF_MISS] = md.width if md.on and md.padded else 1.0
        ns = max(1, max(len(md.surv) for md in self.order))
        MS = np.array([np.pad(md.surv_ascending, (0, ns - len(md.surv))) for md in self.order], float).reshape(-1, ns)
        MW = np.array([[float(w) for w, _, _ in g] + [0.0] * (G - len(g)) for g in groups], float).reshape(-1, G)
        self.groups = groups
        budget = self.spec.draft_kv_budget
        seg = SEGMENT
        seats = limits.seats(arm.speculate)
        IP = np.zeros(r.IP_LEN, np.int64)
        IP[r.IP_MAX_SEQS], IP[r.IP_MEASURE_FROM], IP[r.IP_SEGMENT] = seats, measure_from, seg
        IP[r.IP_DRAFT_PREFILL], IP[r.IP_EXPANSION] = self.draft_prefill, self.expansion or self.verify_kv
        IP[r.IP_ROUTE_K], IP[r.IP_LOW], IP[r.IP_HIGH] = self.route.k, self.route.low, self.route.high
        IP[r.IP_CLOSED], IP[r.IP_CHUNKED] = closed, self.dep.engine.chunked_prefill
        FP = np.zeros(r.FP_LEN)
        FP[r.FP_MAX_TOKENS], FP[r.FP_KV_CAP] = limits.max_num_batched_tokens, kv_capacity
        FP[r.FP_DRAFT_BUDGET] = np.inf if budget is None else budget
        R = np.zeros((r.R_LEN, n))
        R[r.R_PROMPT], R[r.R_OUTPUT], R[r.R_NEED], R[r.R_ARR] = prompt, output, need, arr
        cap_m = max(1, min(seats, n))
        ST = np.zeros(r.ST_LEN, np.int64)
        ST[r.ST_NREQ] = n
        ST[r.ST_ISSUED] = min(concurrency, n) if closed else n  # type: ignore[type-var]
        self.state = r.State(ST=ST, SF0=np.zeros(r.SF0_LEN), X=np.zeros((r.X_LEN, cap_m)),
                             XI=np.zeros((r.XI_LEN, cap_m), np.int64), ROUTE=self.route.state)
        work = max(cap_m, seg) + 1  # one value per seat (or per step of a block)
        self.scratch = r.Scratch(Q=np.zeros((seg, cap_m)), E=np.zeros((seg, cap_m)), A=np.zeros((seg, cap_m)),
                                 V=np.zeros((r.V_LEN, cap_m)),
                                 w1=np.empty(work), w2=np.empty(work), w3=np.empty(work), w4=np.empty(work),
                                 w5=np.empty(work))
        # records sized for every step emitting one token (grown if prompt-only steps exceed that); np.empty
        # commits only the pages a run writes
        cap = int(output.sum()) + n + 4 * seg
        gaps = 2 * cap + 2 * seg * cap_m
        self.records = r.Records(SF=np.empty((nf, cap)), SI=np.empty((ni, cap), np.int64), BS=np.empty(cap, np.int64),
                                 BB=np.empty(cap), II=np.empty((r.II_LEN, gaps), np.int64), IW=np.empty(gaps),
                                 RI=np.full((r.RI_LEN, n), -1, np.int64))
        self.prompt, self.output = prompt, output
        U = rng.random(max(4 * seg * cap_m, 1 << 16)) if arm.speculate else np.zeros(0)
        self.params = r.Params(U=U, IP=IP, FP=FP, R=R, L=L, schedule=self.route.schedule, k2m=k2m, MI=MI, MF=MF,
                               MS=MS, MW=MW, tw=tw, dw=dw)

    @staticmethod
    def _groups(md: _Mode) -> list[tuple[float, int, float | None]]:
        """(width, sequential passes, sampled per sequence) per group of draft passes (chains: one
        group, and the catch-up on the verified positions where the engine has one)."""
        if not (md.on and md.model.draft is not None and md.draft_forwards):
            return []
        return [(float(w), int(c), s) for w, c, s in md.groups]

    def mode_for(self, batch: int) -> _Mode:
        """What a step does at this running batch (a schedule routes k by load)."""
        return self.modes[self.route(batch)]

    def run(self) -> RunLog:
        """Runs the compiled loop, pricing its steps whenever it asks, until every request completes."""
        from . import loop  # numba: imported by the first simulation only
        from . import records as r

        state, k, cap_m = self.state, loop.SPEC_DECISIONS, self.state.X.shape[1]
        ST = state.ST
        # speculation on step times: the states saved per decision in flight, the decisions, the estimates
        spec = r.Spec(ST=np.zeros((k, r.ST_LEN), np.int64), SF0=np.zeros((k, r.SF0_LEN)),
                      X=np.zeros((k, r.X_LEN, cap_m)), XI=np.zeros((k, r.XI_LEN, cap_m), np.int64),
                      ROUTE=np.zeros(k, np.int64), DEC=np.zeros((k, r.DEC_LEN)),
                      EST=np.zeros((len(self.order), 2, r.EST_LEN)))
        while True:
            status = loop.run(state, self.params, self.records, spec, self.scratch)
            if status == loop.PRICE or (status == loop.DONE and ST[r.ST_NPRICED] < ST[r.ST_NSTEPS]):
                self.price()
            elif status == loop.GROW_STEPS:
                rec = self.records
                self.records = rec._replace(SF=_doubled(rec.SF), SI=_doubled(rec.SI), BS=_doubled(rec.BS),
                                            BB=_doubled(rec.BB))
            elif status == loop.DRAW:  # the random stream, drawn ahead in bulk (the same numbers in order)
                saved = spec.ST[:ST[r.ST_NSPEC], r.ST_UCUR]
                used = int(min(ST[r.ST_UCUR], saved.min(initial=ST[r.ST_UCUR])))  # saved states go back
                U = self.params.U
                self.params = self.params._replace(U=np.concatenate([U[used:], self.rng.random(len(U))]))
                ST[r.ST_UCUR] -= used
                spec.ST[:ST[r.ST_NSPEC], r.ST_UCUR] -= used
            elif status == loop.GROW_ITL:
                rec = self.records
                self.records = rec._replace(II=_doubled(rec.II), IW=_doubled(rec.IW))
            elif status == loop.STALL:
                raise RuntimeError("simulation stalled")  # pragma: no cover - guarded by the fit check
            else:
                return self.log()

    # ------------------------------------------------------------------ step: price the recorded steps

    def price(self) -> None:
        """Each recorded step's seconds from the step model, for exactly its mix (one call per mode)."""
        from . import records as r

        ST, L = self.state.ST, self.params.L
        lo, hi = int(ST[r.ST_NPRICED]), int(ST[r.ST_NSTEPS])
        SF, SI, W, Wd = self.records.SF, self.records.SI, L[r.L_W], L[r.L_WD]
        kv, qk, ex, vkv, pkv, pqk = L[r.L_KV], L[r.L_QK], L[r.L_EXP], L[r.L_VKV], L[r.L_PKV], L[r.L_PQK]
        dkv, dqk, dtok = L[r.L_DKV], L[r.L_DQK], L[r.L_DTOK]
        modes = SI[r.SI_MODE, lo:hi]
        for i, md in enumerate(self.order):
            sel: slice | np.ndarray = slice(lo, hi) if len(self.order) == 1 else lo + np.nonzero(modes == i)[0]
            tokens = SI[r.SI_TOK, sel]
            if not len(tokens):
                continue
            target = Forward(tokens, SF[kv:kv + W, sel], SF[qk:qk + W, sel], SI[r.SI_SMP, sel],
                             SF[ex:ex + W, sel] if self.expansion and md.on else 0.0,
                             SF[vkv:vkv + W, sel] if self.verify_kv and md.on else 0.0)
            # a multi-token draft pass (an MTP layer's catch-up) holds its sequences' KV as a verify does
            passes = tuple((count, Forward(SI[dtok + g, sel], SF[dkv + g * Wd:dkv + (g + 1) * Wd, sel],
                                           SF[dqk + g * Wd:dqk + (g + 1) * Wd, sel],
                                           None if s is None else np.rint(SI[dtok + g, sel] * (s / w)).astype(np.int64),
                                           0.0, SF[dkv + g * Wd:dkv + (g + 1) * Wd, sel] if w > 1 else 0.0))
                           for g, (w, count, s) in enumerate(self.groups[i]))
            prefill = None
            if self.draft_prefill and SI[r.SI_PTOK, sel].any():
                prefill = Forward(SI[r.SI_PTOK, sel], SF[pkv:pkv + Wd, sel], SF[pqk:pqk + Wd, sel], SI[r.SI_PSMP, sel])
            mix = Mix(target, SF[r.SF_NDEC, sel] if md.on else 0.0, passes, prefill, SI[r.SI_UNIF, sel] > 0,
                      SF[r.SF_SEQS, sel], prompting=(SF[r.SF_PRE, sel] > 0.0).astype(float))
            SF[r.SF_DT, sel] = md.model.price(mix).total
        ST[r.ST_NPRICED] = hi

    # ------------------------------------------------------------------ what clients saw, in seconds

    def log(self) -> RunLog:
        """Step indices become times: arrivals (closed-loop: when a client's last request finished),
        first tokens, finishes and inter-token gaps (a step's time, or the gap between two ends)."""
        from . import records as r

        ST, SF0, rec = self.state.ST, self.state.SF0, self.records
        ns, ni = int(ST[r.ST_NSTEPS]), int(ST[r.ST_NITL])
        ends, dt = rec.SF[r.SF_ENDS, :ns].copy(), rec.SF[r.SF_DT, :ns].copy()
        arr_step, first, fin = rec.RI[r.RI_ARR], rec.RI[r.RI_FIRST], rec.RI[r.RI_FIN]
        arrival = np.where(arr_step >= 0, ends[np.maximum(arr_step, 0)], self.params.R[r.R_ARR])
        i, j = rec.II[r.II_STEP, :ni], rec.II[r.II_FROM, :ni]
        gaps = np.where(j < 0, dt[i], ends[i] - ends[np.maximum(j, 0)])
        return RunLog(arrival, self.prompt.astype(float), self.output.astype(float), ends[first], ends[fin], [ends],
                      [rec.SF[r.SF_EMIT, :ns].copy()], [rec.SF[r.SF_PRE, :ns].copy()], [gaps],
                      [rec.IW[:ni].copy()], float(SF0[r.SF0_PROPOSED]), float(SF0[r.SF0_ACCEPTED]),
                      float(SF0[r.SF0_VERIFY]))


def _doubled(a: np.ndarray) -> np.ndarray:
    """A record array with twice the room along its last axis, its contents kept."""
    out = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    out[..., :a.shape[-1]] = a
    return out


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
