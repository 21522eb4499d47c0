"""The engines' launch flags that crossover/measurements/server_args.py reads, by argparse dest, with the
keyword each becomes (tests check each against the released sources)."""

from __future__ import annotations

KEYWORDS = ("model", "engine", "method", "k", "draft", "tp", "draft_tp", "weight_dtype", "kv_dtype", "cuda_graphs",
            "chunked_prefill", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "expert_parallel", "data_parallel",
            "cuda_graph_max", "async_scheduling")
HEAD_METHODS = ("eagle", "eagle3", "medusa", "mtp", "ngram")  # no separate draft model: no `draft` keyword
ASYNC_LOG = r"Asynchronous scheduling is (enabled|disabled)"  # vLLM 0.14.1 config/vllm.py: the setting resolved
EXPECTED = "a vLLM or SGLang command line, a --speculative-config JSON object or a server startup log"

# The flags read, by argparse dest (tests check each against the released sources): name -> (keyword, type).
VLLM_DIRECT = {"model": ("model", str), "model_tag": ("model", str), "tensor_parallel_size": ("tp", int),
               "num_speculative_tokens": ("k", int), "speculative_draft_tensor_parallel_size": ("draft_tp", int),
               "gpu_memory_utilization": ("gpu_memory_utilization", float), "max_num_seqs": ("max_num_seqs", int),
               "max_num_batched_tokens": ("max_num_batched_tokens", int),
               "max_cudagraph_capture_size": ("cuda_graph_max", int), "async_scheduling": ("async_scheduling", bool),
               "enable_chunked_prefill": ("chunked_prefill", bool), "chunked_prefill_enabled": ("chunked_prefill", bool)}
VLLM_FLAGS = (*VLLM_DIRECT, "speculative_config", "speculative_model", "enforce_eager", "compilation_config",
              "optimization_level", "kv_cache_dtype", "quantization", "dtype", "enable_expert_parallel",
              "data_parallel_size", "cudagraph_capture_sizes")
SGLANG_DIRECT = {"model_path": ("model", str), "tp_size": ("tp", int), "max_running_requests": ("max_num_seqs", int),
                 "mem_fraction_static": ("gpu_memory_utilization", float), "cuda_graph_max_bs": ("cuda_graph_max", int)}
SGLANG_FLAGS = (*SGLANG_DIRECT, *"""speculative_algorithm speculative_draft_model_path speculative_num_steps
    speculative_eagle_topk speculative_num_draft_tokens disable_cuda_graph disable_decode_cuda_graph cuda_graph_backend_decode
    cuda_graph_bs chunked_prefill_size max_prefill_tokens kv_cache_dtype quantization dtype ep_size dp_size
    enable_dp_attention disable_overlap_schedule""".split())
ALIASES = {"vllm": {"q": "quantization", "tp": "tensor_parallel_size", "sc": "speculative_config", "cc": "compilation_config",
                    "dp": "data_parallel_size", "ep": "enable_expert_parallel"},
           "sglang": {"tp": "tp_size", "tensor_parallel_size": "tp_size", "model": "model_path",
                      "speculative_draft_model": "speculative_draft_model_path", "data_parallel_size": "dp_size",
                      "expert_parallel_size": "ep_size", "ep": "ep_size"}}
BOOL_FLAGS = set("enforce_eager enable_chunked_prefill disable_cuda_graph disable_decode_cuda_graph trust_remote_code "
                 "enable_prefix_caching disable_log_requests disable_log_stats enable_auto_tool_choice disable_radix_cache "
                 "enable_torch_compile enable_piecewise_cuda_graph use_v2_block_manager enable_dp_attention "
                 "enable_expert_parallel async_scheduling disable_overlap_schedule".split())
VLLM_METHODS = {"draft_model": "draft", "eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "ngram": "ngram",
                "mtp": "mtp"}  # and every *_mtp (deepseek_mtp, qwen3_next_mtp, ...)
SGLANG_METHODS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "STANDALONE": "draft", "NGRAM": "ngram"}
# Quantization methods of one weight width (gptq, bitsandbytes, gguf, compressed-tensors... not: the checkpoint's)
QUANTIZATION = {**dict.fromkeys(("fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "modelopt_fp8", "w8a8_fp8"), "fp8"),
                "awq": "int4", "awq_marlin": "int4", "modelopt_fp4": "fp4", "mxfp4": "mxfp4", "w8a8_int8": "int8"}
DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16", "float32": "fp32"}
KV_DTYPES = {**dict.fromkeys(("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"), "fp8"), **DTYPES}
GRAPH_MODES = {"NONE": "none", "PIECEWISE": "piecewise", "FULL": "full", "FULL_DECODE_ONLY": "full",
               "FULL_AND_PIECEWISE": "full", 0: "none", 1: "piecewise", 2: "full"}  # (decode, mixed): decode's
SGLANG_UNMAPPED = {"cuda_graph_bs": ("cuda_graph_max", "the captured sizes: give their largest as --cuda-graph-max"),
                   "max_prefill_tokens": ("max_num_batched_tokens", "SGLang's prefill budget, not a cap on a step's tokens")}
SGLANG_BACKENDS = {"full": "full", "breakable": "piecewise", "disabled": "none"}
# SGLang's --dp-size without --enable-dp-attention (0.5.5 server_args.py): replicas behind its data-parallel
# router, each with its own running batch and the load split between them. Not modelled: said.
DATA_PARALLEL = ("{n} data-parallel replicas behind SGLang's router, each with its own running batch: not modelled; "
                 "the scenario prices one engine of --tp GPUs at the sweep's whole load")
O_LEVEL = "-O1/-O2: a compilation level without CUDA graphs up to vLLM 0.11, piecewise/full graphs from 0.12"
