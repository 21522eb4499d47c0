"""Issue 12 item 16: every method's emitted engine config uses the engines' documented field names
and values (/work/shared/docs/engine_facts.md and the engines' docs), and `--method eagle` (an
EAGLE-1 head) never gets TensorRT-LLM's Eagle3 type, which loads EAGLE-3 heads only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crossover.model.scenario import Scenario
from crossover.analysis.engine_config import engine_configs
from crossover.analysis.policy import best_k_policy
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.speculation import METHODS, Speculation
from crossover.model.acceptance import Acceptance

FACTS = Path("/work/shared/docs/engine_facts.md")

# Documented names. In engine_facts.md: vLLM num_speculative_tokens(_per_batch_size), method values
# (2.3, 2.6: "draft_model", eagle3); TensorRT-LLM decoding_type values (4.1), max_draft_len,
# draft_len_schedule (4.4); SGLang --speculative-algorithm values EAGLE/EAGLE3/STANDALONE/NGRAM and
# --speculative-num-steps/-eagle-topk/-num-draft-tokens (3.1). Beyond it (engines' own docs):
# vLLM SpeculativeConfig.model and draft_tensor_parallel_size, TensorRT-LLM speculative_model,
# SGLang NEXTN and --speculative-draft-model-path.
VLLM_FIELDS = {"method", "num_speculative_tokens", "num_speculative_tokens_per_batch_size", "model",
               "draft_tensor_parallel_size"}
VLLM_METHODS = {"draft_model", "eagle", "eagle3", "medusa", "ngram", "mtp"}
TRT_FIELDS = {"decoding_type", "max_draft_len", "draft_len_schedule", "speculative_model"}
TRT_TYPES = {"MTP", "Eagle3", "NGram", "DraftTarget", "PARD", "DFlash", "SA", "UserProvided", "DSpark"}
SGL_FLAGS = {"--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
             "--speculative-num-draft-tokens", "--speculative-draft-model-path",
             "--speculative-ngram-max-bfs-breadth"}  # sglang >= 0.5.5 server_args.py
SGL_ALGOS = {"EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NEXTN"}
IN_FACTS = ["num_speculative_tokens", "num_speculative_tokens_per_batch_size", "draft_model", "eagle3",
            "max_draft_len", "draft_len_schedule", "decoding_type", "MTP", "Eagle3", "NGram", "DraftTarget",
            "EAGLE v1/v2 checkpoints are incompatible", "STANDALONE", "EAGLE3", "NGRAM",
            "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
            "--speculative-algorithm"]


def _configs(method: str) -> dict:
    model = "deepseek-v3" if method == "mtp" else "llama-3.1-8b"
    dep = Deployment(model=load_model(model), hardware=load_hardware("h200" if method == "mtp" else "h100-sxm"),
                     tp=8 if method == "mtp" else 1, weight_dtype="fp8" if method == "mtp" else None)
    draft = load_model("llama-3.2-1b") if method == "draft" else None
    spec = Speculation(method, 3, Acceptance.rate(0.7), draft=draft)
    pol = best_k_policy(Scenario(dep, spec, 1024.0), 64, 4)
    return engine_configs(pol, "org/draft" if method in ("draft", "eagle", "eagle3") else None)


@pytest.mark.parametrize("method", METHODS)
def test_every_emitted_field_and_value_is_documented(method):
    cfg = _configs(method)
    vllm = cfg["vllm"]["speculative_config"]
    assert set(vllm) <= VLLM_FIELDS and vllm["method"] in VLLM_METHODS
    trt = cfg["tensorrt_llm"]["speculative_config"]
    if trt is not None:
        assert set(trt) <= TRT_FIELDS and trt["decoding_type"] in TRT_TYPES
        assert trt["max_draft_len"] >= 1
    else:
        assert cfg["tensorrt_llm"]["notes"]
    flags = cfg["sglang"]["flags"]
    if flags is not None:
        names = re.findall(r"(--[a-z-]+)", flags)
        assert set(names) <= SGL_FLAGS, names
        algo = re.search(r"--speculative-algorithm (\S+)", flags).group(1)
        assert algo in SGL_ALGOS


def test_sglang_ngram_is_told_the_verify_width_that_was_priced():
    """SGLang's NGRAM verifies --speculative-num-draft-tokens positions per request, 12 (its max match
    window) when unset, as a BFS tree of breadth up to 10 (server_args.py, 0.5.3-0.5.23): the emitted
    flags set k + 1 as a chain (breadth 1), the width the model priced."""
    cfg = _configs("ngram")
    flags = cfg["sglang"]["flags"]
    k = int(re.search(r"--speculative-num-draft-tokens (\d+)", flags).group(1)) - 1
    assert k >= 1 and "--speculative-ngram-max-bfs-breadth 1" in flags
    assert "--speculative-num-steps" not in flags and "--speculative-eagle-topk" not in flags
    # NGRAM and --speculative-ngram-max-bfs-breadth are first in 0.5.3 (tests/data/engine_args.yaml)
    assert any("12" in n and ">= 0.5.3" in n for n in cfg["sglang"]["notes"])


def test_eagle1_gets_no_eagle3_config_in_tensorrt_llm():
    cfg = _configs("eagle")
    trt = cfg["tensorrt_llm"]
    assert trt["speculative_config"] is None
    assert "Eagle3" not in str(trt["speculative_config"]) and "EAGLE-1" in trt["notes"][0]
    assert _configs("eagle3")["tensorrt_llm"]["speculative_config"]["decoding_type"] == "Eagle3"
    # vLLM and SGLang keep their own EAGLE-1 names
    assert cfg["vllm"]["speculative_config"]["method"] == "eagle"
    assert "--speculative-algorithm EAGLE " in cfg["sglang"]["flags"] + " "


@pytest.mark.skipif(not FACTS.exists(), reason="engine_facts.md not in this checkout")
def test_the_documented_names_are_in_engine_facts():
    text = FACTS.read_text(encoding="utf-8")
    missing = [name for name in IN_FACTS if name not in text]
    assert not missing, missing
