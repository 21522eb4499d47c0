"""The step records of the serving simulator's compiled loop (loop.py): each step's work as
`StepModel.price` reads it (the target forward's tokens, sampled positions and attention sums per
window, the draft passes' and the draft prefill's, the sequences verifying), summed over the step's
sequences in numpy's pairwise order, so the numbers equal those of numpy's sums; and the steps' end
times (priced: step_ends; estimated before pricing: estimate_ends).

Also THE layout of the loop's arrays (shared with the driver, simulator._Engine), in one place below:
the loop takes five named tuples (State, Params, Records, Spec, Scratch) whose fields are its arrays,
and every offset into an array is a module-level constant whose prefix is the field's name
(ST_NSTEPS indexes State.ST, SF_DT the rows of Records.SF, X_CTX the rows of State.X); fields without
constants are indexed by data (a step, a sequence, a block, a k, a mode, a window). numba reads
module-level ints as compile-time constants (not an IntEnum, nor a class's attributes), hence plain
constants; *_LEN is each array's length along the named axis.
"""

from __future__ import annotations

from collections import namedtuple

import numba
import numpy as np

from ..model.roofline import window_terms
from .jit_cache import refresh

refresh()  # before the first compile: a cached loop whose sources changed is dropped
_terms = numba.njit(cache=True)(window_terms)

# ------------------------------------------------------------------ the layout
# what the loop returns to the driver
DONE, PRICE, GROW_STEPS, GROW_ITL, STALL, DRAW = range(6)

# State: what a run carries from step to step (a speculative decision saves and restores all of it)
State = namedtuple("State", "ST SF0 X XI ROUTE")
# ST, integer scalars
(ST_M,  # sequences running (the seats in use)
 ST_NEXT,  # the next request to admit
 ST_ISSUED, ST_NDONE,  # requests issued (sent; closed-loop clients send as theirs finish), completed
 ST_NSTEPS, ST_NPRICED,  # steps recorded, steps priced (the driver's price())
 ST_NBLOCKS, ST_NITL,  # blocks recorded, inter-token gaps recorded
 ST_PHASE, ST_BSTEPS,  # the current block's phase (PHASE_*) and steps
 ST_BENDED,  # blocks whose step end times are known (step_ends)
 ST_NREQ,  # requests in all
 ST_UCUR,  # the next uniform of Params.U
 ST_NSPEC,  # speculative decisions in flight (Spec)
 ST_FORCE,  # 1: decide the next timed arrival exactly (after a roll-back)
 ST_PFROM,  # the first priced step not yet in the estimates (Spec.EST)
 ST_ONBLOCK,  # the current block speculates
 ST_LEN) = range(18)
# ST[ST_PHASE]: schedule the next block, price its steps before cutting it, finish it
PHASE_NEXT, PHASE_CUT, PHASE_FINISH = range(3)
# SF0, float scalars: KV tokens reserved, the clock (on estimated step times while steps are unpriced),
# drafts proposed and accepted, sequences verified (summed over steps), the clock on priced steps only
SF0_KV_USED, SF0_NOW, SF0_PROPOSED, SF0_ACCEPTED, SF0_VERIFY, SF0_TKNOWN, SF0_LEN = range(7)
# X, per running sequence (rows; columns: the seats): context, prompt tokens left, output tokens left,
# tokens of its context the draft has read; XI: its request, the step it last emitted in (-1: none)
X_CTX, X_LEFT, X_REM, X_DREAD, X_LEN = range(5)
XI_RID, XI_LAST, XI_LEN = range(3)
# ROUTE: the hysteresis band's state (routing.ROUTE_ON)

# Params: what a run reads (U, the random stream, is drawn ahead and replaced by the driver)
Params = namedtuple("Params", "U IP FP R L schedule k2m MI MF MS MW tw dw")
# IP, integer parameters: seats, the first measured request, most steps per block, the draft reads
# prompts, the verifying sequences' sums kept (batch expansion, MLA's prefill path, the n-gram lookup), the routed k, the hysteresis band (low, high), closed-loop, chunked prefill
(IP_MAX_SEQS, IP_MEASURE_FROM, IP_SEGMENT, IP_DRAFT_PREFILL, IP_EXPANSION, IP_ROUTE_K, IP_LOW, IP_HIGH, IP_CLOSED,
 IP_CHUNKED, IP_LEN) = range(11)
# FP, float parameters: tokens per step, KV cache tokens, the draft's KV budget (inf: none)
FP_MAX_TOKENS, FP_KV_CAP, FP_DRAFT_BUDGET, FP_LEN = range(4)
# R, per request (rows; columns: requests): prompt and output tokens, KV tokens reserved, arrival time
# (inf: a closed-loop client's next request, sent when its last one finishes)
R_PROMPT, R_OUTPUT, R_NEED, R_ARR, R_LEN = range(5)
# L: where the per-window blocks start in the rows of Records.SF and SI, and the block sizes: the
# target's KV tokens read, query x key pairs, batch expansion's re-reads and the KV the verifying
# sequences hold (MLA's prefill path, the n-gram lookup; W windows each), the draft
# prefill's (Wd each), the draft passes' per group of one width (G x Wd each), the draft tokens per
# group (SI); windows W, draft windows Wd, groups G
L_KV, L_QK, L_EXP, L_VKV, L_PKV, L_PQK, L_DKV, L_DQK, L_DTOK, L_W, L_WD, L_G, L_LEN = range(13)
# modes (rows of MI, MF, MS, MW; k2m[k]: the mode of a k): MI, speculates, k, survival probabilities,
# groups of draft passes; MF, verify width, n-gram match rate, positions an n-gram miss verifies;
# MS: survival probabilities, ascending (padded); MW: the draft passes' width per group
MI_ON, MI_K, MI_NSURV, MI_NGROUPS, MI_LEN = range(5)
MF_WIDTH, MF_MATCH, MF_MISS, MF_LEN = range(4)

# Records: what the driver prices and reads at the end (grown by it: GROW_STEPS, GROW_ITL)
Records = namedtuple("Records", "SF SI BS BB II IW RI")
# SF, float rows per step (columns: steps): seconds, end time, sequences verifying, sequences running,
# tokens emitted, prompt tokens processed, then the per-window blocks at L's offsets
SF_DT, SF_ENDS, SF_NDEC, SF_SEQS, SF_EMIT, SF_PRE, SF_LEN = range(7)
# SI, integer rows per step: its mode, target tokens, sampled positions, draft prefill tokens and
# sampled positions, every live sequence has the same width; then the draft tokens per group
SI_MODE, SI_TOK, SI_SMP, SI_PTOK, SI_PSMP, SI_UNIF, SI_LEN = range(7)
# BS, BB per block: its first step, its base time (nan: the end of the step before it)
# II, per inter-token gap (IW: measured requests that saw it): its step, the step it began at (-1: the
# step's own time)
II_STEP, II_FROM, II_LEN = range(3)
# RI, per request: step of its arrival (closed-loop; -1: timed, R_ARR), first token, finish
RI_ARR, RI_FIRST, RI_FIN, RI_LEN = range(4)

# Spec: speculation on step times (loop.py): State's arrays saved per decision in flight (a leading
# decision axis), the decisions, and the step-time estimates
Spec = namedtuple("Spec", "ST SF0 X XI ROUTE DEC EST")
# DEC, per decision: its kind, the arrival time it turns on, the step (admission: arrived by its end;
# a block: its first), the outcome (admission: arrived; a block: steps kept), the block's steps drawn
DEC_KIND, DEC_TIME, DEC_STEP, DEC_OUTCOME, DEC_DRAWN, DEC_LEN = range(6)
DEC_ADMIT, DEC_BLOCK = 0.0, 1.0
# EST[mode, with prefill (1) or not]: target tokens and seconds of the last priced step of that kind (1)
# and of the one before it with other tokens (0)
EST_TOK0, EST_DT0, EST_TOK1, EST_DT1, EST_LEN = range(5)

# Scratch: each block's widths Q, emissions E and context advance A (steps x seats), V per sequence
# (rows: decoding, prompt chunk, first token, prefilling), work vectors (one value per seat)
Scratch = namedtuple("Scratch", "Q E A V w1 w2 w3 w4 w5")
V_DEC, V_CHUNK, V_FIRST, V_PRE, V_LEN = range(5)


@numba.njit(cache=True)
def _pw0(a, lo, n):
    """numpy's pairwise summation of a[lo:lo + n] for n <= 128: eight running sums (n < 8: in order)."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit(cache=True)
def _pw(a, lo, n):
    """numpy's pairwise summation of a[lo:lo + n]: above 128 terms it halves the range (the first half a
    multiple of 8) and adds the halves' sums; walked with a stack (numba's cache cannot reload a
    recursive function)."""
    if n <= 128:
        return _pw0(a, lo, n)
    los, ns, stage, left = np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64)
    los[0], ns[0], stage[0], sp = lo, n, 0, 1
    while True:
        t = sp - 1
        if ns[t] > 128:  # split: the left half first
            stage[t] = 1
            los[sp], ns[sp], stage[sp] = los[t], ns[t] // 2 - (ns[t] // 2) % 8, 0
            sp += 1
            continue
        v = _pw0(a, los[t], ns[t])
        sp -= 1
        while sp:  # hand the sum up: a left half waits for its right half, a right half completes its parent
            t = sp - 1
            if stage[t] == 1:
                h = ns[t] // 2 - (ns[t] // 2) % 8
                left[t], stage[t] = v, 2
                los[sp], ns[sp], stage[sp] = los[t] + h, ns[t] - h, 0
                sp += 1
                break
            v = left[t] + v
            sp -= 1
        if sp == 0:
            return v


@numba.njit(cache=True, inline="always")
def psum(a, n):
    """a[:n].sum() as numpy adds it (inlined, as are the loop's functions: see loop.py)."""
    if n <= 128:
        return 0.0 + _pw0(a, 0, n)
    return 0.0 + _pw(a, 0, n)


@numba.njit(cache=True, inline="always")
def colsum(A, j, steps, m, buf):
    """A[:steps, j] summed as numpy's A[:steps, :m].sum(axis=0) adds it: pairwise along a single
    column, row by row otherwise."""
    if m == 1:
        for i in range(steps):
            buf[i] = A[i, j]
        return psum(buf, steps)
    s = A[0, j]
    for i in range(1, steps):
        s += A[i, j]
    return s


@numba.njit(cache=True, inline="always")
def step_ends(state, rec):
    """Step end times of the blocks priced since the last call: base + the block's running sum."""
    ST, SF, BS, BB = state.ST, rec.SF, rec.BS, rec.BB
    nb = ST[ST_NBLOCKS]
    if ST[ST_BENDED] == nb or ST[ST_NPRICED] < ST[ST_NSTEPS]:
        return
    for b in range(ST[ST_BENDED], nb):
        start = BS[b]
        stop = BS[b + 1] if b + 1 < nb else ST[ST_NSTEPS]
        base = BB[b] if not np.isnan(BB[b]) else SF[SF_ENDS, start - 1]
        s = 0.0
        for i in range(start, stop):
            s = SF[SF_DT, i] if i == start else s + SF[SF_DT, i]
            SF[SF_ENDS, i] = base + s
    ST[ST_BENDED] = nb
    if ST[ST_NSTEPS] > 0:
        state.SF0[SF0_NOW] = state.SF0[SF0_TKNOWN] = SF[SF_ENDS, ST[ST_NSTEPS] - 1]


@numba.njit(cache=True, inline="always")
def estimate_ends(state, rec, spec):
    """Estimated seconds and ends of the last block's (unpriced) steps."""
    ST, SF, SI, EST = state.ST, rec.SF, rec.SI, spec.EST
    b = ST[ST_NBLOCKS] - 1
    start = rec.BS[b]
    base = rec.BB[b] if not np.isnan(rec.BB[b]) else SF[SF_ENDS, start - 1]
    s = 0.0
    for i in range(start, ST[ST_NSTEPS]):  # the secant through the last two priced steps of its kind, in tokens
        e = EST[SI[SI_MODE, i], 1 if SF[SF_PRE, i] > 0 else 0]
        t0, d0, t1, d1 = e[EST_TOK0], e[EST_DT0], e[EST_TOK1], e[EST_DT1]
        slope = (d1 - d0) / (t1 - t0) if t1 != t0 and t0 > 0 else 0.0
        SF[SF_DT, i] = max(d1 + slope * (SI[SI_TOK, i] - t1), 0.0)
        s = SF[SF_DT, i] if i == start else s + SF[SF_DT, i]
        SF[SF_ENDS, i] = base + s
    state.SF0[SF0_NOW] = SF[SF_ENDS, ST[ST_NSTEPS] - 1]


@numba.njit(cache=True, inline="always")
def record_steps(state, params, rec, scratch, s0, steps, m, mi, on, nd, npre, nfirst, csum, ngroups):
    """Each step's work as `StepModel.price` reads it (the simulator builds the Mix from these rows)."""
    SF0, X, SF, SI, L, tw, dw, MW = state.SF0, state.X, rec.SF, rec.SI, params.L, params.tw, params.dw, params.MW
    Q, E, A, V = scratch.Q, scratch.E, scratch.A, scratch.V
    W, Wd = L[L_W], L[L_WD]
    dbudget = params.FP[FP_DRAFT_BUDGET]
    expand = params.IP[IP_EXPANSION] == 1 and on
    draft_reads = params.IP[IP_DRAFT_PREFILL] == 1 and on
    bq, bs, bt, bu = scratch.w1, scratch.w2, scratch.w3, scratch.w4
    ca = scratch.w5  # context advance so far, per sequence
    for i in range(steps):
        s = s0 + i
        mixed_pre = npre > 0 and i == 0
        qmin, qmax, live_n, ns = np.inf, -np.inf, 0, 0
        for j in range(m):
            ca[j] = A[i, j] if i == 0 else ca[j] + A[i, j]
            qv = Q[i, j]
            bq[j] = qv
            if qv > 0:
                live_n += 1
                qmin = min(qmin, qv)
                qmax = max(qmax, qv)
            if mixed_pre and V[V_DEC, j] == 1.0:
                bs[ns] = qv
                ns += 1
            bt[j] = E[i, j]
        SF[SF_SEQS, s] = live_n
        SI[SI_UNIF, s] = 1 if qmin == qmax and not mixed_pre else 0  # a step with prompt tokens is never uniform
        SI[SI_MODE, s] = mi
        SI[SI_TOK, s] = np.int64(psum(bq, m))
        SI[SI_SMP, s] = np.int64(psum(bs, ns) + nfirst) if mixed_pre else np.int64(psum(bq, m))
        SF[SF_EMIT, s] = psum(bt, m)
        SF[SF_PRE, s] = csum if i == 0 else 0.0
        for w in range(W):  # the target forward's attention sums (and the verifying sequences')
            for j in range(m):
                qv = Q[i, j]
                live = qv > 0
                qq = qv if live else 0.0
                cc = X[X_CTX, j] + (ca[j] - A[i, j]) if live else -qv
                bt[j], bu[j] = _terms(qq, cc, tw[w])
                if expand:
                    verifying = live and not (mixed_pre and V[V_DEC, j] == 0.0)
                    bq[j], bs[j] = _terms(qq if verifying else 0.0, cc if verifying else 0.0, tw[w])
            SF[L[L_KV] + w, s] = psum(bt, m)
            SF[L[L_QK] + w, s] = psum(bu, m)
            SF[L[L_EXP] + w, s] = psum(bs, m) - psum(bq, m) if expand else 0.0
            SF[L[L_VKV] + w, s] = psum(bq, m) if expand else 0.0
        ndec = float(nd) if i == 0 else float(m)
        SF[SF_NDEC, s] = ndec if on else 0.0
        if on:  # drafts proposed and accepted, draft passes
            prop, acc = 0.0, 0.0
            for j in range(m):
                if mixed_pre and V[V_DEC, j] == 0.0:
                    continue
                pr = Q[i, j] - 1.0
                prop += pr
                acc += max(min(E[i, j] - 1.0, pr), 0.0)
            SF0[SF0_PROPOSED] += prop
            SF0[SF0_ACCEPTED] += acc
            SF0[SF0_VERIFY] += ndec
            for g in range(ngroups):
                wg = MW[mi, g]
                SI[L[L_DTOK] + g, s] = np.int64(ndec * wg)
                for w in range(Wd):
                    for j in range(m):
                        dec = not (mixed_pre and V[V_DEC, j] == 0.0)
                        ctx = X[X_CTX, j] + (ca[j] - A[i, j])
                        bt[j], bu[j] = _terms(wg if dec else 0.0, min(ctx, dbudget) if dec else 0.0, dw[w])
                    SF[L[L_DKV] + g * Wd + w, s] = psum(bt, m)
                    SF[L[L_DQK] + g * Wd + w, s] = psum(bu, m)
        # the draft reads this step's prompt chunks, and catches up on the tokens its sequences took
        # while the step ran without speculation (a routed server's draft reads nothing then)
        reads = i == 0 and draft_reads
        nread = 0
        if reads:
            for j in range(m):
                bs[j] = X[X_CTX, j] - X[X_DREAD, j] + (V[V_CHUNK, j] if V[V_PRE, j] == 1.0 else 0.0)
                if bs[j] > 0:
                    bq[nread] = bs[j]
                    nread += 1
        SI[SI_PTOK, s] = np.int64(psum(bq, nread)) if nread else 0
        SI[SI_PSMP, s] = nfirst if reads and npre > 0 and csum != 0 else 0
        for w in range(Wd):
            n = 0
            for j in range(m if nread else 0):
                if bs[j] > 0:
                    bt[n], bu[n] = _terms(bs[j], min(X[X_DREAD, j], dbudget), dw[w])
                    n += 1
            SF[L[L_PKV] + w, s] = psum(bt, n)
            SF[L[L_PQK] + w, s] = psum(bu, n)


@numba.njit(cache=True)
def draws(U, ST, on, k, nsurv, surv, match, width, miss, horizon, m, Q, E):
    """(verify width, tokens emitted) per step and sequence: drafts accepted = how many survival
    probabilities (decreasing) exceed one uniform draw (U: the generator's stream, in order; as
    rng.random((horizon, m))); an n-gram miss verifies `miss` positions (its bonus only, or k+1
    where the engine pads its drafts) and emits the bonus token."""
    u0 = ST[ST_UCUR]
    for i in range(horizon):
        for j in range(m):
            if not on:
                Q[i, j] = 1.0
                E[i, j] = 1.0
                continue
            u = U[u0]
            u0 += 1
            below = 0
            for t in range(nsurv):
                if surv[t] <= u:
                    below += 1
            E[i, j] = float(k - below)
    if on and match < 1.0:
        for i in range(horizon):
            for j in range(m):
                hit = U[u0] < match
                u0 += 1
                Q[i, j] = 1.0 + k if hit else miss
                E[i, j] = 1.0 + (E[i, j] if hit else 0.0)
    elif on:
        for i in range(horizon):
            for j in range(m):
                Q[i, j] = width
                E[i, j] = 1.0 + E[i, j]
    ST[ST_UCUR] = u0
