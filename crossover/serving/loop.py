"""The serving simulator's compiled loop (numba): admission, block scheduling, acceptance draws, the
work of each step (a `Forward`'s sums) and what clients see, in step indices. It never prices: the
loop stops whenever it needs a step's seconds (to admit a request that arrives at a given time, or
to cut a block where one arrives) and `simulator._Engine` prices every step recorded since the last
stop through `StepModel.price`, then resumes it; a closed-loop run stops only while its clients'
first requests arrive. Step times become seconds at the end (arrivals, first tokens, finishes and
inter-token gaps are recorded as step indices).

It replays `simulator`'s semantics operation for operation, so the numbers equal those of the
numpy blocks it replaced: the random stream is drawn in the same order, and sums over a step's
sequences add in numpy's pairwise order (`_psum`). Imported by the simulator on first use only (a
plain `predict` never loads numba); compiled code is cached next to the source.
"""

from __future__ import annotations

import numba
import numpy as np

from .records import (_colsum, _psum, _record, DONE, PRICE, GROW_STEPS, GROW_ITL, STALL, DRAW, M, NEXT, ISSUED,
                      NDONE, NSTEPS, NPRICED, NBLOCKS, NITL, PHASE, BSTEPS, BENDED, NREQ, UCUR, KV_USED, NOW,
                      MAX_SEQS, MEASURE_FROM, SEGMENT, ROUTE_K, LOW, HIGH, CLOSED, MAX_TOKENS, KV_CAP, DT, ENDS,
                      V_DEC, V_CHUNK, V_FIRST, V_PRE, X_CTX, X_LEFT, X_REM, XI_RID, XI_LAST, R_PROMPT, R_OUTPUT,
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
        SF0[NOW] = SF[ENDS, ST[NSTEPS] - 1]


@numba.njit(cache=True)
def _admit(ST, SF0, IP, FP, R, RI, X, XI):
    """FIFO admission while seats, the KV cache and arrivals allow; True when an arrival time must be
    compared with a clock that has unpriced steps."""
    while ST[NEXT] < ST[ISSUED]:
        nx = ST[NEXT]
        if not (ST[M] < IP[MAX_SEQS] and SF0[KV_USED] + R[R_NEED, nx] <= FP[KV_CAP]):
            return False
        if RI[RI_ARR, nx] < 0 and not (R[R_ARR, nx] <= SF0[NOW] + 1e-15):  # a timed arrival not yet passed
            return ST[NPRICED] < ST[NSTEPS]  # NOW is exact once every step is priced
        SF0[KV_USED] += R[R_NEED, nx]
        ST[NEXT] += 1
        j = ST[M]
        XI[XI_RID, j] = nx
        X[X_CTX, j] = 0.0
        X[X_LEFT, j] = R[R_PROMPT, nx]
        X[X_REM, j] = R[R_OUTPUT, nx]
        XI[XI_LAST, j] = -1
        ST[M] = j + 1
    return False


@numba.njit(cache=True)
def _draws(U, ST, on, k, nsurv, surv, match, width, horizon, m, Q, E):
    """(verify width, tokens emitted) per step and sequence: drafts accepted = how many survival
    probabilities (decreasing) exceed one uniform draw (U: the generator's stream, in order; as
    rng.random((horizon, m))); an n-gram miss verifies its bonus only."""
    u0 = ST[UCUR]
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
                Q[i, j] = 1.0 + (k if hit else 0)
                E[i, j] = 1.0 + (E[i, j] if hit else 0.0)
    elif on:
        for i in range(horizon):
            for j in range(m):
                Q[i, j] = width
                E[i, j] = 1.0 + E[i, j]
    ST[UCUR] = u0


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
    on, k, nsurv, ngroups = MI[mi, 0], MI[mi, 1], MI[mi, 2], MI[mi, 3]
    width, match = MF[mi, 0], MF[mi, 1]
    budget = max(FP[MAX_TOKENS] - nd * width, 0.0)
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
        horizon = max(horizon, 1)
    _draws(U, ST, on, k, nsurv, MS[mi], match, width, horizon, m, Q, E)
    for i in range(horizon):
        for j in range(m):
            A[i, j] = E[i, j]
    if npre:
        for j in range(m):
            if V[V_PRE, j] == 1.0:  # prompts process their chunk and emit nothing but the first token
                Q[0, j] = V[V_CHUNK, j]
                E[0, j] = V[V_FIRST, j]
                A[0, j] = V[V_CHUNK, j]
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
                ST[NSTEPS] = ST[NPRICED] = start + steps
                SF0[NOW] = SF[ENDS, start + steps - 1]
        ST[BSTEPS] = steps
        ST[PHASE] = 2
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
        Q, E, A, V):
    """Steps until every request completes (DONE) or the driver must act: price the recorded steps
    (PRICE), grow the step or gap records (GROW_STEPS, GROW_ITL), draw more uniforms (DRAW); STALL if
    nothing can run."""
    buf = np.empty((5, max(X.shape[1], Q.shape[0]) + 1))
    _ends(ST, SF0, SF, BS, BB)
    while True:
        if ST[PHASE] != 0:
            if _finish_block(ST, SF0, IP, R, RI, X, XI, SF, BS, II, IW, Q, E, A, V, buf) == GROW_ITL:
                return GROW_ITL
            continue
        if ST[NDONE] >= ST[NREQ]:
            return DONE
        if _admit(ST, SF0, IP, FP, R, RI, X, XI):
            return PRICE
        nx = ST[NEXT]
        if ST[M] == 0:  # idle until the next request arrives
            if nx >= ST[ISSUED] or RI[RI_ARR, nx] >= 0:
                return STALL
            if ST[NPRICED] < ST[NSTEPS]:
                return PRICE
            SF0[NOW] = max(SF0[NOW], R[R_ARR, nx])
            continue
        admissible = nx < ST[ISSUED] and ST[M] < IP[MAX_SEQS] and SF0[KV_USED] + R[R_NEED, nx] <= FP[KV_CAP]
        if ST[NSTEPS] + IP[SEGMENT] > SF.shape[1] or ST[NBLOCKS] + 1 > len(BS):
            return GROW_STEPS
        if len(U) and ST[UCUR] + 2 * IP[SEGMENT] * ST[M] > len(U):  # (an arm that never drafts draws none)
            return DRAW
        _schedule(U, ST, SF0, IP, FP, sched, rstate, k2m, MI, MF, MS, MW, tw, dw, X, XI, SF, SI, L, BS, BB,
                  Q, E, A, V, buf)
        if admissible and ST[BSTEPS] > 1 and RI[RI_ARR, nx] < 0:  # a timed arrival may cut the block
            ST[PHASE] = 1
            return PRICE
        ST[PHASE] = 2
