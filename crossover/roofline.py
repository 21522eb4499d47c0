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
from functools import cached_property

import numpy as np

from .ops import SAMPLED_OPS, Op, expected_distinct_experts, kv_share, model_ops
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
    if p == 1.5 and big.size > 4096:  # (1 + r^1.5)^(2/3) without general powers: faster on large grids
        return big * np.square(np.cbrt(1.0 + ratio * np.sqrt(ratio)))
    if p == 2.0 and big.size > 4096:
        return big * np.sqrt(1.0 + ratio * ratio)
    return big * np.power(1.0 + np.power(ratio, p), 1.0 / p)


@dataclass(frozen=True)
class Plan:
    """An op list compiled against a deployment: per-row coefficients, so one step is a few array ops."""

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
    window: np.ndarray  # attended-context cap (inf: none)
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

    @cached_property
    def windows(self) -> tuple[float, ...]:
        """Distinct attention windows of the rows (inf: the whole context)."""
        return tuple(np.unique(self.window).tolist())

    @cached_property
    def window_index(self) -> np.ndarray:
        """For each row, the index of its window in `windows`."""
        return np.searchsorted(np.asarray(self.windows), self.window)

    def cost(self, batch, q=1, context=0) -> StepCost:
        """Seconds for one forward over `batch` sequences, `q` new positions each, `context` cached."""
        b, qq, c = np.asarray(batch, float), np.asarray(q, float), np.asarray(context, float)
        shape = np.broadcast_shapes(b.shape, qq.shape, c.shape)
        col = (slice(None),) + (None,) * len(shape)  # row coefficients against the input shape
        w = self.window[col]
        kv_len = b * np.minimum(c + qq, w)
        # Causal: query j of the q new positions attends to context + j tokens (capped by the window).
        qk_len = b * qq * np.minimum(c + (qq + 1.0) / 2.0, w)
        out = self.from_sums(b * qq, kv_len, qk_len)  # token-only ops stay on the tokens' own shape
        out.total = np.broadcast_to(out.total, shape)
        return out

    def window_sums(self, q: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(KV tokens read, query x key pairs) summed over sequences (last axis), per distinct window."""
        length = context + q  # the same for every window until capped
        half = context + (q + 1.0) / 2.0
        kv = np.empty((len(self.windows),) + length.shape[:-1])
        qk = np.empty_like(kv)
        for i, w in enumerate(self.windows):
            capped = np.isfinite(w)
            kv[i] = (np.minimum(length, w) if capped else length).sum(axis=-1)
            qk[i] = (q * (np.minimum(half, w) if capped else half)).sum(axis=-1)
        return kv, qk

    def timer(self, max_tokens: int) -> "StepTimer":
        """A fast evaluator for integer token counts up to `max_tokens`: everything that depends only on
        the step's token count (GEMMs, experts, all-reduces, overheads) is tabulated once."""
        att = self.kv_bytes_per_attended > 0
        lm = self.sampled_rows if self.sampled_rows is not None else np.zeros(len(self.names), bool)
        rest = ~att & ~lm
        tokens = np.arange(max_tokens + 1, dtype=float)
        sub = {f: getattr(self, f)[rest] for f in ("weight_bytes", "expert_bytes", "num_experts", "top_k",
                                                   "act_bytes_per_token", "flops_per_token", "bandwidth", "rate")}
        n = int(rest.sum())
        zeros = np.zeros(n)
        gemm_plan = Plan(tuple(np.asarray(self.names)[rest]), sub["weight_bytes"], sub["expert_bytes"],
                         sub["num_experts"], sub["top_k"], sub["act_bytes_per_token"], sub["flops_per_token"],
                         zeros, zeros, zeros, np.full(n, np.inf), sub["bandwidth"], sub["rate"],
                         self.allreduce_s_per_token, self.allreduce_latency_s, self.has_allreduce, self.overhead_s,
                         self.transition, self.p, self.ep_groups)
        table = gemm_plan.from_sums(tokens, np.zeros((n, tokens.size)), np.zeros((n, tokens.size))).total
        col = (slice(None), None)
        lm_table = combine((self.weight_bytes[lm][col] + self.act_bytes_per_token[lm][col] * tokens)
                           / self.bandwidth[lm][col], self.flops_per_token[lm][col] * tokens / self.rate[lm][col],
                           self.transition, self.p).sum(axis=0)
        wi = self.window_index[att]
        return StepTimer(table, wi, self.kv_bytes_per_attended[att], self.kv_write_per_token[att],
                         self.flops_per_query_attended[att], self.bandwidth[att], self.rate[att],
                         self.transition, self.p, lm_table)

    @cached_property
    def _split(self) -> tuple[np.ndarray, np.ndarray]:
        """Row indices of token-only ops (GEMMs, experts) and of attention ops."""
        att = self.kv_bytes_per_attended > 0
        return np.nonzero(~att)[0], np.nonzero(att)[0]

    @cached_property
    def _coef(self) -> dict[str, np.ndarray]:
        """Per-part coefficient arrays, indexed once (the hot path only takes views)."""
        g, a = self._split
        out = {f"g_{f}": getattr(self, f)[g] for f in ("weight_bytes", "act_bytes_per_token", "flops_per_token",
                                                        "expert_bytes", "num_experts", "top_k", "bandwidth", "rate")}
        out.update({f"a_{f}": getattr(self, f)[a] for f in ("kv_bytes_per_attended", "kv_write_per_token",
                                                             "flops_per_query_attended", "bandwidth", "rate")})
        out["g_names"] = tuple(self.names[i] for i in g)  # type: ignore[assignment]
        out["a_names"] = tuple(self.names[i] for i in a)  # type: ignore[assignment]
        out["has_experts"] = bool(out["g_expert_bytes"].any())  # type: ignore[assignment]
        lm = self.sampled_rows if self.sampled_rows is not None else np.zeros(len(self.names), bool)
        out["g_sampled"] = lm[g]
        out["all_sampled"] = lm
        out["has_sampled"] = bool(lm.any())  # type: ignore[assignment]
        return out

    def _row_tokens(self, mask: np.ndarray, tokens: np.ndarray, sampled) -> np.ndarray:
        """Tokens each row processes: `sampled` on LM-head rows, `tokens` elsewhere (row axis first)."""
        col = (slice(None),) + (None,) * tokens.ndim
        if sampled is None or not mask.any():
            return tokens
        return np.where(mask[col], np.asarray(sampled, float), tokens)

    def from_sums(self, tokens: np.ndarray, kv_len: np.ndarray, qk_len: np.ndarray, sampled=None) -> StepCost:
        """Seconds for a forward of `tokens` new tokens whose attention reads `kv_len` cached tokens
        and scores `qk_len` query-key pairs per row (row axis first): mixed batches of decode,
        verify and prefill chunks cost the same way as a uniform batch. `sampled`: positions whose
        logits are needed (LM head); default all `tokens` (decode and verify). Token-only ops are
        computed on `tokens`' shape, attention ops on the sums' shape; the total broadcasts both."""
        tokens = np.asarray(tokens, float)
        kv_len, qk_len = np.asarray(kv_len, float), np.asarray(qk_len, float)
        if kv_len.shape[1:] == tokens.shape and not self._coef["has_experts"]:
            return _fused_rows(self, tokens, kv_len, qk_len, sampled)  # one shape: one pass over all rows
        c = self._coef
        col = (slice(None),) + (None,) * tokens.ndim
        # token-only rows
        row_tok = self._row_tokens(c["g_sampled"], tokens, sampled)
        nbytes = c["g_weight_bytes"][col] + c["g_act_bytes_per_token"][col] * row_tok
        flops = c["g_flops_per_token"][col] * row_tok
        if c["has_experts"]:
            e, k, eb, fpt = (c["g_num_experts"][col], c["g_top_k"][col], c["g_expert_bytes"][col],
                             c["g_flops_per_token"][col])
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
                routed = tokens * k / gg
                imbalance = np.where(routed > 0, (routed + z * np.sqrt(routed * (1.0 - 1.0 / gg)))
                                     / np.maximum(routed, 1e-12), 1.0)
                nbytes = nbytes + eb * busiest
                flops = flops + (imbalance - 1.0) * np.where(eb > 0, fpt, 0.0) * tokens
            else:
                nbytes = nbytes + eb * distinct
        tm = nbytes / c["g_bandwidth"][col]
        tc = flops / c["g_rate"][col]
        t = combine(tm, tc, self.transition, self.p)
        total = t.sum(axis=0) + self.overhead_s
        parts = [(c["g_names"], (t, tm, tc, nbytes, flops))]
        if len(c["a_names"]):
            _, a = self._split
            shape_t = (slice(None),) + (None,) * (kv_len.ndim - 1)
            a_bytes = c["a_kv_bytes_per_attended"][shape_t] * kv_len[a] + c["a_kv_write_per_token"][shape_t] * tokens
            a_flops = c["a_flops_per_query_attended"][shape_t] * qk_len[a]
            a_tm = a_bytes / c["a_bandwidth"][shape_t]
            a_tc = a_flops / c["a_rate"][shape_t]
            a_t = combine(a_tm, a_tc, self.transition, self.p)
            total = total + a_t.sum(axis=0)
            parts.append((c["a_names"], (a_t, a_tm, a_tc, a_bytes, a_flops)))
        if self.has_allreduce:
            ar = self.allreduce_s_per_token * tokens + self.allreduce_latency_s
            total = total + ar
            zero = np.zeros_like(ar)
            parts.append((("allreduce",), tuple(x[None] for x in (ar, ar, zero, zero, zero))))
        total = np.asarray(total)
        return StepCost(total, parts, self.overhead_s)


def _fused_rows(plan: "Plan", tokens: np.ndarray, kv_len: np.ndarray, qk_len: np.ndarray, sampled=None) -> StepCost:
    """Plan.from_sums when tokens and the attention sums share a shape and no experts are routed:
    all rows in one array (fewer, larger numpy calls; the same numbers)."""
    col = (slice(None),) + (None,) * tokens.ndim
    row_tok = plan._row_tokens(plan._coef["all_sampled"], tokens, sampled)
    nbytes = (plan.weight_bytes[col] + plan.act_bytes_per_token[col] * row_tok
              + plan.kv_bytes_per_attended[col] * kv_len + plan.kv_write_per_token[col] * tokens)
    flops = plan.flops_per_token[col] * row_tok + plan.flops_per_query_attended[col] * qk_len
    tm = nbytes / plan.bandwidth[col]
    tc = flops / plan.rate[col]
    t = combine(tm, tc, plan.transition, plan.p)
    total = t.sum(axis=0) + plan.overhead_s
    parts = [(plan.names, (t, tm, tc, nbytes, flops))]
    if plan.has_allreduce:
        ar = plan.allreduce_s_per_token * tokens + plan.allreduce_latency_s
        total = total + ar
        zero = np.zeros_like(ar)
        parts.append((("allreduce",), tuple(x[None] for x in (ar, ar, zero, zero, zero))))
    return StepCost(np.asarray(total), parts, plan.overhead_s)


@dataclass(frozen=True)
class StepTimer:
    """Step seconds from (integer tokens, per-window attention sums): a table lookup for the
    token-count-only part plus the attention rows. Same numbers as Plan.from_sums."""

    table: np.ndarray
    window_index: np.ndarray
    kv_bytes_per_attended: np.ndarray
    kv_write_per_token: np.ndarray
    flops_per_query_attended: np.ndarray
    bandwidth: np.ndarray
    rate: np.ndarray
    transition: str
    p: float
    lm_table: np.ndarray  # LM-head seconds by the number of sampled positions

    def __call__(self, tokens, kv_win: np.ndarray, qk_win: np.ndarray, sampled=None) -> np.ndarray:
        """Seconds; `tokens` integer(s), sums per window with the window axis first, `sampled` the
        positions needing logits (default: all tokens)."""
        t = np.asarray(tokens)
        base = self.table.take(t.astype(np.int64), mode="raise")  # out of the tabulated range: IndexError
        read_s, write_s, flop_s = self._per_unit
        col = (slice(None),) + (None,) * t.ndim
        tm = read_s[col] * kv_win[self.window_index] + write_s[col] * t
        tc = flop_s[col] * qk_win[self.window_index]
        att = combine(tm, tc, self.transition, self.p).sum(axis=0)
        s = t if sampled is None else np.asarray(sampled)
        return base + att + self.lm_table.take(s.astype(np.int64), mode="raise")

    @cached_property
    def _per_unit(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Seconds per attended KV token, per written token and per query-key pair, by row."""
        return (self.kv_bytes_per_attended / self.bandwidth, self.kv_write_per_token / self.bandwidth,
                self.flops_per_query_attended / self.rate)


def compile_ops(dep: Deployment, ops: list[Op], num_layers: float | None = None) -> Plan:
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
    if num_layers is None:
        num_layers = sum(op.count for op in ops if op.kind == "attention")
    return Plan(tuple(op.name for op in rows), wb, eb, ne, tk, ab, fpt, kva, kvw, fqa, win, bw, rate,
                ar_per_token, ar_calls * dep.allreduce_latency, ar_count > 0 and tp > 1,
                num_layers * eff.layer_overhead_s, eff.transition, eff.transition_p,
                tp if dep.expert_parallel else 1,
                np.array([op.name in SAMPLED_OPS for op in rows], bool))


def target_ops(dep: Deployment) -> list[Op]:
    """The target model's op list at the deployment's TP and weight dtype."""
    return model_ops(dep.model, dep.wdtype, dep.tp)


_PLANS: dict[tuple, tuple[tuple, Plan]] = {}


def cached_plan(key: tuple, owners: tuple, build) -> Plan:
    """A compiled plan memoised by the ids of immutable (frozen) inputs; holding `owners` keeps the
    ids from being reused, and checking identity guards against a stale entry."""
    hit = _PLANS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], owners)):
        return hit[1]
    if len(_PLANS) > 256:
        _PLANS.clear()
    plan = build()
    _PLANS[key] = (owners, plan)
    return plan


def target_plan(dep: Deployment) -> Plan:
    """The target's compiled op list."""
    return cached_plan(("target", id(dep)), (dep,), lambda: compile_ops(dep, target_ops(dep)))


def engine_step(plan: Plan, dep: Deployment, batch, q=1, context=0) -> StepCost:
    """One engine step: a forward of `plan` plus the per-step overhead."""
    cost = plan.cost(batch, q, context)
    cost.total = cost.total + dep.efficiency.step_overhead_s
    cost.overhead = cost.overhead + dep.efficiency.step_overhead_s
    return cost


def step_time(dep: Deployment, batch, q=1, context=0) -> StepCost:
    """One engine step of the target: a forward over `batch` x `q` new tokens plus the step overhead."""
    return engine_step(target_plan(dep), dep, batch, q, context)
