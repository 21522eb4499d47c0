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

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from .ops import SAMPLED_OPS, Op, balanced_distinct_experts, expected_distinct_experts, kv_share, model_ops
from .specs.deployment import Deployment
from .units import COMPUTE_DTYPE, DTYPE_BYTES


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
    big = np.maximum(memory, compute)
    small = np.minimum(memory, compute)
    ratio = small / np.maximum(big, 1e-300)  # 0/0 (an op with no work) -> 0
    if p == 1.5:  # (1 + r^1.5)^(2/3) without general powers (several times faster)
        return big * np.square(np.cbrt(1.0 + ratio * np.sqrt(ratio)))
    if p == 2.0:
        return big * np.sqrt(1.0 + ratio * ratio)
    return big * np.power(1.0 + np.power(ratio, p), 1.0 / p)


@dataclass(frozen=True, eq=False)
class CompiledOps:
    """An op list compiled against a deployment: per-row coefficients, so one forward is a few array
    ops. Hashed by identity (it holds arrays); built once per spec by the memoised builders below."""

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
        return tuple(np.unique(self.attention_window).tolist())

    @cached_property
    def _groups(self) -> dict[str, np.ndarray]:
        """Row indices: 'all'; 'tokens' (GEMMs and experts, priced by the step's token count, with the
        LM heads priced by the sampled positions) and 'attention' (priced by the attention sums)."""
        att = self.kv_bytes_per_attended > 0
        return {"all": np.arange(len(self.names)), "tokens": np.nonzero(~att)[0], "attention": np.nonzero(att)[0]}

    @cached_property
    def _window_index(self) -> np.ndarray:
        """For each row, the index of its window in `windows`."""
        return np.searchsorted(np.asarray(self.windows), self.attention_window)

    @lru_cache(maxsize=None)  # noqa: B019 (plans live in memoised builders)
    def _coefficients(self, group: str) -> tuple:
        """The rows' names and coefficient columns, indexed once per group."""
        r = self._groups[group]
        lm = self.sampled_rows[r] if self.sampled_rows is not None else np.zeros(len(r), bool)
        wb, ab, fpt, kvw = (self.weight_bytes[r], self.act_bytes_per_token[r], self.flops_per_token[r],
                            self.kv_write_per_token[r])
        kva = self.kv_bytes_per_attended[r]
        return (tuple(self.names[i] for i in r), wb if wb.any() else None,
                ab if (ab.any() or fpt.any()) else None, fpt, kva if kva.any() else None,
                kvw if kvw.any() else None, self.flops_per_query_attended[r], self._window_index[r],
                self.bandwidth[r], self.rate[r], lm if lm.any() else None, self.expert_bytes[r],
                self.num_experts[r], self.top_k[r])

    # ------------------------------------------------------------------ attention sums per window

    def uniform_sums(self, batch, q, context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tokens, KV tokens read, query x key pairs) of `batch` sequences with `q` new positions
        each over `context` cached tokens; the sums per window (window axis first)."""
        b, qq, c = np.asarray(batch, float), np.asarray(q, float), np.asarray(context, float)
        w = np.asarray(self.windows)[(slice(None),) + (None,) * max(b.ndim, qq.ndim, c.ndim)]
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
            row_tok = tokens if lm is None else np.where(lm[col], sampled, tokens)
            nbytes = nbytes + ab[col] * row_tok
            flops = fpt[col] * row_tok
        if kvw is not None:
            nbytes = nbytes + kvw[col] * tokens
        if kva is not None:
            nbytes = nbytes + kva[col] * kv[wi]
            flops = flops + fqa[col] * qk[wi]
        if eb.any():
            e, k, eb = ne[col], tk[col], eb[col]
            distinct = expected_distinct_experts(tokens, e, k)
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
                share = tokens * k / gg
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

    def evaluate(self, tokens, kv, qk, sampled=None) -> StepCost:
        """THE cost of one forward: `tokens` new positions whose attention reads `kv` cached tokens
        and scores `qk` query-key pairs (per distinct window, window axis first), logits at `sampled`
        positions (default: all `tokens`; a prompt needs them at its last position only). Mixed
        batches of decode, verify and prefill chunks cost the same way as a uniform batch."""
        tokens = np.asarray(tokens, float)
        s = tokens if sampled is None else np.asarray(sampled, float)
        kv, qk = np.asarray(kv, float), np.asarray(qk, float)
        t_shape = np.broadcast_shapes(tokens.shape, s.shape)
        if np.broadcast_shapes(t_shape, kv.shape[1:]) == t_shape:  # one shape: every row in one pass
            groups = ("all",)
        else:  # the attention sums span more axes (e.g. a context axis): token rows on their own shape
            groups = ("tokens", "attention")
        parts = []
        total: np.ndarray | float = self.overhead_s
        for group in groups:
            names, rows = self._row_costs(group, tokens, s, kv, qk)
            if names:
                total = total + rows[0].sum(axis=0)
                parts.append((names, rows))
        if self.has_allreduce:
            ar = np.asarray(self._allreduce(tokens))
            total = total + ar
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
    lm = ops._coefficients("tokens")[10]
    by_tokens = rows[0] if lm is None else rows[0][~lm]
    by_sampled = np.zeros((0, size)) if lm is None else rows[0][lm]
    return np.asarray(by_tokens.sum(axis=0) + ops._allreduce(t), float), by_sampled.sum(axis=0)


def compile_ops(dep: Deployment, ops: list[Op], num_layers: float | None = None) -> CompiledOps:
    """Per-GPU coefficients of each op at the deployment's TP, dtypes and efficiencies.

    Fixed overhead per forward: `num_layers` (default: the layers with attention) x
    layer_overhead_s, for kernel gaps; engine-step overheads are added once per engine step.
    """
    tp, eff, act = dep.tp, dep.efficiency, dep.act_bytes
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
            # per distinct expert touched: a 1/tp slice of it (TP-sharded) or, under expert
            # parallelism, the whole expert on the GPU that holds it
            eb[i] = op.count * op.params * wbytes / (1 if dep.expert_parallel else shard)
            ne[i], tk[i] = op.num_experts, op.top_k
            fpt[i] = op.count * 2.0 * op.top_k * op.params / shard
            ab[i] = op.count * op.top_k * (op.in_features + op.out_features) * act / shard
        else:
            wb[i] = op.count * op.params * wbytes / shard
            fpt[i] = op.count * 2.0 * op.params / shard
            ab[i] = op.count * (op.in_features + op.out_features) * act / shard
    ar_count = sum(op.count for op in ops if op.kind == "allreduce")
    ar_width = max((op.width for op in ops if op.kind == "allreduce"), default=0.0)
    # Ring all-reduce: 2 (tp-1) steps, each moving 1/tp of the message over a link, plus the
    # call's latency (base + per hop).
    ar_per_token = ar_count * 2.0 * (tp - 1) / tp * ar_width * act / dep.link_bandwidth if tp > 1 else 0.0
    ar_calls = ar_count
    experts = [op for op in rows if op.kind == "experts"]
    if dep.expert_parallel and experts and tp > 1 and ar_count > 0:
        # Expert parallelism replaces each MoE layer's all-reduce by a dispatch and a combine
        # all-to-all of the routed tokens (each GPU sends (tp-1)/tp of its top_k copies), which
        # pay the collective latency twice.
        moe_layers = sum(op.count for op in experts)
        top_k = experts[0].top_k
        ar_per_token -= moe_layers * 2.0 * (tp - 1) / tp * ar_width * act / dep.link_bandwidth
        ar_per_token += 2.0 * moe_layers * (tp - 1) / tp * top_k * ar_width * act / dep.link_bandwidth
        ar_calls = ar_count + moe_layers
    host = pcie_host_fraction(dep)
    if host is not None and tp > 2:
        # Past 2 PCIe GPUs there is no peer-to-peer all-reduce (vLLM's custom all-reduce stops at 2):
        # every GPU's ring bytes cross the host's shared PCIe fabric, 2 (tp - 1) x the message at
        # `host` x one link instead of 2 (tp - 1) / tp at the link fraction (roofline.allreduce_seconds).
        ar_per_token *= tp * dep.link_bandwidth / (dep.hardware.interconnect_bytes_s * host)
    if num_layers is None:
        num_layers = sum(op.count for op in ops if op.kind == "attention")
    return CompiledOps(tuple(op.name for op in rows), wb, eb, ne, tk, ab, fpt, kva, kvw, fqa, win, bw, rate,
                ar_per_token, ar_calls * dep.allreduce_latency, ar_count > 0 and tp > 1,
                num_layers * eff.layer_overhead_s, eff.transition, eff.transition_p,
                tp if dep.expert_parallel else 1,
                np.array([op.name in SAMPLED_OPS for op in rows], bool), tuple(ops), dep)


def pcie_host_fraction(dep: Deployment) -> float | None:
    """The share of one PCIe link that a > 2-GPU all-reduce gets over the host's shared fabric: the
    hardware's kernel-table-distilled `all_reduce.host_fraction` where the GPUs talk over PCIe and the
    deployment takes distilled parameters (Efficiency.distilled), else None (the ring over links)."""
    hw = dep.hardware
    if not (hw.is_pcie and dep.efficiency.distilled and hw.distilled is not None and hw.distilled.all_reduce):
        return None
    return hw.distilled.all_reduce.host_fraction


def target_ops(dep: Deployment) -> list[Op]:
    """The target model's op list at the deployment's TP and weight dtype."""
    return model_ops(dep.model, dep.wdtype, dep.tp)


@lru_cache(maxsize=256)
def compiled_target(dep: Deployment) -> CompiledOps:
    """The target's compiled op list (memoised per deployment)."""
    return compile_ops(dep, target_ops(dep))


# ------------------------------------------------------------------ op-level kernel formulas
#
# One kernel call's seconds from its shape: the formulas validation/distill_kernels.py fits per GPU x
# op class to measured kernel tables (hardware YAML `distilled:`; errors in validation/kernels.md).
# The step model above prices whole forwards and reads a few of their parameters
# (Distilled.efficiency_fields); these price single calls, with the per-call effects a table shows.
# `q` maps DistilledOp field names to values (its units: us, ns, GB/s, fractions); a term whose
# parameter is absent (None) is left out, so one formula serves the bf16 and fp8 GEMM tables.

GEMM_TILE_M, GEMM_TILE_N = 64.0, 128.0  # output tile of the tile-efficiency and split-K terms
CTA_TILE_N = 128.0  # CUTLASS fp8 GEMMs: a CTA's output columns
# ... and at most this many activation rows per CTA (cluster): vLLM's sm90 fp8 dispatch has M <= 64 / 128 / 256 / larger
CTA_ROWS_MAX = 256.0
SPLIT_K_MIN = 256.0  # cuBLAS splits the k loop (a second, reduction kernel) only past a few k tiles
KV_BLOCK = 128.0  # tokens of one KV block a decode CTA iterates over (FlashAttention's block at head dim 128)
QUERY_TILE = 128.0  # query rows of one prefill CTA


@dataclass(frozen=True)
class ChipFacts:
    """What the op-level formulas read of a GPU beside its datasheet peaks."""

    bandwidth: float  # peak DRAM bytes/s
    l2_bytes: float = 0.0  # L2 capacity (0: no L2-resident regime)
    sms: int = 1
    min_tile_rows: int = 64  # the tensor cores' smallest M per instruction (mma.sync 16; wgmma, tcgen05 64)
    link: float = 1.0  # GPU-to-GPU bytes/s per direction
    pcie: bool = False


def _q(q, name: str, default=None):
    v = q.get(name) if hasattr(q, "get") else getattr(q, name, None)
    return default if v is None else float(v)


def resident_seconds(nbytes, resident, l2_bytes: float, bandwidth, l2_ratio) -> np.ndarray:
    """Seconds to move `nbytes` at `bandwidth` when `resident` of them (operands reused between timed
    repeats: activations, KV) stay in L2 if they fit (`resident <= l2_bytes`) and stream from it at
    `l2_ratio` x that rate. l2_ratio None: everything from DRAM."""
    nbytes = np.asarray(nbytes, float)
    if l2_ratio is None or l2_bytes <= 0:
        return nbytes / bandwidth
    hit = np.where(np.asarray(resident, float) <= l2_bytes, resident, 0.0)
    return (nbytes - hit) / bandwidth + hit / (bandwidth * l2_ratio)


def resident_share(nbytes, capacity: float) -> np.ndarray:
    """Share of an operand of `nbytes` that stays in a cache of `capacity` bytes: 1 well below it, 0
    well above, a smooth step 1 / (1 + (nbytes / capacity)^4) between (half at the capacity)."""
    return 1.0 / (1.0 + (np.asarray(nbytes, float) / capacity) ** 4)


def pow2_ceil(x) -> np.ndarray:
    """The smallest power of two >= x (>= 1)."""
    return 2.0 ** np.ceil(np.log2(np.maximum(np.asarray(x, float), 1.0)))


def gemm_seconds(m, n, k, weight_bytes: float, act_bytes: float, rate: float, chip: ChipFacts, q) -> np.ndarray:
    """One GEMM (m tokens x k in, n out; weights n x k) call:

      floor + combine(memory u, compute u, p) [+ split_k: k >= 256 and fewer output tiles than SMs]
      memory  = (weights + activations + bf16 output) / (BW fb), the activations and output from L2
                at l2_bandwidth_ratio x when they fit in it, the weights when they fit in weights_l2_share
                of it (resident_share); fp8: the output written at output_fraction
      compute = 2 m n k / (R ff);  u = max(1, tiles_half / T), T = ceil(m/64) ceil(n/128) output tiles
      per-CTA stream (sm_bandwidth_gb_s): memory >= waves x (rows + min(n, 128)) k bytes / per-CTA rate,
                rows = the power of two >= m within [min tile M, 256], waves = ceil(CTAs / SMs)
      activation quantisation (quantise_*; fp8): its own kernel, floor + combine(m row_ns,
                3 m k bytes / (BW fq), 2) (a block per token row: the row's latency, or bf16 read + fp8 write)
    """
    m, n, k = (np.asarray(x, float) for x in (m, n, k))
    bw = chip.bandwidth
    fb, ff = _q(q, "bandwidth_fraction", 1.0), _q(q, "flops_fraction", 1.0)
    weights = n * k * weight_bytes
    act = m * k * act_bytes + m * n * 2.0
    r2 = _q(q, "l2_bandwidth_ratio")
    mem = resident_seconds(weights + act, act, chip.l2_bytes, bw * fb, r2)
    share = _q(q, "weights_l2_share")
    if share is not None and r2 is not None and chip.l2_bytes > 0:
        mem = mem - resident_share(weights, share * chip.l2_bytes) * weights / (bw * fb) * (1.0 - 1.0 / r2)
    fo = _q(q, "output_fraction")
    if fo is not None:
        mem = mem + m * n * 2.0 / bw * (1.0 / fo - 1.0 / fb)
    comp = 2.0 * m * n * k / (rate * ff)
    tiles = np.ceil(m / GEMM_TILE_M) * np.ceil(n / GEMM_TILE_N)
    slow = np.maximum(1.0, _q(q, "tiles_half", 0.0) / tiles)
    mem, comp = mem * slow, comp * slow
    sm_bw = _q(q, "sm_bandwidth_gb_s")
    if sm_bw is not None:
        rows = np.clip(pow2_ceil(m), chip.min_tile_rows, CTA_ROWS_MAX)
        ctas = np.ceil(m / rows) * np.ceil(n / CTA_TILE_N)
        per_cta = (rows * act_bytes + np.minimum(n, CTA_TILE_N) * weight_bytes) * k / (sm_bw * 1e9)
        mem = np.maximum(mem, np.ceil(ctas / chip.sms) * per_cta)
    floor = _q(q, "floor_us", 0.0) * 1e-6
    t = floor + combine(mem, comp, "smooth", _q(q, "transition_p", 1.5))
    split = _q(q, "split_k_us")
    if split is not None:
        t = t + np.where((k >= SPLIT_K_MIN) & (tiles < chip.sms), split * 1e-6, 0.0)
    fq = _q(q, "quantise_bandwidth_fraction")
    if fq is not None:
        rows_t = m * _q(q, "quantise_row_ns", 0.0) * 1e-9
        t = t + floor + combine(rows_t, m * k * 3.0 / (bw * fq), "smooth", 2.0)
    return t


def decode_attention_seconds(batch, kv_len, heads, kv_heads, head_dim, kv_bytes: float, rate: float,
                             chip: ChipFacts, q) -> np.ndarray:
    """One decode attention call (`batch` sequences of one query each over `kv_len` cached tokens):

      floor + combine(memory, compute, p) [+ split_kv: kv_len > 128] [+ gqa_copy: heads > kv heads,
                batch > 1, kv heads > 1: the query's (batch, group, kv head) relayout and back]
      memory  = max(KV bytes (1 + kv_len_extra / L) / (BW fb) (from L2 at l2_bandwidth_ratio x if the
                KV fits), b x kv heads x ceil(L / 128) KV blocks x kv_block_us / SMs)
      compute = 4 b L heads hd / (R ff)
    """
    b, L, h, kvh, hd = (np.asarray(x, float) for x in (batch, kv_len, heads, kv_heads, head_dim))
    fb, ff = _q(q, "bandwidth_fraction", 1.0), _q(q, "flops_fraction", 1.0)
    nbytes = b * L * kvh * hd * 2.0 * kv_bytes
    mem = resident_seconds(nbytes, nbytes, chip.l2_bytes, chip.bandwidth * fb, _q(q, "l2_bandwidth_ratio"))
    mem = mem * (1.0 + _q(q, "kv_len_extra", 0.0) / L)
    blk = _q(q, "kv_block_us")
    if blk is not None:
        mem = np.maximum(mem, b * kvh * np.ceil(L / KV_BLOCK) * blk * 1e-6 / chip.sms)
    comp = 4.0 * b * L * h * hd / (rate * ff)
    t = _q(q, "floor_us", 0.0) * 1e-6 + combine(mem, comp, "smooth", _q(q, "transition_p", 1.5))
    t = t + np.where(L > KV_BLOCK, _q(q, "split_kv_us", 0.0) * 1e-6, 0.0)
    return t + np.where((h > kvh) & (b > 1) & (kvh > 1), _q(q, "gqa_copy_us", 0.0) * 1e-6, 0.0)


def context_attention_seconds(batch, length, heads, kv_heads, head_dim, act_bytes: float, rate: float,
                              chip: ChipFacts, q) -> np.ndarray:
    """One causal prefill attention call (`batch` prompts of `length` tokens):

      floor + combine(memory, compute, p)
      memory  = Q, K, V read and O written / (BW fb) (from L2 at l2_bandwidth_ratio x if they fit)
      compute = max(4 heads hd b L (L + 1) / 2 / R', the longest CTA: 4 min(L, rows) L hd / (R' / SMs))
                + b heads ceil(L / 128) CTAs x cta_us / SMs,
                R' = R ff hd / (hd + head_dim_half) min(1, head_dim_max / hd)
    The longest CTA is the last query tile, which attends to every key: with few heads and long
    prompts the SMs wait for it (`critical_rows` its query rows).
    """
    b, L, h, kvh, hd = (np.asarray(x, float) for x in (batch, length, heads, kv_heads, head_dim))
    fb, ff = _q(q, "bandwidth_fraction", 1.0), _q(q, "flops_fraction", 1.0)
    nbytes = 2.0 * b * L * (h + 2.0 * kvh) * hd * act_bytes
    mem = resident_seconds(nbytes, nbytes, chip.l2_bytes, chip.bandwidth * fb, _q(q, "l2_bandwidth_ratio"))
    eff = hd / (hd + _q(q, "head_dim_half", 0.0)) * np.minimum(1.0, _q(q, "head_dim_max", np.inf) / hd)
    r = rate * ff * eff
    comp = 4.0 * h * hd * b * L * (L + 1.0) / 2.0 / r
    rows = _q(q, "critical_rows")
    if rows is not None:
        comp = np.maximum(comp, 4.0 * np.minimum(L, rows) * L * hd / (r / chip.sms))
    comp = comp + b * h * np.ceil(L / QUERY_TILE) * _q(q, "cta_us", 0.0) * 1e-6 / chip.sms
    return _q(q, "floor_us", 0.0) * 1e-6 + combine(mem, comp, "smooth", _q(q, "transition_p", 1.5))


def moe_seconds(tokens, hidden, inter, top_k, num_experts, tp, weight_bytes: float, act_bytes: float, rate: float,
                chip: ChipFacts, q, balanced: bool = True) -> np.ndarray:
    """One fused MoE call (`tokens` tokens, each to top_k of E experts of gated width `inter`, TP-sharded):

      floor + combine(memory u, compute u, p)
      memory  = (distinct experts x 3 hidden inter / tp weights + tokens top_k (2 hidden + 2 inter / tp)
                activations) / (BW fb); distinct = min(E, tokens top_k) for balanced routing
                (ops.balanced_distinct_experts), E (1 - (1 - top_k / E)^tokens) for random routing
      compute = 2 tokens top_k 3 hidden inter / tp / (R ff)
      u = max(1, expert_width_full / (inter / tp)): narrow per-expert GEMMs fill their tiles partly
    """
    t, hid, inter, k, e, tp = (np.asarray(x, float) for x in (tokens, hidden, inter, top_k, num_experts, tp))
    fb, ff = _q(q, "bandwidth_fraction", 1.0), _q(q, "flops_fraction", 1.0)
    distinct = balanced_distinct_experts(t, e, k) if balanced else expected_distinct_experts(t, e, k)
    nbytes = distinct * 3.0 * hid * inter / tp * weight_bytes + t * k * (2.0 * hid + 2.0 * inter / tp) * act_bytes
    slow = np.maximum(1.0, _q(q, "expert_width_full", 0.0) / (inter / tp))
    mem = nbytes / (chip.bandwidth * fb) * slow
    comp = 2.0 * t * k * 3.0 * hid * inter / tp / (rate * ff) * slow
    return _q(q, "floor_us", 0.0) * 1e-6 + combine(mem, comp, "smooth", _q(q, "transition_p", 1.5))


def allreduce_seconds(gpus, nbytes, chip: ChipFacts, q) -> np.ndarray:
    """One all-reduce of `nbytes` over `gpus` GPUs: base + 2 (g - 1) hop + 2 (g - 1) / g bytes / (link fl)
    (a ring over peer-to-peer links). On PCIe past 2 GPUs there is no peer-to-peer all-reduce
    (vLLM's custom all-reduce stops at 2 PCIe GPUs) and every GPU's ring traffic crosses the host's
    shared PCIe fabric: the bytes term becomes 2 (g - 1) bytes / (link host_fraction)."""
    g, nb = np.asarray(gpus, float), np.asarray(nbytes, float)
    lat = _q(q, "base_us", 0.0) * 1e-6 + 2.0 * (g - 1.0) * _q(q, "hop_us", 0.0) * 1e-6
    t = lat + nb * 2.0 * (g - 1.0) / g / (chip.link * _q(q, "link_fraction", 1.0))
    fh = _q(q, "host_fraction")
    if chip.pcie and fh is not None:
        t = np.where(g > 2, lat + nb * 2.0 * (g - 1.0) / (chip.link * fh), t)
    return t
