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
order. Imported by the simulator on first use only (a plain `predict` never loads numba); compiled code
is cached next to the source.
"""

from __future__ import annotations

import numba
import numpy as np

from .records import (_colsum, _draws, _psum, _record, DONE, PRICE, GROW_STEPS, GROW_ITL, STALL, DRAW, M, NEXT, ISSUED,
                      NDONE, NSTEPS, NPRICED, NBLOCKS, NITL, PHASE, BSTEPS, BENDED, NREQ, UCUR, KV_USED, NOW,
                      NSPEC, FORCE, PFROM, ONBLOCK, TKNOWN, MODE, PRE, TOK,
                      MAX_SEQS, MEASURE_FROM, SEGMENT, ROUTE_K, LOW, HIGH, CLOSED, CHUNKED, MAX_TOKENS, KV_CAP, DT, ENDS,
                      V_DEC, V_CHUNK, V_FIRST, V_PRE, X_CTX, X_LEFT, X_REM, X_DREAD, XI_RID, XI_LAST, R_PROMPT, R_OUTPUT,
                      R_NEED, R_ARR, RI_ARR, RI_FIRST, RI_FIN)
from .routing import route_k

_route = numba.njit(cache=True)(route_k)

@numba.njit(cache=True)
def _ends(ST, SF0, SF, BS, BB):
    """Step end times of the blocks priced since the last call: base + the block's running sum."""
    nb = ST[NBLOCKS]
    if ST[BENDED] == nb or ST[NPRICED] < ST[NSTEPS]:
        return
    for b in range(ST[BENDED], nb):
        start = BS[b]
        stop = BS[b + 1] if b + 1 < nb else ST[NSTEPS]
        base = BB[b] if not np.isnan(BB[b]) else SF[ENDS, start - 1]
        s = 0.0
        for i in range(start, stop):
            s = SF[DT, i] if i == start else s + SF[DT, i]
            SF[ENDS, i] = base + s
    ST[BENDED] = nb
    if ST[NSTEPS] > 0:
        SF0[NOW] = SF0[TKNOWN] = SF[ENDS, ST[NSTEPS] - 1]


@numba.njit(cache=True)
def _admit(ST, SF0, IP, FP, R, RI, X, XI, rstate, SP):
    """FIFO admission while seats, the KV cache and arrivals allow. A timed arrival against a clock
    with unpriced steps is decided on their estimated times (a speculation, logged; see _verify); True
    when it cannot be (the driver prices first)."""
    while ST[NEXT] < ST[ISSUED]:
        nx = ST[NEXT]
        if not (ST[M] < IP[MAX_SEQS] and SF0[KV_USED] + R[R_NEED, nx] <= FP[KV_CAP]):
            return False
        t = R[R_ARR, nx]
        if RI[RI_ARR, nx] < 0 and not (t <= SF0[TKNOWN] + 1e-15):  # a timed arrival not certainly passed
            arrived = t <= SF0[NOW] + 1e-15
            if ST[NPRICED] == ST[NSTEPS]:  # exact
                pass
            elif _can_speculate(ST, SP[5]):
                d = _snapshot(ST, SF0, X, XI, rstate, SP)
                SP[5][d, 0], SP[5][d, 1], SP[5][d, 2], SP[5][d, 3] = 0.0, t, ST[NSTEPS] - 1, arrived
                ST[NSPEC] = d + 1
            else:  # priced first, then decided exactly
                ST[FORCE] = 0
                return True
            if not arrived:
                return False
        SF0[KV_USED] += R[R_NEED, nx]
        ST[NEXT] += 1
        j = ST[M]
        XI[XI_RID, j] = nx
        X[X_CTX, j] = 0.0
        X[X_DREAD, j] = 0.0
        X[X_LEFT, j] = R[R_PROMPT, nx]
        X[X_REM, j] = R[R_OUTPUT, nx]
        XI[XI_LAST, j] = -1
        ST[M] = j + 1
    return False


# ------------------------------------------------------------------ speculation on step times
# Where a decision needs the time of steps not yet priced (a timed arrival against the clock, or the
# step a block is cut at), the loop takes it on estimated times (each step: the last priced step of its
# mode with or without prefill) and goes on; after the driver prices the steps, _verify checks every
# such decision on the true times in order and, at the first that differs, restores the state saved
# before it and decides it exactly (pricing first). The numbers are those of an exact run.
SPEC_DECISIONS = 16  # decisions in flight (SP arrays' first axis)
SPEC_STEPS = 256  # most unpriced steps to speculate over


@numba.njit(cache=True)
def _can_speculate(ST, DEC):
    return ST[FORCE] == 0 and ST[NSPEC] < DEC.shape[0] and ST[NSTEPS] - ST[NPRICED] < SPEC_STEPS


@numba.njit(cache=True)
def _snapshot(ST, SF0, X, XI, rstate, SP):
    """Save the state before a speculative decision (SP: ints, floats, X, XI, route state, log, estimates)."""
    d, m = ST[NSPEC], ST[M]
    SP[0][d, :] = ST
    SP[1][d, :] = SF0
    SP[2][d, :, :m] = X[:, :m]
    SP[3][d, :, :m] = XI[:, :m]
    SP[4][d] = rstate[0]
    return d


@numba.njit(cache=True)
def _verify(ST, SF0, X, XI, SF, SI, rstate, SP):
    """After pricing: update the estimates, check the decisions in order on the true step ends and roll
    back to the state before the first wrong one (the next decision is then taken exactly)."""
    EST = SP[6]
    for s in range(ST[PFROM], ST[NSTEPS]):  # the last two priced steps per mode, with or without prefill
        e = EST[SI[MODE, s], 1 if SF[PRE, s] > 0 else 0]
        if SI[TOK, s] != e[2]:
            e[0], e[1] = e[2], e[3]
        e[2], e[3] = SI[TOK, s], SF[DT, s]
    ST[PFROM] = ST[NSTEPS]
    DEC, ends = SP[5], SF[ENDS]
    for d in range(ST[NSPEC]):
        t, a, b = DEC[d, 1], int(DEC[d, 2]), int(DEC[d, 3])
        if DEC[d, 0] == 0.0:  # admission: arrived by the end of step a
            ok = (t <= ends[a] + 1e-15) == (b == 1)
        elif b == int(DEC[d, 4]):  # a block of H steps from a, kept whole
            ok = ends[a + b - 1] <= t or ends[a + b - 2] < t
        else:  # ... cut after b steps (a tie at the cut counts as wrong: decided again exactly)
            ok = ends[a + b - 1] > t and (b == 1 or ends[a + b - 2] < t)
        if not ok:
            m = SP[0][d, M]
            ST[:] = SP[0][d]
            SF0[:] = SP[1][d]
            X[:, :m] = SP[2][d, :, :m]
            XI[:, :m] = SP[3][d, :, :m]
            rstate[0] = SP[4][d]
            if ST[NPRICED] < ST[NSTEPS]:  # (a state saved exact keeps its clock: it may follow an idle wait)
                SF0[NOW] = SF0[TKNOWN] = ends[ST[NSTEPS] - 1]
            ST[NPRICED] = ST[PFROM] = ST[NSTEPS]
            ST[BENDED] = ST[NBLOCKS]
            ST[FORCE] = 1
            break
    ST[NSPEC] = 0


@numba.njit(cache=True)
def _estimate(ST, SF0, SF, SI, BS, BB, EST):
    """Estimated seconds and ends of the last block's (unpriced) steps."""
    b = ST[NBLOCKS] - 1
    start = BS[b]
    base = BB[b] if not np.isnan(BB[b]) else SF[ENDS, start - 1]
    s = 0.0
    for i in range(start, ST[NSTEPS]):  # the secant through the last two priced steps of its kind, in tokens
        e = EST[SI[MODE, i], 1 if SF[PRE, i] > 0 else 0]
        slope = (e[3] - e[1]) / (e[2] - e[0]) if e[2] != e[0] and e[0] > 0 else 0.0
        SF[DT, i] = max(e[3] + slope * (SI[TOK, i] - e[2]), 0.0)
        s = SF[DT, i] if i == start else s + SF[DT, i]
        SF[ENDS, i] = base + s
    SF0[NOW] = SF[ENDS, ST[NSTEPS] - 1]


@numba.njit(cache=True)
def _schedule(U, ST, SF0, IP, FP, sched, rstate, k2m, MI, MF, MS, MW, tw, dw, X, XI, SF, SI, L, BS, BB,
              Q, E, A, V, buf):
    """The next block (simulator's semantics): prefill chunks from the token budget left after decodes
    and verifies (FIFO), acceptance draws, up to the first completion or SEGMENT steps (one step with
    prefill left); each step's Forward sums, sequences, uniformity and tokens recorded."""
    m = ST[M]
    nd = 0
    for j in range(m):
        V[V_DEC, j] = 1.0 if X[X_LEFT, j] == 0 else 0.0
        nd += 1 if X[X_LEFT, j] == 0 else 0
    mi = k2m[_route(m, IP[ROUTE_K], sched, IP[LOW], IP[HIGH], rstate)]
    alone = IP[CHUNKED] == 0 and nd < m  # without chunked prefill, prompts run in a step of their own
    if alone:
        mi = k2m[0]  # ... which does not speculate
    on, k, nsurv, ngroups = MI[mi, 0], MI[mi, 1], MI[mi, 2], MI[mi, 3]
    width, match, miss = MF[mi, 0], MF[mi, 1], MF[mi, 2]
    ST[ONBLOCK] = on
    budget = FP[MAX_TOKENS] if alone else max(FP[MAX_TOKENS] - nd * width, 0.0)
    npre = m - nd
    c = 0.0
    p = 0
    for j in range(m):  # chunks, FIFO: budget - (cumsum(left) - left), clipped to [0, left]
        V[V_CHUNK, j] = 0.0
        V[V_FIRST, j] = 0.0
        V[V_PRE, j] = 0.0
        if V[V_DEC, j] == 0.0:
            left = X[X_LEFT, j]
            c = left if p == 0 else c + left
            V[V_CHUNK, j] = min(max(budget - (c - left), 0.0), left)
            V[V_PRE, j] = 1.0
            buf[0, p] = V[V_CHUNK, j]
            p += 1
    csum = _psum(buf[0], npre)
    if npre and nd == 0 and csum == 0:
        for j in range(m):
            if V[V_PRE, j] == 1.0:  # a prompt longer than the budget still progresses
                V[V_CHUNK, j] = min(X[X_LEFT, j], FP[MAX_TOKENS])
                buf[0, 0] = V[V_CHUNK, j]
                csum = _psum(buf[0], npre)
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
        horizon = int(min(float(IP[SEGMENT]), rem_min))
    if npre:
        horizon = 1 if alone else max(horizon, 1)
    _draws(U, ST, on, k, nsurv, MS[mi], match, width, miss, horizon, m, Q, E)
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
    cum = buf[1]
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
    s0 = ST[NSTEPS]
    b = ST[NBLOCKS]
    BS[b] = s0
    BB[b] = SF0[NOW] if ST[NPRICED] == s0 else np.nan
    ST[NBLOCKS] = b + 1
    ST[NSTEPS] = s0 + steps
    ST[BSTEPS] = steps
    _record(ST, SF0, IP, FP, MI, MW, tw, dw, X, SF, SI, L, Q, E, A, V, buf, s0, steps, m, mi, on, nd, npre,
            nfirst, csum, ngroups)


@numba.njit(cache=True)
def _finish_block(ST, SF0, IP, R, RI, X, XI, SF, BS, II, IW, Q, E, A, V, buf):
    """Cut the block where an admissible request arrives (its steps are priced then), record what
    clients see (inter-token gaps, first tokens) and move contexts, prompts and outputs on; finished
    requests leave and, closed-loop, their clients send the next."""
    m = ST[M]
    start = BS[ST[NBLOCKS] - 1]
    steps = ST[BSTEPS]
    if ST[PHASE] == 1:  # the step running when the next request arrives completes the block
        t = R[R_ARR, ST[NEXT]]
        if SF[ENDS, start + steps - 1] > t:
            cut = steps
            for i in range(steps):
                if SF[ENDS, start + i] >= t:
                    cut = i + 1
                    break
            if cut < steps:
                steps = cut
                ST[NSTEPS] = ST[NPRICED] = ST[PFROM] = start + steps
                SF0[NOW] = SF0[TKNOWN] = SF[ENDS, start + steps - 1]
        ST[BSTEPS] = steps
        ST[PHASE] = 2
        ST[FORCE] = 0
    if ST[NITL] + steps + m + (steps - 1) * m > len(IW):
        return GROW_ITL
    n = ST[NITL]
    mf = IP[MEASURE_FROM]
    for i in range(1, steps):  # consecutive emissions: the step time is the gap
        cnt = 0
        for j in range(m):
            if E[i, j] > 0 and E[i - 1, j] > 0 and XI[XI_RID, j] >= mf:
                cnt += 1
        II[0, n], II[1, n], IW[n] = start + i, -1, cnt
        n += 1
    for j in range(m):  # gaps that start before this block
        if E[0, j] > 0 and XI[XI_RID, j] >= mf and XI[XI_LAST, j] >= 0:
            II[0, n], II[1, n], IW[n] = start, XI[XI_LAST, j], 1.0
            n += 1
    for i in range(1, steps):  # ... or after a silent step (a just-prefilled sequence)
        for j in range(m):
            if E[i, j] > 0 and XI[XI_RID, j] >= mf and not E[i - 1, j] > 0:
                II[0, n], II[1, n], IW[n] = start + i, XI[XI_LAST, j] if XI[XI_LAST, j] >= 0 else start, 1.0
                n += 1
    ST[NITL] = n
    last = start + steps - 1
    nfin = 0
    for j in range(m):
        if V[V_FIRST, j] == 1.0:
            RI[RI_FIRST, XI[XI_RID, j]] = start
        X[X_CTX, j] = X[X_CTX, j] + _colsum(A, j, steps, m, buf[0])
        if ST[ONBLOCK] == 1:  # a speculating block: the draft has read the whole context
            X[X_DREAD, j] = X[X_CTX, j]
        if V[V_PRE, j] == 1.0:
            X[X_LEFT, j] -= V[V_CHUNK, j]
        X[X_REM, j] = X[X_REM, j] - _colsum(E, j, steps, m, buf[0])
        for i in range(steps - 1, -1, -1):
            if E[i, j] > 0:
                XI[XI_LAST, j] = start + i
                break
        if X[X_REM, j] <= 0:
            buf[1, nfin] = R[R_NEED, XI[XI_RID, j]]
            nfin += 1
    if nfin:
        SF0[KV_USED] -= _psum(buf[1], nfin)
        keep = 0
        for j in range(m):
            if X[X_REM, j] <= 0:
                RI[RI_FIN, XI[XI_RID, j]] = last
                continue
            X[X_CTX, keep], X[X_LEFT, keep], X[X_REM, keep] = X[X_CTX, j], X[X_LEFT, j], X[X_REM, j]
            X[X_DREAD, keep] = X[X_DREAD, j]
            XI[XI_RID, keep], XI[XI_LAST, keep] = XI[XI_RID, j], XI[XI_LAST, j]
            keep += 1
        ST[M] = keep
        ST[NDONE] += nfin
        if IP[CLOSED] == 1:  # each finished client sends its next request now
            add = min(nfin, ST[NREQ] - ST[ISSUED])
            for r in range(ST[ISSUED], ST[ISSUED] + add):
                RI[RI_ARR, r] = last
            ST[ISSUED] += add
    ST[PHASE] = 0
    return DONE


@numba.njit(cache=True)
def run(U, ST, SF0, IP, FP, sched, rstate, k2m, MI, MF, MS, MW, tw, dw, R, RI, X, XI, SF, SI, L, BS, BB, II, IW,
        Q, E, A, V, SP):
    """Steps until every request completes (DONE) or the driver must act: price the recorded steps
    (PRICE), grow the step or gap records (GROW_STEPS, GROW_ITL), draw more uniforms (DRAW); STALL if
    nothing can run."""
    buf = np.empty((5, max(X.shape[1], Q.shape[0]) + 1))
    if ST[NPRICED] == ST[NSTEPS]:  # priced: true ends, then the speculative decisions checked
        _ends(ST, SF0, SF, BS, BB)
        _verify(ST, SF0, X, XI, SF, SI, rstate, SP)
    while True:
        if ST[PHASE] != 0:
            if _finish_block(ST, SF0, IP, R, RI, X, XI, SF, BS, II, IW, Q, E, A, V, buf) == GROW_ITL:
                return GROW_ITL
            continue
        if ST[NDONE] >= ST[NREQ]:
            return DONE
        if ST[NSPEC] and ST[NSTEPS] - ST[NPRICED] >= SPEC_STEPS:  # check the decisions before going on
            return PRICE
        if _admit(ST, SF0, IP, FP, R, RI, X, XI, rstate, SP):
            return PRICE
        nx = ST[NEXT]
        if ST[M] == 0:  # idle until the next request arrives
            if nx >= ST[ISSUED] or RI[RI_ARR, nx] >= 0:
                return STALL
            if ST[NPRICED] < ST[NSTEPS]:
                return PRICE
            SF0[NOW] = SF0[TKNOWN] = max(SF0[NOW], R[R_ARR, nx])
            continue
        admissible = nx < ST[ISSUED] and ST[M] < IP[MAX_SEQS] and SF0[KV_USED] + R[R_NEED, nx] <= FP[KV_CAP]
        if ST[NSTEPS] + IP[SEGMENT] > SF.shape[1] or ST[NBLOCKS] + 1 > len(BS):
            return GROW_STEPS
        if len(U) and ST[UCUR] + 2 * IP[SEGMENT] * ST[M] > len(U):  # (an arm that never drafts draws none)
            return DRAW
        timed = admissible and RI[RI_ARR, nx] < 0  # a timed arrival may cut the block
        spec = timed and _can_speculate(ST, SP[5])
        d = _snapshot(ST, SF0, X, XI, rstate, SP) if spec else 0
        _schedule(U, ST, SF0, IP, FP, sched, rstate, k2m, MI, MF, MS, MW, tw, dw, X, XI, SF, SI, L, BS, BB,
                  Q, E, A, V, buf)
        if timed and ST[BSTEPS] > 1 and not spec:
            ST[PHASE] = 1
            return PRICE
        _estimate(ST, SF0, SF, SI, BS, BB, SP[6])
        if timed and ST[BSTEPS] > 1:  # cut where the arrival falls on the estimated ends
            h, t, ends = ST[BSTEPS], R[R_ARR, nx], SF[ENDS]
            s0, kept = ST[NSTEPS] - h, h
            if ends[ST[NSTEPS] - 1] > t:
                for i in range(h):
                    if ends[s0 + i] >= t:
                        kept = min(i + 1, h)
                        break
            SP[5][d, 0], SP[5][d, 1], SP[5][d, 2], SP[5][d, 3], SP[5][d, 4] = 1.0, t, s0, kept, h
            ST[NSPEC] = d + 1
            ST[NSTEPS] = s0 + kept
            ST[BSTEPS] = kept
            SF0[NOW] = ends[s0 + kept - 1]
        ST[PHASE] = 2
