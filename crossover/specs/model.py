"""Model specs (dense, GQA, MoE, MLA, sliding window) as written in models/*.yaml (HF field names)."""

from __future__ import annotations

from pydantic import Field, PositiveInt, model_validator

from .frozen import Spec


class MoE(Spec):
    """Mixture-of-experts MLP block."""

    num_experts: PositiveInt
    num_experts_per_tok: PositiveInt
    num_shared_experts: int = Field(default=0, ge=0)
    moe_intermediate_size: PositiveInt
    shared_expert_intermediate_size: PositiveInt | None = None
    first_dense_layers: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> "MoE":
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError("num_experts_per_tok must not exceed num_experts")
        return self


class MLA(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): a compressed KV cache shared by all heads."""

    q_lora_rank: PositiveInt | None = None
    kv_lora_rank: PositiveInt
    qk_nope_head_dim: PositiveInt
    qk_rope_head_dim: PositiveInt
    v_head_dim: PositiveInt


class SlidingWindow(Spec):
    """Layers that attend only to the last `size` tokens."""

    size: PositiveInt
    num_layers: int = Field(ge=0)


class Model(Spec):
    """A transformer decoder, as written in models/*.yaml."""

    name: str
    display_name: str = ""
    hf_repo: str = ""
    # Other Hugging Face ids with this exact architecture (instruct/chat fine-tunes of the base):
    # `--model` accepts them, matched exactly (case-insensitive), never by substring.
    aliases: tuple[str, ...] = ()
    hidden_size: PositiveInt
    intermediate_size: PositiveInt
    num_hidden_layers: PositiveInt
    num_attention_heads: PositiveInt
    num_key_value_heads: PositiveInt
    head_dim: PositiveInt | None = None
    vocab_size: PositiveInt
    tie_word_embeddings: bool = False
    max_position_embeddings: PositiveInt | None = None
    attention_bias: bool = False
    weight_dtype: str = "bf16"
    moe: MoE | None = None
    mla: MLA | None = None
    sliding_window: SlidingWindow | None = None
    mtp_layers: int = Field(default=0, ge=0)
    published_params_b: float | None = None
    computed_params_b: float | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    unverified: list[str] = Field(default_factory=list)
    notes: str = ""

    @model_validator(mode="after")
    def _check(self) -> "Model":
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.sliding_window and self.sliding_window.num_layers > self.num_hidden_layers:
            raise ValueError("sliding_window.num_layers exceeds num_hidden_layers")
        if self.moe and self.moe.first_dense_layers > self.num_hidden_layers:
            raise ValueError("moe.first_dense_layers exceeds num_hidden_layers")
        from ..units import DTYPE_BYTES

        if self.weight_dtype not in DTYPE_BYTES:
            raise ValueError(f"weight_dtype must be one of {', '.join(DTYPE_BYTES)}")
        return self

    @property
    def hd(self) -> int:
        """Attention head dimension (config value, else hidden / heads)."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return 0 if self.moe is None else self.num_hidden_layers - self.moe.first_dense_layers

    @property
    def num_dense_layers(self) -> int:
        """Layers whose MLP is dense."""
        return self.num_hidden_layers - self.num_moe_layers

    def kv_elements_per_token_layer(self) -> int:
        """KV-cache elements one token stores in one layer (K and V; MLA's latent + rope key)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.num_key_value_heads * self.hd

    def attention_params_per_layer(self) -> int:
        """Parameters of one attention block (projections and biases)."""
        h, nq, nkv, hd = self.hidden_size, self.num_attention_heads, self.num_key_value_heads, self.hd
        if self.mla is not None:
            m = self.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = h * m.q_lora_rank + m.q_lora_rank * nq * qk if m.q_lora_rank else h * nq * qk
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * nq * (m.qk_nope_head_dim + m.v_head_dim)
            return q + kv + nq * m.v_head_dim * h
        bias = (nq + 2 * nkv) * hd if self.attention_bias else 0
        return h * (nq + 2 * nkv) * hd + nq * hd * h + bias

    def dense_mlp_params(self) -> int:
        """Parameters of one dense gated (SwiGLU) MLP."""
        return 3 * self.hidden_size * self.intermediate_size

    def expert_params(self) -> int:
        """Parameters of one routed expert."""
        assert self.moe is not None
        return 3 * self.hidden_size * self.moe.moe_intermediate_size

    def shared_expert_params(self) -> int:
        """Parameters of all shared experts of one MoE layer."""
        assert self.moe is not None
        width = self.moe.shared_expert_intermediate_size or self.moe.moe_intermediate_size
        return self.moe.num_shared_experts * 3 * self.hidden_size * width

    def embedding_params(self) -> int:
        """Parameters of the input embedding."""
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        """Parameters of the output head (counted even when tied: it is read every step)."""
        return self.vocab_size * self.hidden_size

    def total_params(self) -> int:
        """All parameters held in memory (MTP modules excluded)."""
        n = self.num_hidden_layers * (self.attention_params_per_layer() + 2 * self.hidden_size)
        n += self.num_dense_layers * self.dense_mlp_params()
        if self.moe is not None:
            per_layer = self.moe.num_experts * self.expert_params() + self.shared_expert_params()
            per_layer += self.hidden_size * self.moe.num_experts  # router
            n += self.num_moe_layers * per_layer
        n += self.embedding_params() + self.hidden_size
        if not self.tie_word_embeddings:
            n += self.lm_head_params()
        return n

    def active_params(self) -> int:
        """Parameters one token touches (input embedding excluded, LM head included)."""
        n = self.num_hidden_layers * (self.attention_params_per_layer() + 2 * self.hidden_size)
        n += self.num_dense_layers * self.dense_mlp_params()
        if self.moe is not None:
            per_layer = self.moe.num_experts_per_tok * self.expert_params() + self.shared_expert_params()
            n += self.num_moe_layers * per_layer
        return n + self.lm_head_params()
