"""Model specs (dense, GQA, MoE, MLA, sliding window) as written in models/*.yaml (HF field names)."""

from __future__ import annotations

from pydantic import Field, PositiveInt, model_validator

from ..units import DTYPE_BYTES
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

