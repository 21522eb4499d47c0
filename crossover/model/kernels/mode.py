"""The `kernels` cost mode: each op of a forward priced from measured kernel tables.

Tables come from the data files of the public `aiconfigurator-core` package (kernel_tables.py;
`pip install "crossover[kernels]"`), measured per GPU with the kernels of one serving framework
(vLLM, SGLang or TensorRT-LLM). Each op of a `CompiledOps` is looked up by its shape:

- GEMM rows: each matrix product of the row (a gated MLP is gate+up then down) at m = the step's
  tokens (LM heads: the sampled positions), n and k from the op's shape at its TP;
- attention rows: the decode-attention table at (batch, KV length read per sequence) for the op's
  query heads, KV heads and head size per GPU (past the largest batch measured at a KV length,
  scaled linearly in batch from it: bandwidth-bound there), plus the KV-cache write (a separate kernel the table
  does not time) at the roofline's KV bandwidth. A verify step attends q = k + 1 positions per
  sequence but reads the KV cache ONCE: it costs the decode kernel's KV read for its batch plus
  the extra query-key FLOPs at the roofline's FLOP rate, never (k + 1) x the decode batch. Prompt
  chunks (q > 64 positions per sequence) use the context-attention table;
- routed experts: the MoE table at the step's tokens for the model's exact expert shape;
- tensor-parallel all-reduces: the framework's (else NCCL's) all-reduce at the message size.

Batch, positions per sequence and context come back from a forward's sums (tokens, KV read,
query-key pairs), exact for uniform and ragged batches with one q. Anything outside the tables, or
an op class or GPU without them, is priced by the roofline's own row time and marked: the per-op
breakdown (`KernelStepCost.priced_by`) says "kernels" or "roofline (no table)" for each op.

Registration (step.py): the mode needs the engine and the GPU, so build it per step model, e.g.
`cost = kernels.cost_mode(engine, deployment.hardware.name)` where `cost == "kernels"`;
`cost_mode` raises CrossoverError with the install line when the extra is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import CrossoverError
from .tables import (
    FRAMEWORKS,
    GEMM_DTYPES,
    GPU_FOLDERS,
    KV_DTYPES,
    MOE_DTYPES,
    PACKAGE,
    load_op_table,
    require_package,
)
from ..roofline import CompiledOps, StepCost
from ...units import COMPUTE_DTYPE

KERNELS, FALLBACK = "kernels", "roofline (no table)"
PREFILL_Q = 64.0  # positions per sequence above which attention is a prompt chunk (context table)
_GATED = ("mlp", "shared_experts")  # gated MLPs: gate+up (n = 2 x width) then down (k = width)
_ROW_PARALLEL = ("o_proj",)  # TP splits k (the input) rather than n


@dataclass
class KernelStepCost(StepCost):
    """A forward's StepCost with, per op name, which mode priced it ("kernels", "roofline (no
    table)", or "kernels (roofline at i of n points)" where only part of the inputs were covered)."""

    priced_by: dict[str, str] = field(default_factory=dict)


class _Curve:
    """Log seconds of one op row over a log axis (1-D: tokens, bytes) or a (batch, length) grid
    (attention), interpolated linearly in log-log space; NaN off the table or next to a hole.

    Stored per segment (cell) as an intercept and slopes, NaN where an end (corner) was not
    measured, with a NaN sentinel segment last: an index of -1 (below the axis) or len - 1 (above)
    lands on it, so a lookup is a search, a gather and a multiply-add, with no masks."""

    def __init__(self, x: np.ndarray, y: np.ndarray, x2: np.ndarray | None = None):
        """1-D: `y` is (rows, len(x)) log seconds, several op rows sharing an axis; 2-D: `y` is
        (len(x), len(x2)). More work never costs less: each curve is lifted to its running maximum
        along every axis (measurement noise and tile-choice dips otherwise make a step cheaper at a
        larger batch; an engine could run the larger shape's kernel on padded inputs)."""
        self.x2 = x2
        y = _monotone(y, axes=(1,) if x2 is None else (0, 1))
        pad = lambda a: np.append(a, np.nan)  # noqa: E731  (the sentinel segment)
        self.x0, self.xs = pad(x[:-1]), pad(1.0 / np.diff(x))
        self.xcut = np.append(x[0] - 1e-9, x[1:])  # a measured point belongs to the segment ending there
        if x2 is None:
            nan = np.full((y.shape[0], 1), np.nan)
            self.c0 = np.hstack([y[:, :-1], nan])
            self.c1 = np.hstack([np.diff(y, axis=1), nan])
            return
        self.y0, self.ys = pad(x2[:-1]), pad(1.0 / np.diff(x2))
        self.ycut = np.append(x2[0] - 1e-9, x2[1:])
        f00, f10, f01, f11 = y[:-1, :-1], y[1:, :-1], y[:-1, 1:], y[1:, 1:]
        grow = lambda a: np.pad(a, ((0, 1), (0, 1)), constant_values=np.nan)  # noqa: E731
        self.c = [grow(f00), grow(f10 - f00), grow(f01 - f00), grow(f11 - f10 - f01 + f00)]

    def at(self, *coords) -> np.ndarray:
        lx = np.log(np.maximum(coords[0], 1e-300))
        i = np.searchsorted(self.xcut, lx, side="left") - 1
        tx = (lx - self.x0[i]) * self.xs[i]
        if self.x2 is None:  # rows first
            return np.exp(self.c0[:, i] + self.c1[:, i] * tx)
        ly = np.log(np.maximum(coords[1], 1e-300))
        j = np.searchsorted(self.ycut, ly, side="left") - 1
        ty = (ly - self.y0[j]) * self.ys[j]
        c00, c10, c01, c11 = (c[i, j] for c in self.c)
        return np.exp(c00 + tx * (c10 + ty * c11) + ty * c01)


def _monotone(y: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`y` lifted to its running maximum along each axis, holes (NaN) kept as holes."""
    out = y
    for ax in axes:
        out = np.where(np.isnan(y), np.nan, np.fmax.accumulate(out, axis=ax))
    return out


def _gemm_seconds(grid, m: np.ndarray, n: float, k: float) -> np.ndarray:
    """One GEMM's seconds over the table's m axis. Below the smallest measured n or k: priced at it
    (kernels pad to their tile). Past the largest n (an LM head of 128k-256k columns): as equal
    column slices that fit, run one after the other (the single kernel an engine runs is no
    slower than its slices, so this errs high by a launch or so)."""
    n_ax, k_ax = np.exp(grid.axes[1]), np.exp(grid.axes[2])
    n, k = max(n, n_ax[0]), max(k, k_ax[0])
    parts = max(1, int(np.ceil(n / n_ax[-1] - 1e-9)))
    return parts * grid.at(m, n / parts, k)


def _gemm_shapes(op, tp: int) -> list[tuple[float, float]]:
    """(n, k) of each matrix product one op row runs per layer on one GPU."""
    shard = tp if op.sharded else 1
    k_in = op.in_features or 1.0
    if op.name in _GATED:
        width = op.params / (3.0 * k_in)
        return [(2.0 * width / shard, k_in), (k_in, width / shard)]
    n_out = op.params / k_in
    if op.name in _ROW_PARALLEL:
        return [(n_out, k_in / shard)]
    return [(n_out / shard, k_in)]


class Kernels:
    """Cost mode pricing ops from measured kernel tables of one framework on one GPU (module doc).
    `forward` and `seconds` take what `step.Roofline` takes; ops without a table cost what the
    roofline says for them."""

    name = "kernels"

    def __init__(self, engine: str = "vllm", hardware_name: str = "h100-sxm", data_root: str | Path | None = None,
                 package_version: str | None = None):
        if engine not in FRAMEWORKS:
            raise CrossoverError(f"unknown engine {engine!r} for --cost kernels; choose from {', '.join(FRAMEWORKS)}")
        if data_root is None:
            root, version = require_package()
            self.origin = f"{PACKAGE} {version}"
        else:
            root, version = Path(data_root), package_version
            self.origin = f"{PACKAGE} {version}" if version else f"kernel tables under {root}"
        self.engine, self.hardware_name = engine, hardware_name
        self.framework = FRAMEWORKS[engine]
        self.gpu = GPU_FOLDERS.get(hardware_name)
        self.root, self.package_version = root, version

    def table(self, op: str):
        """One op class's table for this GPU and framework (loaded on first use), or None."""
        if self.framework is None or self.gpu is None:
            return None
        return load_op_table(self.root, self.gpu, self.framework, op)

    @property
    def source(self) -> str:
        """Where the prices come from: package, version, GPU folder, framework and version per table."""
        head = f"{self.origin} kernel tables" if self.package_version else self.origin
        if self.framework is None:
            return f"{head}: none for engine {self.engine} (every op priced by the roofline)"
        if self.gpu is None:
            return f"{head}: none for {self.hardware_name} (every op priced by the roofline)"
        parts = []
        for op in ("gemm", "decode_attention", "context_attention", "moe", "allreduce"):
            t = self.table(op)
            parts.append(f"{op} {t.framework} {t.version}" if t is not None else f"{op} none")
        return f"{head}, {self.gpu}: " + ", ".join(parts)

    # ------------------------------------------------------------------ plans

    def _plan(self, ops: CompiledOps) -> dict:
        if ops.deployment is None:
            raise CrossoverError("these compiled ops carry no deployment; compile them with roofline.compile_ops")
        if ops.deployment.hardware.name != self.hardware_name:
            raise CrossoverError(f"this kernels cost mode holds {self.hardware_name} tables, not "
                                 f"{ops.deployment.hardware.name}'s; build one with kernels.cost_mode(engine, hardware)")
        return _plan(self, ops)

    def forward(self, ops: CompiledOps, work) -> KernelStepCost:
        return self._price(ops, work, detail=True)

    def seconds(self, ops: CompiledOps, work) -> np.ndarray:
        return self._price(ops, work, detail=False).total

    def _price(self, ops: CompiledOps, work, detail: bool) -> KernelStepCost:
        plan = self._plan(ops)
        tokens = np.asarray(work.tokens, float)
        sampled = tokens if work.sampled is None else np.asarray(work.sampled, float)
        kv, qk = np.asarray(work.kv, float), np.asarray(work.qk, float)
        shape = np.broadcast_shapes(tokens.shape, sampled.shape, kv.shape[1:], qk.shape[1:])
        n = len(ops.names)
        time = np.full((n + 1,) + shape, np.nan)  # rows, then the all-reduces; NaN: no table there
        stacks = plan["tokens"]
        if work.sampled is None and "all" in stacks:  # GEMM, MoE and all-reduce rows: one lookup
            rows, curve = stacks["all"]
            time[rows] = curve.at(tokens)  # < 1 token: off the table (the roofline's zero-token cost)
        else:
            for key, m in (("tokens", tokens), ("sampled", sampled)):
                if key in stacks:
                    rows, curve = stacks[key]
                    time[rows] = curve.at(m)
        for i, entry in plan["attention"]:
            time[i] = self._attention(ops, i, entry, tokens, kv, qk)
        if not ops.has_allreduce:
            time[n] = 0.0
        missing = np.isnan(time)
        names, rows = ops.names, None
        if detail or missing[:n].any():  # the roofline's own row costs, for the fallback and the detail
            names, rows = ops._row_costs("all", tokens, sampled, kv, qk)
            time[:n] = np.where(missing[:n], rows[0], time[:n])
        if missing[n].any():
            time[n] = np.where(missing[n], np.asarray(ops._allreduce(tokens), float), time[n])
        # kernel floors: inside the tables' times; kept where a row fell back to the roofline
        overhead = ops.overhead_s if missing[:n].any() else self._gaps(ops)
        total = overhead + time.sum(axis=0)
        if not detail:
            return KernelStepCost(total)
        parts = [(names, (time[:n],) + tuple(np.broadcast_to(r, time[:n].shape) for r in rows[1:]))]
        priced = {name: _mark(~missing[[j for j, x in enumerate(names) if x == name]]) for name in dict.fromkeys(names)}
        if ops.has_allreduce:
            ar, zero = time[n], np.zeros(shape)
            parts.append((("allreduce",), tuple(x[None] for x in (ar, ar, zero, zero, zero))))
            priced["allreduce"] = _mark(~missing[n][None])
        return KernelStepCost(total, parts, overhead, priced)

    @staticmethod
    def _gaps(ops: CompiledOps) -> float:
        """The forward's per-layer overhead without the distilled kernel floors (Efficiency.kernel_floors_s),
        which the measured kernel times already hold (every row priced from a table)."""
        if ops.deployment is None:
            return ops.overhead_s
        eff = ops.deployment.efficiency
        if eff.kernel_floors_s <= 0.0 or eff.layer_overhead_s <= 0.0:
            return ops.overhead_s
        return ops.overhead_s * max(1.0 - eff.kernel_floors_s / eff.layer_overhead_s, 0.0)

    def _attention(self, ops: CompiledOps, i: int, entry: tuple, tokens, kv, qk) -> np.ndarray:
        """One attention row: decode table at (batch, KV length) plus the KV write and the extra
        query-key FLOPs of q > 1 positions; context table for prompt chunks."""
        decode = _attention_curve(self, "decode_attention", *entry)
        w = ops._window_index[i]
        kvw, qkw, t = kv[w], qk[w], tokens
        # Invert the sums of b sequences with q new positions over c cached tokens each:
        # tokens = b q, kv = b (c + q), qk = b q (c + (q + 1) / 2)  =>  b = (tokens kv - tokens^2 / 2) / (qk - tokens / 2)
        # (exact for uniform and ragged batches with one q; qk >= tokens, so the divisor is > 0 when tokens are).
        b = (t * kvw - 0.5 * t * t) / np.maximum(qkw - 0.5 * t, 1e-300)
        b = np.minimum(np.maximum(b, 1.0), np.maximum(t, 1.0))
        q = t / b
        length = kvw / b
        # the KV-cache write is a kernel of its own, at the roofline's KV bandwidth; no tokens: NaN
        # (length 0 is off the table), so the roofline's zero-token cost stands
        write = t * (ops.kv_write_per_token[i] / ops.bandwidth[i])
        qmax = float(np.max(q)) if np.size(q) else 0.0
        if decode is not None and np.size(q) and float(np.min(q)) <= PREFILL_Q:
            extra = np.maximum(qkw - kvw, 0.0) * (ops.flops_per_query_attended[i] / ops.rate[i])
            small = decode.at(b, length) + extra + write
            if qmax <= PREFILL_Q:
                return small
        else:
            small = np.full(np.shape(q), np.nan)
        big = np.full(np.shape(q), np.nan)
        context = _attention_curve(self, "context_attention", *entry)
        if context is not None:  # prompt chunks: the causal context kernel, scaled to the pairs scored
            big = context.at(b, q) * qkw / np.maximum(b * q * (q + 1.0) / 2.0, 1e-300) + write
        return np.where(q > PREFILL_Q, big, small)


def _mark(measured: np.ndarray) -> str:
    """How an op was priced, from its rows' coverage (rows x points)."""
    per_point = measured.reshape(measured.shape[0], -1).all(axis=0)
    if per_point.all():
        return KERNELS
    if not measured.any():
        return FALLBACK
    return f"{KERNELS} (roofline outside the table at {int((~per_point).sum())} of {per_point.size} points)"


def _extend_batch(batches: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Attention seconds (batch x length) past the largest batch measured at each length, scaled
    linearly in batch from it: the tables stop near a few hundred thousand cached tokens per call,
    where the kernel already streams the KV cache at its full rate (doubling the batch there costs
    1.7-1.9x in the H100 vLLM table). Only from a measured batch of 16 or more (saturated)."""
    out = seconds.copy()
    for j in range(out.shape[1]):
        have = np.nonzero(np.isfinite(out[:, j]))[0]
        if have.size and batches[have[-1]] >= 16 and have[-1] + 1 < len(batches):
            last = have[-1]
            out[last + 1:, j] = out[last, j] * batches[last + 1:] / batches[last]
    return out


@lru_cache(maxsize=128)
def _plan(mode: Kernels, ops: CompiledOps) -> dict:
    """Measured curves of the rows of `ops` that have tables (the rest keep the roofline's time):
    GEMM rows stacked on the GEMM table's m axis (by tokens, and LM heads by sampled positions),
    MoE rows on the MoE table's token axis, attention rows on (batch, KV length) grids, and the
    all-reduce's calls, bytes per token and curve. Interpolation over the fixed axes (n, k, heads)
    happens here once; a forward then interpolates only over tokens, batch and length."""
    dep = ops.deployment
    tp = dep.tp
    rows = [op for op in ops.source_ops if op.kind != "allreduce"]
    sampled = ops.sampled_rows if ops.sampled_rows is not None else np.zeros(len(rows), bool)
    gemm = mode.table("gemm")
    has = {op.kind for op in rows}
    moe = mode.table("moe") if "experts" in has else None
    stacks: dict[tuple, list] = {}  # (axis id, by sampled) -> [(row, log seconds on that axis)]
    axes: dict[int, np.ndarray] = {}
    attention = []
    for i, op in enumerate(rows):
        if op.kind == "gemm" and gemm is not None:
            native = dep.hardware.compute_rate_dtype(COMPUTE_DTYPE[op.dtype]) == COMPUTE_DTYPE[op.dtype]
            grid = gemm.grid((GEMM_DTYPES.get(op.dtype, ""),)) if native else None  # weight-only: no table
            if grid is None:
                continue
            m = np.exp(grid.axes[0])
            total = sum(_gemm_seconds(grid, m, n, k) for n, k in _gemm_shapes(op, tp))
            axes[id(grid.axes[0])] = grid.axes[0]
            stacks.setdefault((id(grid.axes[0]), bool(sampled[i])), []).append((i, np.log(op.count * total)))
        elif op.kind == "attention" and op.kv_heads and mode.framework is not None and mode.gpu is not None:
            kvh = int(max(op.kv_heads / tp, 1.0)) if op.kv_sharded else int(op.kv_heads)
            key = (kvh, int(op.score_dim / 2.0), KV_DTYPES.get(dep.kv_dtype, ""))
            entry = (key, op.heads / tp, op.count)
            if _attention_curve(mode, "decode_attention", *entry) is not None or mode.table("context_attention"):
                attention.append((i, entry))
        elif op.kind == "experts" and moe is not None and dep.data_parallel == 1:  # (every rank's tokens
            # under data-parallel attention over tp x dp GPUs: no table keyed so, the roofline's row)
            ep = dep.expert_parallel and tp > 1
            key = (MOE_DTYPES.get(op.dtype, ""), int(op.in_features), int(round(op.params / (3.0 * op.in_features))),
                   int(op.top_k), int(op.num_experts), 1 if ep else tp, tp if ep else 1)
            grid = moe.grid(key)
            if grid is not None:
                axes[id(grid.axes[0])] = grid.axes[0]
                stacks.setdefault((id(grid.axes[0]), False), []).append((i, np.log(op.count) + grid.values))
    allreduce_row = len(rows)  # the collectives ride along as one more row
    ar_ops = [op for op in ops.source_ops if op.kind == "allreduce"]
    # (with data-parallel attention the MoE gathers ride in the same row: the roofline's, no table)
    gathers = dep.data_parallel > 1 and "experts" in has
    table = mode.table("allreduce") if ops.has_allreduce and ar_ops and not gathers else None
    if table is not None:  # under EP as well: the experts' partial outputs are all-reduced (roofline.compile_ops)
        grid = table.grid((tp,))
        if grid is not None:  # message bytes -> tokens: one axis with the GEMM rows
            calls, width = sum(op.count for op in ar_ops), max(op.width for op in ar_ops)
            axis = grid.axes[0] - np.log(width * dep.act_bytes)
            axes[id(axis)] = axis
            stacks.setdefault((id(axis), False), []).append((allreduce_row, np.log(calls) + grid.values))
    return {"tokens": _token_stacks(stacks, axes, allreduce_row), "attention": attention}


@lru_cache(maxsize=256)
def _attention_curve(mode: "Kernels", op: str, key: tuple, heads: float, count: float) -> "_Curve | None":
    """One attention row's (batch, length) curve from the decode or context table (loaded on first
    use: a decode-only curve never reads the context table), or None where there is none."""
    table = mode.table(op)
    if table is None:
        return None
    grid, ratio = table.grid(key), 1.0
    if grid is None:  # more KV heads per GPU than measured (MHA): the kernel's grid runs over batch x
        # KV heads, so b sequences of G KV heads cost what b G / g sequences of g KV heads do
        kvh, rest = key[0], key[1:]
        fits = [g for (g, *r) in table.grids if tuple(r) == rest and g < kvh and kvh % g == 0]
        if not fits:
            return None
        g = max(fits)
        grid, ratio = table.grid((g,) + rest), kvh / g
    batches = np.exp(grid.axes[1])
    bb, ll = np.meshgrid(batches, np.exp(grid.axes[2]), indexing="ij")
    vals = _extend_batch(batches, count * grid.at(heads / ratio, bb, ll))
    return _Curve(grid.axes[1] - np.log(ratio), np.log(vals), grid.axes[2])


def _token_stacks(stacks: dict, axes: dict, collective_row: int) -> dict:
    """Every row priced by token count on one log axis (the union of their own measured axes
    within the GEMM/MoE range; piecewise-linear curves sampled at a superset of their knots are
    the same curves), so one lookup prices them all: 'all' (a forward whose every row sees the
    same token count), 'tokens' and 'sampled' (LM heads, when prompts sample fewer positions)."""
    if not stacks:
        return {}
    own = [(i, by_s, axes[ax], y) for (ax, by_s), group in stacks.items() for i, y in group]
    core = [x for i, _, x, _ in own if i != collective_row and len(x)] or [x for _, _, x, _ in own if len(x)]
    lo, hi = min(x[0] for x in core), max(x[-1] for x in core)
    union = np.unique(np.concatenate([x[(x >= lo) & (x <= hi)] for _, _, x, _ in own]))
    rows, values, by_sampled = [], [], []
    for i, by_s, x, y in own:
        rows.append(i)
        values.append(np.log(_Curve(x, y[None]).at(np.exp(union))[0]))
        by_sampled.append(by_s)
    rows, values, by_sampled = np.array(rows), np.array(values), np.array(by_sampled)
    out = {"all": (rows, _Curve(union, values))}
    for key, pick in (("tokens", ~by_sampled), ("sampled", by_sampled)):
        if pick.any():
            out[key] = (rows[pick], _Curve(union, values[pick]))
    return out


@lru_cache(maxsize=64)
def cost_mode(engine: str, hardware_name: str) -> Kernels:
    """The kernels cost mode for an engine (vllm, vllm-0.10, vllm-v0, sglang, sglang-0.4, trtllm, hf) on a GPU (memoised).
    Raises CrossoverError with the install line when aiconfigurator-core or pyarrow is missing."""
    return Kernels(engine, hardware_name)
