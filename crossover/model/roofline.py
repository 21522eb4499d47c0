"""Roofline cost of one forward step, op by op, vectorised over batch, query length and context.

A model is a list of ops with repeat counts (one source of truth for bytes and FLOPs), reused by
decode (q = 1), verify (q = k + 1), prefill chunks and draft forwards. Each op's time is
combine(bytes / achieved bandwidth, FLOPs / achieved FLOP/s); collectives and fixed overheads are
added on top.

Why the 'smooth' transition (time = (memory^p + compute^p)^(1/p), default p = 1.5) and not a
hard max: a kernel does not overlap its loads and its MMAs perfectly near the ridge point, so real
step time bends gradually where the hard max stays flat until the ridge and then kinks; the hard
max puts the crossover too late. We chose p on the published points that isolate the knee: the
EAGLE / EAGLE-3 batch tables on an RTX 3090 (ridge ~70 tokens, so batch 2-56 at k=2 spans it;
median |ln error| of speedup 0.07-0.10 with max, 0.02-0.04 with p = 1.5-2) and the MagicDec
per-step tables (KV-bound, where p matters little; p = 1.5 still beats the max). `sum` (no
overlap) fits the H100/SGLang table better but only by over-charging every op near the ridge;
that table's steep early drop is engine overhead the roofline does not carry (see README).
Numbers: validation/transition.md, written by `python validation/transition.py`.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from .collectives import collectives
from .ops import SAMPLED_OPS, Op, expected_distinct_experts, kv_share, model_ops
from ..specs.deployment import Deployment
from ..units import COMPUTE_DTYPE, DTYPE_BYTES


@dataclass
class OpCost:
    """Per-op result arrays (seconds, bytes, FLOPs per GPU) and the bound each op hit."""

    time: np.ndarray
    memory_time: np.ndarray
    compute_time: np.ndarray
    bytes: np.ndarray
    flops: np.ndarray

    @property
    def bound(self) -> np.ndarray:
        """'compute' where the FLOP time exceeds the memory time, else 'memory'."""
        return np.where(self.compute_time > self.memory_time, "compute", "memory")


@dataclass
class StepCost:
    """Time of one forward (seconds, arrays over the broadcast inputs) and its per-op breakdown.

    `parts` holds groups of op rows: (names, (time, memory time, compute time, bytes, FLOPs)), each
    array with the row axis first and a shape that broadcasts to `total`'s; rows sharing a name are
    reported as one op.
    """

    total: np.ndarray
    parts: list[tuple[tuple[str, ...], tuple[np.ndarray, ...]]] = field(default_factory=list)
    overhead: np.ndarray | float = 0.0

    @property
    def ops(self) -> dict[str, OpCost]:
        """Per-op costs keyed by op name (rows sharing a name summed)."""
        shape = np.shape(self.total)
        sums: dict[str, list[np.ndarray]] = {}
        for names, arrays in self.parts:
            for i, name in enumerate(names):
                vals = [np.broadcast_to(a[i], shape) for a in arrays]
                prev = sums.get(name)
                sums[name] = vals if prev is None else [x + y for x, y in zip(prev, vals)]
        return {name: OpCost(*vals) for name, vals in sums.items()}

    def scaled(self, n: float, extra_overhead: float = 0.0) -> "StepCost":
        """The cost of `n` identical forwards, each with `extra_overhead` seconds added."""
        parts = [(names, tuple(a * n for a in arrays)) for names, arrays in self.parts]
        return StepCost(n * (self.total + extra_overhead), parts, n * (self.overhead + extra_overhead))

    def __add__(self, other: "StepCost") -> "StepCost":
        """Two forwards run one after the other."""
        return StepCost(self.total + other.total, self.parts + other.parts, self.overhead + other.overhead)


def combine(memory: np.ndarray, compute: np.ndarray, mode: str, p: float) -> np.ndarray:
    """Op time from its memory time and compute time under the transition model."""
    if mode == "max":
        return np.maximum(memory, compute)
    if mode == "sum":
        return memory + compute
    if p == 1.5:  # (m^1.5 + c^1.5)^(2/3) without general powers (several times faster)
        return np.square(np.cbrt(memory * np.sqrt(memory) + compute * np.sqrt(compute)))
    if p == 2.0:
        return np.hypot(memory, compute)
    big = np.maximum(memory, compute)
    small = np.minimum(memory, compute)
    ratio = small / np.maximum(big, 1e-300)  # 0/0 (an op with no work) -> 0
    return big * np.power(1.0 + np.power(ratio, p), 1.0 / p)


# A group of rows' names and coefficient columns (CompiledOps._coefficients); None: a column of zeros, whose
# terms are skipped (act_bytes_per_token: None where the FLOPs per token are zero too)
Coefficients = namedtuple("Coefficients", "names weight_bytes act_bytes_per_token flops_per_token kv_bytes_per_attended "
                          "kv_write_per_token flops_per_query_attended window_index bandwidth rate sampled_rows "
                          "expert_bytes num_experts top_k")


@dataclass(frozen=True, eq=False, kw_only=True)
class CompiledOps:
    """An op list compiled against a deployment: per-row coefficients, so one forward is a few array
    ops. Hashed by identity (it holds arrays); built once per spec by the memoised builders below,
    by keyword only (its fields are many columns of one kind)."""

    names: tuple[str, ...]
    weight_bytes: np.ndarray  # bytes streamed per step regardless of tokens (dense weights)
    expert_bytes: np.ndarray  # bytes per distinct routed expert touched
    num_experts: np.ndarray
    top_k: np.ndarray
    act_bytes_per_token: np.ndarray
    flops_per_token: np.ndarray
    kv_bytes_per_attended: np.ndarray  # per sequence per attended cached token
    kv_write_per_token: np.ndarray
    flops_per_query_attended: np.ndarray
    attention_window: np.ndarray  # attended-context cap per row (inf: none)
    bandwidth: np.ndarray
    rate: np.ndarray
    allreduce_s_per_token: float
    allreduce_latency_s: float
    has_allreduce: bool
    overhead_s: float
    transition: str
    p: float
    ep_groups: int = 1  # expert parallelism: routed experts split whole over this many GPUs
    # Data-parallel attention ranks whose tokens the routed experts see (Deployment.data_parallel): the step
    # is priced per rank (StepModel.price), its expert rows over this many times the rank's tokens.
    expert_ranks: int = 1
    # Rows that run only on positions whose next token is sampled (LM heads): every decode/verify
    # position, but only the last position of a prompt.
    sampled_rows: np.ndarray | None = None
    # What the rows were compiled from (the op list, all-reduces included, and the deployment): a
    # cost mode that prices ops by shape (measured kernel tables, kernels.py) reads them.
    source_ops: tuple[Op, ...] = ()
    deployment: Deployment | None = None

    @cached_property
    def windows(self) -> tuple[float, ...]:
        """Distinct attention windows of the rows (inf: the whole context)."""
        return tuple(sorted(set(self.attention_window.tolist())))  # not np.unique: it imports numpy.ma (~12 ms)

    @cached_property
    def _groups(self) -> dict[str, np.ndarray]:
        """Row indices: 'all'; 'tokens' (GEMMs and experts, priced by the step's token count, with the
        LM heads priced by the sampled positions) and 'attention' (priced by the attention sums)."""
        att = self.kv_bytes_per_attended > 0
        return {"all": np.arange(len(self.names)), "tokens": np.nonzero(~att)[0], "attention": np.nonzero(att)[0]}

    _window_column = cached_property(lambda self: np.array(self.windows, float))  # `windows`, an array

    @cached_property
    def _window_index(self) -> np.ndarray:
        """For each row, the index of its window in `windows`."""
        return np.searchsorted(np.asarray(self.windows), self.attention_window)

    @cached_property
    def _coefficient_table(self) -> dict[str, Coefficients]:
        """Each group's `Coefficients`, indexed once (per instance: nothing outside it holds it alive)."""
        return {group: self._columns(group) for group in self._groups}

    def _coefficients(self, group: str) -> Coefficients:
        """The rows' names and coefficient columns of a group of `_groups`."""
        return self._coefficient_table[group]

    def _columns(self, group: str) -> Coefficients:
        r = self._groups[group]
        lm = self.sampled_rows[r] if self.sampled_rows is not None else np.zeros(len(r), bool)
        wb, ab, fpt, kvw = (self.weight_bytes[r], self.act_bytes_per_token[r], self.flops_per_token[r],
                            self.kv_write_per_token[r])
        kva = self.kv_bytes_per_attended[r]
        return Coefficients(tuple(self.names[i] for i in r), wb if wb.any() else None,
                            ab if (ab.any() or fpt.any()) else None, fpt, kva if kva.any() else None,
                            kvw if kvw.any() else None, self.flops_per_query_attended[r], self._window_index[r],
                            self.bandwidth[r], self.rate[r], lm if lm.any() else None,
                            self.expert_bytes[r] if self.expert_bytes[r].any() else None,
                            self.num_experts[r], self.top_k[r])

    # ------------------------------------------------------------------ attention sums per window

    def uniform_sums(self, batch, q, context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tokens, KV tokens read, query x key pairs) of `batch` sequences with `q` new positions
        each over `context` cached tokens; the sums per window (window axis first)."""
        b, qq, c = np.asarray(batch, float), np.asarray(q, float), np.asarray(context, float)
        w = self._window_column[(slice(None),) + (None,) * max(b.ndim, qq.ndim, c.ndim)]
        kv = b * np.minimum(c + qq, w)
        # Causal: query j of the q new positions attends to context + j tokens (capped by the window).
        qk = b * qq * np.minimum(c + (qq + 1.0) / 2.0, w)
        return b * qq, kv, qk

    def window_sums(self, q: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(KV tokens read, query x key pairs) summed over sequences (last axis), per distinct window."""
        kv = np.empty((len(self.windows),) + np.broadcast_shapes(np.shape(q), np.shape(context))[:-1])
        qk = np.empty_like(kv)
        for i, w in enumerate(self.windows):
            kv_w, qk_w = window_terms(q, context, w)
            kv[i] = kv_w.sum(axis=-1)
            qk[i] = qk_w.sum(axis=-1)
        return kv, qk

    # ------------------------------------------------------------------ the one evaluator

    def _row_costs(self, group: str, tokens: np.ndarray, sampled: np.ndarray, kv: np.ndarray,
                   qk: np.ndarray) -> tuple[tuple[str, ...], tuple[np.ndarray, ...]]:
        """Names and (time, memory time, compute time, bytes, FLOPs) of a group of rows, row axis
        first: weights streamed once, activations per token (LM heads: per sampled position), routed
        experts by the distinct experts the tokens touch, the KV cache by the attention sums."""
        names, wb, ab, fpt, kva, kvw, fqa, wi, bw, rate, lm, eb, ne, tk = self._coefficients(group)
        col = (slice(None),) + (None,) * max(tokens.ndim, sampled.ndim, kv.ndim - 1)
        nbytes: np.ndarray | float = 0.0 if wb is None else wb[col]  # (rows whose coefficients are all zero
        flops: np.ndarray | float = 0.0  # skip their terms: adding 0.0 would change nothing)
        if ab is not None:
            row_tok = tokens if lm is None or sampled is tokens else np.where(lm[col], sampled, tokens)
            nbytes = nbytes + ab[col] * row_tok
            flops = fpt[col] * row_tok
        if kvw is not None:
            nbytes = nbytes + kvw[col] * tokens
        if kva is not None:
            nbytes = nbytes + kva[col] * kv[wi]
            flops = flops + fqa[col] * qk[wi]
        if eb is not None:
            e, k, eb = ne[col], tk[col], eb[col]
            routed = tokens * self.expert_ranks if self.expert_ranks > 1 else tokens  # every rank's tokens
            distinct = expected_distinct_experts(routed, e, k)
            if self.ep_groups > 1:
                # Expert parallelism: each GPU holds E/G whole experts and the step waits for the
                # busiest one. Its distinct experts ~ mean + sd x sqrt(2 ln G) (Gaussian maximum of G),
                # capped at E/G; its tokens likewise. With TP-sharded experts every GPU reads 1/tp of
                # every touched expert and the load is even.
                gg = float(self.ep_groups)
                z = np.sqrt(2.0 * np.log(gg))
                local = e / gg
                mu = distinct / gg
                busiest = np.minimum(mu + z * np.sqrt(mu * np.clip(1.0 - mu / local, 0.0, 1.0)), local)
                share = routed * k / gg
                imbalance = np.where(share > 0, (share + z * np.sqrt(share * (1.0 - 1.0 / gg)))
                                     / np.maximum(share, 1e-12), 1.0)
                nbytes = nbytes + eb * busiest
                flops = flops + (imbalance - 1.0) * np.where(eb > 0, fpt[col], 0.0) * tokens
            else:
                nbytes = nbytes + eb * distinct
        tm = nbytes / bw[col]
        tc = flops / rate[col]
        return names, (combine(tm, tc, self.transition, self.p), tm, tc, nbytes, flops)

    def _allreduce(self, tokens: np.ndarray) -> np.ndarray | float:
        """Seconds of the step's tensor-parallel collectives."""
        if not self.has_allreduce:
            return 0.0
        return self.allreduce_s_per_token * tokens + self.allreduce_latency_s

    def evaluate(self, tokens, kv, qk, sampled=None, detail: bool = True) -> StepCost:
        """THE cost of one forward: `tokens` new positions whose attention reads `kv` cached tokens
        and scores `qk` query-key pairs (per distinct window, window axis first), logits at `sampled`
        positions (default: all `tokens`; a prompt needs them at its last position only). Mixed batches
        of decode, verify and prefill chunks cost as a uniform batch does. `detail`: keep the rows' parts."""
        tokens = np.asarray(tokens, float)
        s = tokens if sampled is None else np.asarray(sampled, float)
        kv, qk = np.asarray(kv, float), np.asarray(qk, float)
        t_shape = tokens.shape if s.shape == tokens.shape else np.broadcast_shapes(tokens.shape, s.shape)
        if kv.shape[1:] == t_shape or np.broadcast_shapes(t_shape, kv.shape[1:]) == t_shape:
            groups = ("all",)  # one shape: every row in one pass
        else:  # the attention sums span more axes (e.g. a context axis): token rows on their own shape
            groups = ("tokens", "attention")
        parts = []
        total: np.ndarray | float = self.overhead_s
        for group in groups:
            names, rows = self._row_costs(group, tokens, s, kv, qk)
            if names:
                total = total + rows[0].sum(axis=0)
                if detail:
                    parts.append((names, rows))
        if self.has_allreduce:
            ar = np.asarray(self._allreduce(tokens))
            total = total + ar
            if detail:
                zero = np.zeros_like(ar)
                parts.append((("allreduce",), tuple(x[None] for x in (ar, ar, zero, zero, zero))))
        return StepCost(np.asarray(total), parts, self.overhead_s)

    def seconds(self, tokens, kv, qk, sampled=None) -> np.ndarray:
        """`evaluate(...).total` for integer token counts: the token-count rows come from a table of
        the same row costs (tabulated once per plan and size), the attention rows are computed."""
        t = np.asarray(tokens, np.int64)
        s = t if sampled is None else np.asarray(sampled, np.int64)
        size = int(max(t.max(initial=0), s.max(initial=0))) + 1
        by_tokens, by_sampled = _token_table(self, 1 << max(size - 1, 1).bit_length())
        tf = t.astype(float)
        att = self._row_costs("attention", tf, tf, np.asarray(kv, float), np.asarray(qk, float))[1][0].sum(axis=0)
        return by_tokens.take(t) + by_sampled.take(s) + att + self.overhead_s

    def cost(self, batch, q=1, context=0) -> StepCost:
        """Seconds for one forward over `batch` sequences, `q` new positions each, `context` cached."""
        shape = np.broadcast_shapes(np.shape(batch), np.shape(q), np.shape(context))
        out = self.evaluate(*self.uniform_sums(batch, q, context))
        out.total = np.broadcast_to(out.total, shape)
        return out


def window_terms(q, context, window: float):
    """KV tokens read and query x key pairs scored by a sequence with `q` new positions over `context`
    cached tokens under an attention `window` (inf: none); arrays or scalars. Causal: query j of the
    q new positions attends to context + j tokens. The serving simulator's compiled loop sums the
    same function per step (one formula)."""
    length = context + q
    half = context + (q + 1.0) / 2.0
    if np.isfinite(window):
        return np.minimum(length, window), q * np.minimum(half, window)
    return length, q * half


@lru_cache(maxsize=64)
def _token_table(ops: CompiledOps, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of the token-count rows for 0..size-1 tokens (with the collectives) and of the LM-head
    rows for 0..size-1 sampled positions: CompiledOps.evaluate's own row costs, tabulated."""
    t = np.arange(size, dtype=float)
    zero = np.zeros((len(ops.windows), size))
    names, rows = ops._row_costs("tokens", t, t, zero, zero)
    lm = ops._coefficients("tokens").sampled_rows
    by_tokens = rows[0] if lm is None else rows[0][~lm]
    by_sampled = np.zeros((0, size)) if lm is None else rows[0][lm]
    return np.asarray(by_tokens.sum(axis=0) + ops._allreduce(t), float), by_sampled.sum(axis=0)


def compile_ops(dep: Deployment, ops: list[Op], num_layers: float | None = None) -> CompiledOps:
    """Per-GPU coefficients of each op at the deployment's TP, dtypes and efficiencies.

    Fixed overhead per forward: `num_layers` (default: the layers with attention) x
    layer_overhead_s, for kernel gaps; engine-step overheads are added once per engine step.
    """
    tp, eff, act = dep.tp, dep.efficiency, dep.act_bytes
    dp = dep.data_parallel
    group = tp * dp  # the GPUs the routed experts are split over
    rows = [op for op in ops if op.kind != "allreduce"]
    n = len(rows)
    z = lambda: np.zeros(n)  # noqa: E731
    wb, eb, ne, tk, ab, fpt, kva, kvw, fqa = z(), z(), np.ones(n), np.ones(n), z(), z(), z(), z(), z()
    main_rate, main_dtype, kv_bw, kv_bytes = dep.flops, dep.compute_dtype, dep.kv_bandwidth, dep.kv_bytes
    win, bw, rate = np.full(n, np.inf), np.full(n, dep.bandwidth), np.full(n, main_rate)
    # Fraction of peak reached, applied to other dtypes' peaks too (e.g. a bf16 LM head in an fp8 model).
    flops_frac = main_rate / dep.hardware.peak_flops(main_dtype)
    rates = {main_dtype: main_rate}
    for i, op in enumerate(rows):
        cdt = dep.hardware.compute_rate_dtype(COMPUTE_DTYPE[op.dtype])
        if cdt not in rates:
            rates[cdt] = dep.hardware.peak_flops(cdt) * flops_frac
        rate[i] = rates[cdt]
        if op.kind == "attention":
            kva[i] = op.count * op.kv_elems * kv_share(op, tp) * kv_bytes
            kvw[i] = kva[i]
            fqa[i] = op.count * 2.0 * (op.heads / tp) * op.score_dim
            win[i] = np.inf if op.window is None else op.window
            bw[i] = kv_bw
            continue
        shard = tp if op.sharded else 1
        wbytes = DTYPE_BYTES[op.dtype]
        if op.kind == "experts":
            # per distinct expert touched: a 1/group slice of it (TP-sharded) or, under expert
            # parallelism, the whole expert on the GPU that holds it; per token of every attention rank
            # (dp x the rank's tokens the step is priced at)
            shard = group if op.sharded else 1
            eb[i] = op.count * op.params * wbytes / (1 if dep.expert_parallel else shard)
            ne[i], tk[i] = op.num_experts, op.top_k
            fpt[i] = dp * op.count * 2.0 * op.top_k * op.params / shard
            ab[i] = dp * op.count * op.top_k * (op.in_features + op.out_features) * act / shard
        else:
            wb[i] = op.count * op.params * wbytes / shard
            fpt[i] = op.count * 2.0 * op.params / shard
            ab[i] = op.count * (op.in_features + op.out_features) * act / shard
    ar_per_token, ar_latency = collectives(dep, ops)
    if num_layers is None:
        num_layers = sum(op.count for op in ops if op.kind == "attention")
    return CompiledOps(
        names=tuple(op.name for op in rows), weight_bytes=wb, expert_bytes=eb, num_experts=ne, top_k=tk,
        act_bytes_per_token=ab, flops_per_token=fpt, kv_bytes_per_attended=kva, kv_write_per_token=kvw,
        flops_per_query_attended=fqa, attention_window=win, bandwidth=bw, rate=rate,
        allreduce_s_per_token=ar_per_token, allreduce_latency_s=ar_latency,
        has_allreduce=ar_per_token > 0 or ar_latency > 0, overhead_s=num_layers * eff.layer_overhead_s,
        transition=eff.transition, p=eff.transition_p, ep_groups=group if dep.expert_parallel else 1,
        expert_ranks=dp,
        sampled_rows=np.array([op.name in SAMPLED_OPS for op in rows], bool), source_ops=tuple(ops), deployment=dep)


def target_ops(dep: Deployment) -> list[Op]:
    """The target model's op list at the deployment's TP and weight dtype."""
    return model_ops(dep.model, dep.wdtype, dep.tp)


@lru_cache(maxsize=256)
def compiled_target(dep: Deployment) -> CompiledOps:
    """The target's compiled op list (memoised per deployment)."""
    return compile_ops(dep, target_ops(dep))
