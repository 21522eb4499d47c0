"""The serving simulator's compiled loop (numba): admission, block scheduling, acceptance draws, the
work of each step (records.py) and what clients see, in step indices. It never prices: whenever a
decision needs the seconds of steps not yet priced (a timed arrival - the closed-loop clients' first
requests, open-loop arrivals - against the clock, or the step a block is cut at), it takes the decision
on estimated times and goes on (see _verify), and stops when too many are in flight; `simulator._Engine`
then prices every recorded step through `StepModel.price` and resumes it, which checks the decisions on
the true times and replays from the first wrong one. Step times become seconds at the end (arrivals,
first tokens, finishes and inter-token gaps are recorded as step indices).

It replays the numpy simulator's semantics operation for operation, so the numbers equal its: the
random stream is drawn in the same order, and sums over a step's sequences add in numpy's pairwise
order. Its arrays come in five named tuples (records.py: State, Params, Records, Spec, Scratch), read
at the offsets named there. The functions `run` calls are inlined into it (inline="always", numba's
IR): a call takes a reference (an atomic count) to every array it is passed, which costs more than a
short block's work. Imported by the simulator on first use only (a plain `predict` never loads numba);
compiled code is cached next to the source.
"""

from __future__ import annotations

import numba
import numpy as np

from .records import (colsum, draws, step_ends, estimate_ends, psum, record_steps, DONE, PRICE, GROW_STEPS, GROW_ITL,
                      STALL, DRAW, ST_M, ST_NEXT, ST_ISSUED, ST_NDONE, ST_NSTEPS, ST_NPRICED, ST_NBLOCKS, ST_NITL,
                      ST_PHASE, ST_BSTEPS, ST_BENDED, ST_NREQ, ST_UCUR, ST_NSPEC, ST_FORCE, ST_PFROM, ST_ONBLOCK,
                      PHASE_NEXT, PHASE_CUT, PHASE_FINISH, SF0_KV_USED, SF0_NOW, SF0_TKNOWN, X_CTX, X_LEFT, X_REM,
                      X_DREAD, XI_RID, XI_LAST, IP_MAX_SEQS, IP_MEASURE_FROM, IP_SEGMENT, IP_ROUTE_K, IP_LOW, IP_HIGH,
                      IP_CLOSED, IP_CHUNKED, FP_MAX_TOKENS, FP_KV_CAP, R_PROMPT, R_OUTPUT, R_NEED, R_ARR, MI_ON, MI_K,
                      MI_NSURV, MI_NGROUPS, MF_WIDTH, MF_MATCH, MF_MISS, SF_DT, SF_ENDS, SF_PRE, SI_MODE, SI_TOK,
                      II_STEP, II_FROM, RI_ARR, RI_FIRST, RI_FIN, DEC_KIND, DEC_TIME, DEC_STEP, DEC_OUTCOME, DEC_DRAWN,
                      DEC_ADMIT, DEC_BLOCK, EST_TOK0, EST_DT0, EST_TOK1, EST_DT1, V_DEC, V_CHUNK, V_FIRST, V_PRE)
from .routing import ROUTE_ON, route_k

_route = numba.njit(cache=True)(route_k)


@numba.njit(cache=True, inline="always")
def _admit(state, params, rec, spec):
    """FIFO admission while seats, the KV cache and arrivals allow. A timed arrival against a clock
    with unpriced steps is decided on their estimated times (a speculation, logged; see _verify); True
    when it cannot be (the driver prices first)."""
    ST, SF0, X, XI, R, DEC = state.ST, state.SF0, state.X, state.XI, params.R, spec.DEC
    seats, kv_cap, RI = params.IP[IP_MAX_SEQS], params.FP[FP_KV_CAP], rec.RI
    while ST[ST_NEXT] < ST[ST_ISSUED]:
        nx = ST[ST_NEXT]
        if not (ST[ST_M] < seats and SF0[SF0_KV_USED] + R[R_NEED, nx] <= kv_cap):
            return False
        t = R[R_ARR, nx]
        if RI[RI_ARR, nx] < 0 and not (t <= SF0[SF0_TKNOWN] + 1e-15):  # a timed arrival not certainly passed
            arrived = t <= SF0[SF0_NOW] + 1e-15
            if ST[ST_NPRICED] == ST[ST_NSTEPS]:  # exact
                pass
            elif _can_speculate(state, spec):
                d = _snapshot(state, spec)
                DEC[d, DEC_KIND], DEC[d, DEC_TIME], DEC[d, DEC_STEP] = DEC_ADMIT, t, ST[ST_NSTEPS] - 1
                DEC[d, DEC_OUTCOME] = arrived
                ST[ST_NSPEC] = d + 1
            else:  # priced first, then decided exactly
                ST[ST_FORCE] = 0
                return True
            if not arrived:
                return False
        SF0[SF0_KV_USED] += R[R_NEED, nx]
        ST[ST_NEXT] += 1
        j = ST[ST_M]
        XI[XI_RID, j] = nx
        X[X_CTX, j] = 0.0
        X[X_DREAD, j] = 0.0
        X[X_LEFT, j] = R[R_PROMPT, nx]
        X[X_REM, j] = R[R_OUTPUT, nx]
        XI[XI_LAST, j] = -1
        ST[ST_M] = j + 1
    return False


# ------------------------------------------------------------------ speculation on step times
# Where a decision needs the time of steps not yet priced (a timed arrival against the clock, or the
# step a block is cut at), the loop takes it on estimated times (each step: the last priced step of its
# mode with or without prefill) and goes on; after the driver prices the steps, _verify checks every
# such decision on the true times in order and, at the first that differs, restores the state saved
# before it and decides it exactly (pricing first). The numbers are those of an exact run.
SPEC_DECISIONS = 16  # decisions in flight (the first axis of Spec's arrays)
SPEC_STEPS = 256  # most unpriced steps to speculate over


@numba.njit(cache=True, inline="always")
def _can_speculate(state, spec):
    ST = state.ST
    return (ST[ST_FORCE] == 0 and ST[ST_NSPEC] < spec.DEC.shape[0]
            and ST[ST_NSTEPS] - ST[ST_NPRICED] < SPEC_STEPS)


@numba.njit(cache=True, inline="always")
def _snapshot(state, spec):
    """Save the state before a speculative decision (in Spec's arrays, at the next decision's index)."""
    d, m = state.ST[ST_NSPEC], state.ST[ST_M]
    spec.ST[d, :] = state.ST
    spec.SF0[d, :] = state.SF0
    spec.X[d, :, :m] = state.X[:, :m]
    spec.XI[d, :, :m] = state.XI[:, :m]
    spec.ROUTE[d] = state.ROUTE[ROUTE_ON]
    return d


@numba.njit(cache=True, inline="always")
def _verify(state, rec, spec):
    """After pricing: update the estimates, check the decisions in order on the true step ends and roll
    back to the state before the first wrong one (the next decision is then taken exactly)."""
    ST, SF, SI, EST = state.ST, rec.SF, rec.SI, spec.EST
    for s in range(ST[ST_PFROM], ST[ST_NSTEPS]):  # the last two priced steps per mode, with or without prefill
        e = EST[SI[SI_MODE, s], 1 if SF[SF_PRE, s] > 0 else 0]
        if SI[SI_TOK, s] != e[EST_TOK1]:
            e[EST_TOK0], e[EST_DT0] = e[EST_TOK1], e[EST_DT1]
        e[EST_TOK1], e[EST_DT1] = SI[SI_TOK, s], SF[SF_DT, s]
    ST[ST_PFROM] = ST[ST_NSTEPS]
    DEC, ends = spec.DEC, SF[SF_ENDS]
    for d in range(ST[ST_NSPEC]):
        t, a, b = DEC[d, DEC_TIME], int(DEC[d, DEC_STEP]), int(DEC[d, DEC_OUTCOME])
        if DEC[d, DEC_KIND] == DEC_ADMIT:  # admission: arrived by the end of step a
            ok = (t <= ends[a] + 1e-15) == (b == 1)
        elif b == int(DEC[d, DEC_DRAWN]):  # a block of H steps from a, kept whole
            ok = ends[a + b - 1] <= t or ends[a + b - 2] < t
        else:  # ... cut after b steps (a tie at the cut counts as wrong: decided again exactly)
            ok = ends[a + b - 1] > t and (b == 1 or ends[a + b - 2] < t)
        if not ok:
            m = spec.ST[d, ST_M]
            ST[:] = spec.ST[d]
            state.SF0[:] = spec.SF0[d]
            state.X[:, :m] = spec.X[d, :, :m]
            state.XI[:, :m] = spec.XI[d, :, :m]
            state.ROUTE[ROUTE_ON] = spec.ROUTE[d]
            if ST[ST_NPRICED] < ST[ST_NSTEPS]:  # (a state saved exact keeps its clock: it may follow an idle wait)
                state.SF0[SF0_NOW] = state.SF0[SF0_TKNOWN] = ends[ST[ST_NSTEPS] - 1]
            ST[ST_NPRICED] = ST[ST_PFROM] = ST[ST_NSTEPS]
            ST[ST_BENDED] = ST[ST_NBLOCKS]
            ST[ST_FORCE] = 1
            break
    ST[ST_NSPEC] = 0


@numba.njit(cache=True, inline="always")
def _schedule(state, params, rec, scratch):
    """The next block (simulator's semantics): prefill chunks from the token budget left after decodes
    and verifies (FIFO), acceptance draws, up to the first completion or IP_SEGMENT steps (one step with
    prefill left); each step's Forward sums, sequences, uniformity and tokens recorded."""
    ST, X, IP, FP = state.ST, state.X, params.IP, params.FP
    Q, E, A, V = scratch.Q, scratch.E, scratch.A, scratch.V
    m = ST[ST_M]
    nd = 0
    for j in range(m):
        V[V_DEC, j] = 1.0 if X[X_LEFT, j] == 0 else 0.0
        nd += 1 if X[X_LEFT, j] == 0 else 0
    k2m = params.k2m
    mi = k2m[_route(m, IP[IP_ROUTE_K], params.schedule, IP[IP_LOW], IP[IP_HIGH], state.ROUTE)]
    alone = IP[IP_CHUNKED] == 0 and nd < m  # without chunked prefill, prompts run in a step of their own
    if alone:
        mi = k2m[0]  # ... which does not speculate
    MI, MF = params.MI, params.MF
    on, k, nsurv, ngroups = MI[mi, MI_ON], MI[mi, MI_K], MI[mi, MI_NSURV], MI[mi, MI_NGROUPS]
    width, match, miss = MF[mi, MF_WIDTH], MF[mi, MF_MATCH], MF[mi, MF_MISS]
    ST[ST_ONBLOCK] = on
    budget = FP[FP_MAX_TOKENS] if alone else max(FP[FP_MAX_TOKENS] - nd * width, 0.0)
    npre = m - nd
    c = 0.0
    p = 0
    chunks = scratch.w1
    for j in range(m):  # chunks, FIFO: budget - (cumsum(left) - left), clipped to [0, left]
        V[V_CHUNK, j] = 0.0
        V[V_FIRST, j] = 0.0
        V[V_PRE, j] = 0.0
        if V[V_DEC, j] == 0.0:
            left = X[X_LEFT, j]
            c = left if p == 0 else c + left
            V[V_CHUNK, j] = min(max(budget - (c - left), 0.0), left)
            V[V_PRE, j] = 1.0
            chunks[p] = V[V_CHUNK, j]
            p += 1
    csum = psum(chunks, npre)
    if npre and nd == 0 and csum == 0:
        for j in range(m):
            if V[V_PRE, j] == 1.0:  # a prompt longer than the budget still progresses
                V[V_CHUNK, j] = min(X[X_LEFT, j], FP[FP_MAX_TOKENS])
                chunks[0] = V[V_CHUNK, j]
                csum = psum(chunks, npre)
                break
    simple = True
    nfirst = 0
    for j in range(m):
        if V[V_PRE, j] == 1.0 and V[V_CHUNK, j] != X[X_LEFT, j]:
            simple = False
        if V[V_PRE, j] == 1.0 and V[V_CHUNK, j] == X[X_LEFT, j]:
            V[V_FIRST, j] = 1.0
            nfirst += 1
    horizon = 1
    if simple:
        rem_min = np.inf
        for j in range(m):
            rem_min = min(rem_min, X[X_REM, j])
        horizon = int(min(float(IP[IP_SEGMENT]), rem_min))
    if npre:
        horizon = 1 if alone else max(horizon, 1)
    draws(params.U, ST, on, k, nsurv, params.MS[mi], match, width, miss, horizon, m, Q, E)
    for i in range(horizon):
        for j in range(m):
            A[i, j] = E[i, j]
    if npre:
        for j in range(m):
            if V[V_PRE, j] == 1.0:  # prompts process their chunk and emit nothing but the first token
                Q[0, j] = V[V_CHUNK, j]
                E[0, j] = V[V_FIRST, j]
                A[0, j] = V[V_CHUNK, j]
            elif alone:  # running sequences wait out a prefill-only step
                Q[0, j] = 0.0
                E[0, j] = 0.0
                A[0, j] = 0.0
    # steps: up to the first completion; tokens past an output's end are not emitted
    cum = scratch.w2
    steps = horizon
    for i in range(horizon):
        fin = False
        for j in range(m):
            cum[j] = E[i, j] if i == 0 else cum[j] + E[i, j]
            fin = fin or cum[j] >= X[X_REM, j]
            E[i, j] = max(min(E[i, j], X[X_REM, j] - (cum[j] - E[i, j])), 0.0)
        if fin:
            steps = i + 1
            break
    s0 = ST[ST_NSTEPS]
    b = ST[ST_NBLOCKS]
    rec.BS[b] = s0
    rec.BB[b] = state.SF0[SF0_NOW] if ST[ST_NPRICED] == s0 else np.nan
    ST[ST_NBLOCKS] = b + 1
    ST[ST_NSTEPS] = s0 + steps
    ST[ST_BSTEPS] = steps
    record_steps(state, params, rec, scratch, s0, steps, m, mi, on, nd, npre, nfirst, csum, ngroups)


@numba.njit(cache=True, inline="always")
def _finish_block(state, params, rec, scratch):
    """Cut the block where an admissible request arrives (its steps are priced then), record what
    clients see (inter-token gaps, first tokens) and move contexts, prompts and outputs on; finished
    requests leave and, closed-loop, their clients send the next."""
    ST, SF0, X, XI, R = state.ST, state.SF0, state.X, state.XI, params.R
    SF, RI, II, IW = rec.SF, rec.RI, rec.II, rec.IW
    E, A, V = scratch.E, scratch.A, scratch.V
    m = ST[ST_M]
    start = rec.BS[ST[ST_NBLOCKS] - 1]
    steps = ST[ST_BSTEPS]
    if ST[ST_PHASE] == PHASE_CUT:  # the step running when the next request arrives completes the block
        t = R[R_ARR, ST[ST_NEXT]]
        if SF[SF_ENDS, start + steps - 1] > t:
            cut = steps
            for i in range(steps):
                if SF[SF_ENDS, start + i] >= t:
                    cut = i + 1
                    break
            if cut < steps:
                steps = cut
                ST[ST_NSTEPS] = ST[ST_NPRICED] = ST[ST_PFROM] = start + steps
                SF0[SF0_NOW] = SF0[SF0_TKNOWN] = SF[SF_ENDS, start + steps - 1]
        ST[ST_BSTEPS] = steps
        ST[ST_PHASE] = PHASE_FINISH
        ST[ST_FORCE] = 0
    if ST[ST_NITL] + steps + m + (steps - 1) * m > len(IW):
        return GROW_ITL
    n = ST[ST_NITL]
    mf = params.IP[IP_MEASURE_FROM]
    for i in range(1, steps):  # consecutive emissions: the step time is the gap
        cnt = 0
        for j in range(m):
            if E[i, j] > 0 and E[i - 1, j] > 0 and XI[XI_RID, j] >= mf:
                cnt += 1
        II[II_STEP, n], II[II_FROM, n], IW[n] = start + i, -1, cnt
        n += 1
    for j in range(m):  # gaps that start before this block
        if E[0, j] > 0 and XI[XI_RID, j] >= mf and XI[XI_LAST, j] >= 0:
            II[II_STEP, n], II[II_FROM, n], IW[n] = start, XI[XI_LAST, j], 1.0
            n += 1
    for i in range(1, steps):  # ... or after a silent step (a just-prefilled sequence)
        for j in range(m):
            if E[i, j] > 0 and XI[XI_RID, j] >= mf and not E[i - 1, j] > 0:
                II[II_STEP, n], II[II_FROM, n] = start + i, XI[XI_LAST, j] if XI[XI_LAST, j] >= 0 else start
                IW[n] = 1.0
                n += 1
    ST[ST_NITL] = n
    last = start + steps - 1
    nfin = 0
    colbuf, needs = scratch.w1, scratch.w2
    for j in range(m):
        if V[V_FIRST, j] == 1.0:
            RI[RI_FIRST, XI[XI_RID, j]] = start
        X[X_CTX, j] = X[X_CTX, j] + colsum(A, j, steps, m, colbuf)
        if ST[ST_ONBLOCK] == 1:  # a speculating block: the draft has read the whole context
            X[X_DREAD, j] = X[X_CTX, j]
        if V[V_PRE, j] == 1.0:
            X[X_LEFT, j] -= V[V_CHUNK, j]
        X[X_REM, j] = X[X_REM, j] - colsum(E, j, steps, m, colbuf)
        for i in range(steps - 1, -1, -1):
            if E[i, j] > 0:
                XI[XI_LAST, j] = start + i
                break
        if X[X_REM, j] <= 0:
            needs[nfin] = R[R_NEED, XI[XI_RID, j]]
            nfin += 1
    if nfin:
        SF0[SF0_KV_USED] -= psum(needs, nfin)
        keep = 0
        for j in range(m):
            if X[X_REM, j] <= 0:
                RI[RI_FIN, XI[XI_RID, j]] = last
                continue
            X[X_CTX, keep], X[X_LEFT, keep], X[X_REM, keep] = X[X_CTX, j], X[X_LEFT, j], X[X_REM, j]
            X[X_DREAD, keep] = X[X_DREAD, j]
            XI[XI_RID, keep], XI[XI_LAST, keep] = XI[XI_RID, j], XI[XI_LAST, j]
            keep += 1
        ST[ST_M] = keep
        ST[ST_NDONE] += nfin
        if params.IP[IP_CLOSED] == 1:  # each finished client sends its next request now
            add = min(nfin, ST[ST_NREQ] - ST[ST_ISSUED])
            for r in range(ST[ST_ISSUED], ST[ST_ISSUED] + add):
                RI[RI_ARR, r] = last
            ST[ST_ISSUED] += add
    ST[ST_PHASE] = PHASE_NEXT
    return DONE


@numba.njit(cache=True)
def run(state, params, rec, spec, scratch):
    """Steps until every request completes (DONE) or the driver must act: price the recorded steps
    (PRICE), grow the step or gap records (GROW_STEPS, GROW_ITL), draw more uniforms (DRAW); STALL if
    nothing can run. The arrays: records.py's State, Params, Records, Spec and Scratch."""
    ST, SF0, R, IP, U, kv_cap = state.ST, state.SF0, params.R, params.IP, params.U, params.FP[FP_KV_CAP]
    SF, BS, RI, DEC = rec.SF, rec.BS, rec.RI, spec.DEC
    if ST[ST_NPRICED] == ST[ST_NSTEPS]:  # priced: true ends, then the speculative decisions checked
        step_ends(state, rec)
        _verify(state, rec, spec)
    while True:
        if ST[ST_PHASE] != PHASE_NEXT:
            if _finish_block(state, params, rec, scratch) == GROW_ITL:
                return GROW_ITL
            continue
        if ST[ST_NDONE] >= ST[ST_NREQ]:
            return DONE
        if ST[ST_NSPEC] and ST[ST_NSTEPS] - ST[ST_NPRICED] >= SPEC_STEPS:  # check the decisions before going on
            return PRICE
        if _admit(state, params, rec, spec):
            return PRICE
        nx = ST[ST_NEXT]
        if ST[ST_M] == 0:  # idle until the next request arrives
            if nx >= ST[ST_ISSUED] or RI[RI_ARR, nx] >= 0:
                return STALL
            if ST[ST_NPRICED] < ST[ST_NSTEPS]:
                return PRICE
            SF0[SF0_NOW] = SF0[SF0_TKNOWN] = max(SF0[SF0_NOW], R[R_ARR, nx])
            continue
        admissible = (nx < ST[ST_ISSUED] and ST[ST_M] < IP[IP_MAX_SEQS]
                      and SF0[SF0_KV_USED] + R[R_NEED, nx] <= kv_cap)
        if ST[ST_NSTEPS] + IP[IP_SEGMENT] > SF.shape[1] or ST[ST_NBLOCKS] + 1 > len(BS):
            return GROW_STEPS
        if len(U) and ST[ST_UCUR] + 2 * IP[IP_SEGMENT] * ST[ST_M] > len(U):  # (an arm that never drafts draws none)
            return DRAW
        timed = admissible and RI[RI_ARR, nx] < 0  # a timed arrival may cut the block
        spec_on = timed and _can_speculate(state, spec)
        d = _snapshot(state, spec) if spec_on else 0
        _schedule(state, params, rec, scratch)
        if timed and ST[ST_BSTEPS] > 1 and not spec_on:
            ST[ST_PHASE] = PHASE_CUT
            return PRICE
        estimate_ends(state, rec, spec)
        if timed and ST[ST_BSTEPS] > 1:  # cut where the arrival falls on the estimated ends
            h, t, ends = ST[ST_BSTEPS], R[R_ARR, nx], SF[SF_ENDS]
            s0, kept = ST[ST_NSTEPS] - h, h
            if ends[ST[ST_NSTEPS] - 1] > t:
                for i in range(h):
                    if ends[s0 + i] >= t:
                        kept = min(i + 1, h)
                        break
            DEC[d, DEC_KIND], DEC[d, DEC_TIME], DEC[d, DEC_STEP] = DEC_BLOCK, t, s0
            DEC[d, DEC_OUTCOME], DEC[d, DEC_DRAWN] = kept, h
            ST[ST_NSPEC] = d + 1
            ST[ST_NSTEPS] = s0 + kept
            ST[ST_BSTEPS] = kept
            SF0[SF0_NOW] = ends[s0 + kept - 1]
        ST[ST_PHASE] = PHASE_FINISH
