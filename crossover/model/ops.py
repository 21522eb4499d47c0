"""A model as a list of operations with repeat counts: one source of truth for the shapes, bytes and
FLOPs of every op, reused by decode, verify, prefill and draft forwards (the cost engine is
roofline.py), and for the parameter counts of a model (total_params, active_params)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from ..specs.model import Model

OpKind = Literal["gemm", "attention", "experts", "allreduce"]


@dataclass(frozen=True)
class Op:
    """One operation of a forward pass, repeated `count` times (usually once per layer).

    gemm: `params` weights (whole model, before TP sharding) applied to every new token.
    attention: reads the KV cache; `kv_elems` per token per layer, `heads` query heads,
      `score_dim` FLOP-relevant width per head (QK + PV), `window` caps the context.
    experts: `params` per routed expert; `num_experts` choose `top_k` per token.
    allreduce: a tensor-parallel all-reduce of `width` activations per token.
    """

    name: str
    kind: OpKind
    count: float = 1.0
    params: float = 0.0
    dtype: str = "bf16"
    sharded: bool = True  # weights split across TP ranks (False: replicated on each rank)
    in_features: float = 0.0
    out_features: float = 0.0
    kv_elems: float = 0.0
    kv_sharded: bool = True  # GQA KV heads split across ranks; MLA's latent cache is replicated
    kv_heads: float = 0.0  # for replication when kv_heads < tp
    heads: float = 0.0
    score_dim: float = 0.0
    window: float | None = None
    num_experts: int = 0
    top_k: int = 0
    width: float = 0.0


def _linear_dtype(weight_dtype: str, part: Literal["dense", "experts"]) -> str:
    """Dtype of a layer's linear weights: mxfp4 checkpoints quantise only the experts (gpt-oss)."""
    if weight_dtype == "mxfp4" and part == "dense":
        return "bf16"
    return weight_dtype


# Ops that run only where a next token is sampled: prompts need logits at their last position only.
SAMPLED_OPS = ("lm_head", "draft_lm_head", "medusa_heads")


def mlp_params(hidden: int, width: int) -> int:
    """Parameters of one gated (SwiGLU) MLP of `width`: gate, up and down projections."""
    return 3 * hidden * width


def kv_elements_per_token_layer(model: Model) -> int:
    """KV-cache elements one token stores in one layer (K and V; MLA's latent + rope key)."""
    if model.mla is not None:
        return model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    return 2 * model.num_key_value_heads * model.hd


def embedding_params(model: Model) -> int:
    """Parameters of the input embedding (the LM head has as many; counted apart unless tied)."""
    return model.vocab_size * model.hidden_size


def _norm_params(model: Model) -> int:
    """RMSNorm weights: two per layer and a final one (held in memory, never streamed as an op)."""
    return model.num_hidden_layers * 2 * model.hidden_size + model.hidden_size


def _streamed_params(model: Model, experts_per_token: int | None) -> int:
    """Parameters of the full model's ops, routed experts counted `experts_per_token` per MoE layer
    (None: all of them), the router counted only when all experts are."""
    total = 0.0
    for op in _model_ops(model, None, 1, None, None, True):
        if op.kind == "experts":
            total += op.count * (op.num_experts if experts_per_token is None else experts_per_token) * op.params
        elif op.kind == "gemm" and not (op.name == "router" and experts_per_token is not None):
            total += op.count * op.params
    return int(round(total))


def total_params(model: Model) -> int:
    """All parameters held in memory (MTP modules excluded; a tied LM head counted once)."""
    n = _streamed_params(model, None) + _norm_params(model) + embedding_params(model)
    return n - embedding_params(model) if model.tie_word_embeddings else n


def active_params(model: Model) -> int:
    """Parameters one token touches: its routed experts, shared weights, the layers' norms and the
    LM head (input embedding, final norm and router excluded)."""
    n = _streamed_params(model, model.moe.num_experts_per_tok if model.moe is not None else None)
    return n + model.num_hidden_layers * 2 * model.hidden_size


def model_ops(model: Model, weight_dtype: str | None = None, tp: int = 1, layers: float | None = None,
              lm_head_vocab: int | None = None, include_lm_head: bool = True) -> list[Op]:
    """The op list of `model` (optionally a subset of `layers` layers, or another LM-head vocab)."""
    return list(_model_ops(model, weight_dtype, tp, layers, lm_head_vocab, include_lm_head))


@lru_cache(maxsize=512)
def _model_ops(model: Model, weight_dtype: str | None, tp: int, layers: float | None,
               lm_head_vocab: int | None, include_lm_head: bool) -> tuple[Op, ...]:
    wd = weight_dtype or model.weight_dtype
    dd = _linear_dtype(wd, "dense")
    h, nq, nkv, hd = model.hidden_size, model.num_attention_heads, model.num_key_value_heads, model.hd
    kv = kv_elements_per_token_layer(model)
    n_layers = float(model.num_hidden_layers if layers is None else layers)
    frac = n_layers / model.num_hidden_layers
    ops: list[Op] = []
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        # Down-projections are replicated on every rank (vLLM ReplicatedLinear); up/out are sharded.
        down = (h * m.q_lora_rank if m.q_lora_rank else 0) + h * (m.kv_lora_rank + m.qk_rope_head_dim)
        up = (m.q_lora_rank * nq * qk if m.q_lora_rank else h * nq * qk) + m.kv_lora_rank * nq * (
            m.qk_nope_head_dim + m.v_head_dim)
        ops += [
            Op("qkv_proj", "gemm", n_layers, params=down, dtype=dd, sharded=False, in_features=h,
               out_features=m.kv_lora_rank + m.qk_rope_head_dim + (m.q_lora_rank or 0)),
            Op("qkv_proj", "gemm", n_layers, params=up, dtype=dd, in_features=m.kv_lora_rank,
               out_features=nq * qk),
            # Weight-absorbed MLA attends in the latent space: QK over (latent + rope), PV over latent.
            Op("attention", "attention", n_layers, kv_elems=kv,
               kv_sharded=False, heads=nq, score_dim=2 * m.kv_lora_rank + m.qk_rope_head_dim),
            Op("o_proj", "gemm", n_layers, params=nq * m.v_head_dim * h, dtype=dd, in_features=nq * m.v_head_dim,
               out_features=h),
        ]
    else:
        bias = (nq + 2 * nkv) * hd if model.attention_bias else 0
        ops.append(Op("qkv_proj", "gemm", n_layers, params=h * (nq + 2 * nkv) * hd + bias, dtype=dd,
                      in_features=h, out_features=(nq + 2 * nkv) * hd))
        sw = model.sliding_window
        n_sliding = 0.0 if sw is None else sw.num_layers * frac
        if n_layers - n_sliding > 0:
            ops.append(Op("attention", "attention", n_layers - n_sliding, kv_elems=kv, kv_heads=nkv,
                          heads=nq, score_dim=2 * hd))
        if n_sliding > 0:
            ops.append(Op("attention", "attention", n_sliding, kv_elems=kv, kv_heads=nkv, heads=nq,
                          score_dim=2 * hd, window=float(sw.size)))  # type: ignore[union-attr]
        ops.append(Op("o_proj", "gemm", n_layers, params=nq * hd * h, dtype=dd, in_features=nq * hd, out_features=h))
    dense_layers = model.num_dense_layers * frac
    moe_layers = n_layers - dense_layers
    if dense_layers > 0:
        ops.append(Op("mlp", "gemm", dense_layers, params=mlp_params(h, model.intermediate_size), dtype=dd,
                      in_features=h, out_features=h + 2 * model.intermediate_size))
    if model.moe is not None and moe_layers > 0:
        mo = model.moe
        ops.append(Op("router", "gemm", moe_layers, params=h * mo.num_experts, dtype="bf16", sharded=False,
                      in_features=h, out_features=mo.num_experts))
        ops.append(Op("experts", "experts", moe_layers, params=mlp_params(h, mo.moe_intermediate_size),
                      dtype=_linear_dtype(wd, "experts"), num_experts=mo.num_experts, top_k=mo.num_experts_per_tok,
                      in_features=h, out_features=h + 2 * mo.moe_intermediate_size))
        if mo.num_shared_experts:
            width = mo.shared_expert_intermediate_size or mo.moe_intermediate_size
            shared = mo.num_shared_experts * mlp_params(h, width)
            ops.append(Op("shared_experts", "gemm", moe_layers, params=shared, dtype=dd,
                          in_features=h, out_features=h))
    if include_lm_head:
        vocab = lm_head_vocab or model.vocab_size
        # The LM head stays in bf16 in quantised checkpoints (vLLM leaves lm_head unquantised).
        ops.append(Op("lm_head", "gemm", 1, params=vocab * h, dtype="bf16", in_features=h, out_features=vocab))
    if tp > 1:
        ops.append(Op("allreduce", "allreduce", 2 * n_layers, width=h))
    return tuple(ops)


def kv_share(op: Op, tp: int) -> float:
    """Share of an attention op's KV cache one GPU holds: GQA heads split over the ranks and
    replicated when fewer than tp; MLA's latent cache whole on every rank."""
    if op.kv_sharded and op.kv_heads:
        return max(op.kv_heads / tp, 1.0) / op.kv_heads
    return 1.0 / tp if op.kv_sharded else 1.0


def expected_distinct_experts(tokens, num_experts, top_k) -> np.ndarray:
    """Expected distinct experts that `tokens` tokens touch, each routing uniformly to top_k of E."""
    miss = 1.0 - top_k / num_experts
    return num_experts * (1.0 - np.power(miss, tokens))


def balanced_distinct_experts(tokens, num_experts, top_k) -> np.ndarray:
    """Distinct experts that `tokens` tokens touch when routing is balanced (each token's top_k
    choices spread evenly, as kernel benchmarks route them): every choice a new expert until all
    are busy, min(E, tokens x top_k). Uniform random routing touches fewer at small token counts
    (expected_distinct_experts: collisions)."""
    return np.minimum(np.asarray(num_experts, float), np.asarray(tokens, float) * top_k)


def mla_prefill_per_token(model, tp: int, kv_bytes: float, act_bytes: float) -> tuple[float, float]:
    """(bytes, FLOPs) per KV token and layer of MLA's prefill path over a cached context (a verify request
    where the attention backend takes one query token per request): the latent cache gathered and
    dequantised into a workspace, written and read back; kv_b_proj's up-projection to every local head's
    no-rope key and value (2 x rank x heads x (nope + v) FLOPs); the no-rope keys read and joined with their
    rope part; the attention reading the keys and values (vllm/v1/attention/backends/mla/common.py
    _compute_prefill_context, 0.14.1)."""
    mla, heads = model.mla, model.num_attention_heads / tp
    nope, rope, v, a = mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim, act_bytes
    nbytes = (mla.kv_lora_rank + rope) * (kv_bytes + 2.0 * a) + heads * a * (4.0 * nope + 2.0 * v + 2.0 * rope)
    return nbytes, 2.0 * mla.kv_lora_rank * heads * (nope + v)
