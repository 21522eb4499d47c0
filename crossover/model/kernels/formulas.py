"""Op-level kernel formulas: one kernel call's seconds from its shape, the forms
validation/distill_kernels.py fits per GPU x op class to measured kernel tables (hardware YAML
`distilled:`; errors in validation/kernels.md). The step model (roofline.py) prices whole forwards
and reads a few of their parameters (Distilled.efficiency_fields); these price single calls, with the
per-call effects a table shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ops import balanced_distinct_experts, expected_distinct_experts
from ..roofline import combine

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
