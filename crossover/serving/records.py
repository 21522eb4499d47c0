"""The step records of the serving simulator's compiled loop (loop.py): each step's work as
`StepModel.price` reads it (the target forward's tokens, sampled positions and attention sums per
window, the draft passes' and the draft prefill's, the sequences verifying), summed over the step's
sequences in numpy's pairwise order, so the numbers equal those of numpy's sums. Also the layout of
the loop's state arrays (shared with the driver, simulator._Engine)."""

from __future__ import annotations

import numba
import numpy as np

from ..model.roofline import window_terms

_terms = numba.njit(cache=True)(window_terms)

# status returned to the driver
DONE, PRICE, GROW_STEPS, GROW_ITL, STALL, DRAW = 0, 1, 2, 3, 4, 5
# integer state ST
(M, NEXT, ISSUED, NDONE, NSTEPS, NPRICED, NBLOCKS, NITL, PHASE, BSTEPS, BENDED, NREQ, UCUR, NSPEC, FORCE, PFROM,
 ONBLOCK) = range(17)
# float state SF0
KV_USED, NOW, PROPOSED, ACCEPTED, VERIFY, TKNOWN = range(6)
# integer parameters IP
MAX_SEQS, MEASURE_FROM, SEGMENT, DRAFT_PREFILL, EXPANSION, ROUTE_K, LOW, HIGH, CLOSED, CHUNKED = range(10)
# float parameters FP
MAX_TOKENS, KV_CAP, DRAFT_BUDGET = range(3)
# step record rows: floats SF, integers SI; L holds the offsets of the per-window blocks
DT, ENDS, NDEC, SEQS, EMIT, PRE = range(6)
MODE, TOK, SMP, PTOK, PSMP, UNIF = range(6)
L_KV, L_QK, L_EXP, L_PKV, L_PQK, L_DKV, L_DQK, L_DTOK, L_W, L_WD, L_G = range(11)
# per-sequence block vectors V: decoding, prompt chunk, first token, prefilling
V_DEC, V_CHUNK, V_FIRST, V_PRE = range(4)
# running sequences: floats X (X_DREAD: tokens of its context the draft has read), integers XI
X_CTX, X_LEFT, X_REM, X_DREAD = range(4)
XI_RID, XI_LAST = range(2)
# requests: floats R, integers RI
R_PROMPT, R_OUTPUT, R_NEED, R_ARR = range(4)
RI_ARR, RI_FIRST, RI_FIN = range(3)


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


@numba.njit(cache=True)
def _psum(a, n):
    """a[:n].sum() as numpy adds it."""
    return 0.0 + _pw(a, 0, n)


@numba.njit(cache=True)
def _colsum(A, j, steps, m, buf):
    """A[:steps, j] summed as numpy's A[:steps, :m].sum(axis=0) adds it: pairwise along a single
    column, row by row otherwise."""
    if m == 1:
        for i in range(steps):
            buf[i] = A[i, j]
        return _psum(buf, steps)
    s = A[0, j]
    for i in range(1, steps):
        s += A[i, j]
    return s


@numba.njit(cache=True)
def _record(ST, SF0, IP, FP, MI, MW, tw, dw, X, SF, SI, L, Q, E, A, V, buf, s0, steps, m, mi, on, nd, npre,
            nfirst, csum, ngroups):
    """Each step's work as `StepModel.price` reads it (the simulator builds the Mix from these rows)."""
    W, Wd = L[L_W], L[L_WD]
    dbudget = FP[DRAFT_BUDGET]
    expand = IP[EXPANSION] == 1 and on
    bq, bs, bt, bu = buf[0], buf[1], buf[2], buf[3]
    ca = buf[4]  # context advance so far, per sequence
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
        SF[SEQS, s] = live_n
        SI[UNIF, s] = 1 if qmin == qmax else 0
        SI[MODE, s] = mi
        SI[TOK, s] = np.int64(_psum(bq, m))
        SI[SMP, s] = np.int64(_psum(bs, ns) + nfirst) if mixed_pre else np.int64(_psum(bq, m))
        SF[EMIT, s] = _psum(bt, m)
        SF[PRE, s] = csum if i == 0 else 0.0
        for w in range(W):  # the target forward's attention sums (and batch expansion's re-reads)
            for j in range(m):
                qv = Q[i, j]
                live = qv > 0
                qq = qv if live else 0.0
                cc = X[X_CTX, j] + (ca[j] - A[i, j]) if live else -qv
                bt[j], bu[j] = _terms(qq, cc, tw[w])
                if expand:
                    verifying = live and not (mixed_pre and V[V_DEC, j] == 0.0)
                    bq[j], bs[j] = _terms(qq if verifying else 0.0, cc if verifying else 0.0, tw[w])
            SF[L[L_KV] + w, s] = _psum(bt, m)
            SF[L[L_QK] + w, s] = _psum(bu, m)
            SF[L[L_EXP] + w, s] = _psum(bs, m) - _psum(bq, m) if expand else 0.0
        ndec = float(nd) if i == 0 else float(m)
        SF[NDEC, s] = ndec if on else 0.0
        if on:  # drafts proposed and accepted, draft passes
            prop, acc = 0.0, 0.0
            for j in range(m):
                if mixed_pre and V[V_DEC, j] == 0.0:
                    continue
                pr = Q[i, j] - 1.0
                prop += pr
                acc += max(min(E[i, j] - 1.0, pr), 0.0)
            SF0[PROPOSED] += prop
            SF0[ACCEPTED] += acc
            SF0[VERIFY] += ndec
            for g in range(ngroups):
                wg = MW[mi, g]
                SI[L[L_DTOK] + g, s] = np.int64(ndec * wg)
                for w in range(Wd):
                    for j in range(m):
                        dec = not (mixed_pre and V[V_DEC, j] == 0.0)
                        ctx = X[X_CTX, j] + (ca[j] - A[i, j])
                        bt[j], bu[j] = _terms(wg if dec else 0.0, min(ctx, dbudget) if dec else 0.0, dw[w])
                    SF[L[L_DKV] + g * Wd + w, s] = _psum(bt, m)
                    SF[L[L_DQK] + g * Wd + w, s] = _psum(bu, m)
        # the draft reads this step's prompt chunks, and catches up on the tokens its sequences took
        # while the step ran without speculation (a routed server's draft reads nothing then)
        reads = i == 0 and IP[DRAFT_PREFILL] == 1 and on
        nread = 0
        if reads:
            for j in range(m):
                bs[j] = X[X_CTX, j] - X[X_DREAD, j] + (V[V_CHUNK, j] if V[V_PRE, j] == 1.0 else 0.0)
                if bs[j] > 0:
                    bq[nread] = bs[j]
                    nread += 1
        SI[PTOK, s] = np.int64(_psum(bq, nread)) if nread else 0
        SI[PSMP, s] = nfirst if reads and npre > 0 and csum != 0 else 0
        for w in range(Wd):
            n = 0
            for j in range(m if nread else 0):
                if bs[j] > 0:
                    bt[n], bu[n] = _terms(bs[j], min(X[X_DREAD, j], dbudget), dw[w])
                    n += 1
            SF[L[L_PKV] + w, s] = _psum(bt, n)
            SF[L[L_PQK] + w, s] = _psum(bu, n)


@numba.njit(cache=True)
def _draws(U, ST, on, k, nsurv, surv, match, width, miss, horizon, m, Q, E):
    """(verify width, tokens emitted) per step and sequence: drafts accepted = how many survival
    probabilities (decreasing) exceed one uniform draw (U: the generator's stream, in order; as
    rng.random((horizon, m))); an n-gram miss verifies `miss` positions (its bonus only, or k+1
    where the engine pads its drafts) and emits the bonus token."""
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
                Q[i, j] = 1.0 + k if hit else miss
                E[i, j] = 1.0 + (E[i, j] if hit else 0.0)
    elif on:
        for i in range(horizon):
            for j in range(m):
                Q[i, j] = width
                E[i, j] = 1.0 + E[i, j]
    ST[UCUR] = u0
