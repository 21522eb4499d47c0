"""Turn a Hugging Face config.json into a model spec, offline."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import CrossoverError
from ..files import read_text, too_deep
from .loader import parse_spec
from .model import Model

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _get(cfg: dict, *keys: str, default=None):
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return default


def _need(cfg: dict, origin: str, what: str, *keys: str):
    """The first of `keys` the config sets; a one-line error naming them when it sets none
    (a guessed width or routing would silently change every cost)."""
    value = _get(cfg, *keys)
    if value is None:
        names = " or ".join(repr(k) for k in keys)
        raise CrossoverError(f"{origin}: missing {names} ({what}); add it to the config or write the spec by hand")
    return value


def config_to_spec(cfg: dict, name: str, origin: str = "config.json") -> dict:
    """A models/*.yaml mapping from a parsed HF config (text_config of multimodal configs used)."""
    if isinstance(cfg.get("text_config"), dict):
        # Multimodal configs nest the language model; quantisation and dtype stay at the top.
        top = {k: v for k, v in cfg.items() if k in ("architectures", "quantization_config", "torch_dtype", "dtype")}
        cfg = {**top, **cfg["text_config"]}
    required = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    for key in required:
        if key not in cfg:
            raise CrossoverError(f"{origin}: missing required key {key!r}; is this a decoder LLM config.json?")
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] <= 0:
            raise CrossoverError(f"{origin}: {key} must be a positive integer (got {cfg[key]!r})")
    spec: dict = {
        "name": name,
        "display_name": name,
        "hf_repo": cfg.get("_name_or_path", ""),
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": _need(cfg, origin, "the MLP width", "intermediate_size", "ffn_dim"),
        "num_hidden_layers": cfg["num_hidden_layers"],
        "num_attention_heads": cfg["num_attention_heads"],
        "num_key_value_heads": _get(cfg, "num_key_value_heads", default=cfg["num_attention_heads"]),
        "head_dim": _get(cfg, "head_dim", default=cfg["hidden_size"] // cfg["num_attention_heads"]),
        "vocab_size": cfg["vocab_size"],
        "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "attention_bias": bool(_get(cfg, "attention_bias", "qkv_bias", default=cfg.get("model_type") == "qwen2")),
    }
    if cfg.get("max_position_embeddings"):
        spec["max_position_embeddings"] = cfg["max_position_embeddings"]
    quant = cfg.get("quantization_config") or {}
    if not isinstance(quant, dict):
        raise CrossoverError(f"{origin}: quantization_config must be a JSON object (or absent), got {quant!r}"[:300])
    qmethod = str(quant.get("quant_method", "")).lower()
    if "fp8" in qmethod or (qmethod == "compressed-tensors" and "fp8" in json.dumps(quant).lower()):
        spec["weight_dtype"] = "fp8"
    elif qmethod == "mxfp4":
        spec["weight_dtype"] = "mxfp4"
    elif qmethod in ("gptq", "awq") and quant.get("bits") == 4:
        spec["weight_dtype"] = "int4"
    else:
        spec["weight_dtype"] = _DTYPES.get(str(cfg.get("torch_dtype", cfg.get("dtype", "bfloat16"))), "bf16")

    n_experts = _get(cfg, "n_routed_experts", "num_local_experts", "num_experts")
    if n_experts:
        first_dense = _get(cfg, "first_k_dense_replace", default=0)
        if cfg.get("mlp_only_layers"):
            first_dense = len(cfg["mlp_only_layers"])
        spec["moe"] = {
            "num_experts": n_experts,
            "num_experts_per_tok": _need(cfg, origin, "experts routed per token", "num_experts_per_tok", "moe_topk"),
            "num_shared_experts": _get(cfg, "n_shared_experts", "num_shared_experts", default=0),
            "moe_intermediate_size": _get(cfg, "moe_intermediate_size", default=spec["intermediate_size"]),
            "first_dense_layers": first_dense,
        }
        if cfg.get("shared_expert_intermediate_size"):
            spec["moe"]["shared_expert_intermediate_size"] = cfg["shared_expert_intermediate_size"]
            spec["moe"]["num_shared_experts"] = max(1, spec["moe"]["num_shared_experts"])
    if cfg.get("kv_lora_rank"):
        spec["mla"] = {
            "q_lora_rank": cfg.get("q_lora_rank"),
            "kv_lora_rank": cfg["kv_lora_rank"],
            "qk_nope_head_dim": cfg["qk_nope_head_dim"],
            "qk_rope_head_dim": cfg["qk_rope_head_dim"],
            "v_head_dim": cfg["v_head_dim"],
        }
        spec["head_dim"] = cfg["v_head_dim"]
    layer_types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if window and (cfg.get("use_sliding_window", True) is not False):
        n_sliding = (
            sum(1 for t in layer_types if "sliding" in str(t)) if isinstance(layer_types, list)
            else cfg["num_hidden_layers"]
        )
        if n_sliding and not (isinstance(window, float) and math.isinf(window)):
            spec["sliding_window"] = {"size": int(window), "num_layers": n_sliding}
    if cfg.get("num_nextn_predict_layers"):
        spec["mtp_layers"] = cfg["num_nextn_predict_layers"]
    spec["sources"] = {"shape": f"imported offline from {origin}"}
    parse_spec(spec, Model, origin)  # fail now, with the config's name, rather than on first use
    return spec


def import_config(path: str | Path, name: str | None = None) -> dict:
    """Read a config.json file and return the spec mapping (the input file is only read)."""
    p = Path(path).expanduser()
    text = read_text(p, "a Hugging Face config.json")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CrossoverError(f"{p}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise too_deep(p, "a Hugging Face config.json") from None
    if not isinstance(cfg, dict):
        raise CrossoverError(f"{p}: expected a JSON object")
    default = p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return config_to_spec(cfg, (name or default).lower(), str(p))
