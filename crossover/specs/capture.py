"""The CUDA graphs an engine captures on one deployment: the largest graph where the engine sizes it
from the GPU's memory and its tensor-parallel size (SGLang's cuda_graph_max_bs), or where the user set
it (`--cuda-graph-max`: vLLM's --max-cudagraph-capture-size, SGLang's --cuda-graph-max-bs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from .engine import EngineProfile
    from .hardware import Hardware

GIB = 2.0**30
# The TP size from which SGLang picks its larger default (server_args.py _handle_gpu_memory_settings)
LARGE_TP = 4


def default_capture_limit(engine: "EngineProfile", hardware: "Hardware", gpus: int) -> int:
    """The capture limit the engine picks for itself on this GPU at this TP size: the first row of its
    profile's graph_capture_by_memory whose memory bound (GiB) lies above the GPU's, the row's value
    below LARGE_TP GPUs or at and above it; the profile's graph_capture_limit where it has no rows."""
    rows = engine.graph_capture_by_memory
    if not rows:
        return engine.graph_capture_limit
    gib = hardware.memory_gb * 1e9 / GIB
    for bound, small, large in rows:
        if gib < bound:
            return int(small if gpus < LARGE_TP else large)
    return engine.graph_capture_limit


def on_gpu(engine: "EngineProfile", hardware: "Hardware", gpus: int) -> "EngineProfile":
    """The engine as it captures graphs on this GPU: its own default limit for this memory and TP size,
    unless the user set the limit (settings["cuda_graph_max"]) or graphs are off."""
    if not engine.graph_capture_by_memory or engine.graph_capture_limit == 0 or "cuda_graph_max" in engine.settings:
        return engine
    limit = default_capture_limit(engine, hardware, gpus)
    return engine if limit == engine.graph_capture_limit else engine.model_copy(update={"graph_capture_limit": limit})


# vLLM V0's captured batch sizes end at 8 x 1024 (0.6.3.post1 worker/model_runner.py _BATCH_SIZES_TO_CAPTURE)
V0_LARGEST_GRAPH = 8192


def v1_sizes(largest: int, query_len: int, rule: str = "vllm-0.14.1") -> list[int]:
    """The token counts vLLM V1 captures up to `largest`: 1, 2, 4 and multiples of 8 (vllm 0.10.1.1
    config/__init__.py _set_cudagraph_sizes), multiples of 16 from 256 on in 0.14.1 (config/vllm.py
    _set_cudagraph_sizes), where a speculating server rounds each up to a multiple of its query length
    1 + k and drops those above `largest` (config/compilation.py adjust_cudagraph_sizes_for_spec_decode,
    which keeps 1 + k itself where nothing else is left; 0.10.1.1 does not round)."""
    sizes = [s for s in (1, 2, 4) if s <= largest]
    if rule == "vllm-0.10.1":
        return sizes + list(range(8, largest + 1, 8))
    sizes += list(range(8, min(largest + 1, 256), 8)) + list(range(256, largest + 1, 16))
    if query_len > 1:
        sizes = sorted({r for r in (-(-s // query_len) * query_len for s in sizes) if r <= largest})
        sizes = sizes or ([query_len] if query_len <= largest else [])
    return sizes


def for_server(engine: "EngineProfile", max_num_seqs: int, max_num_batched_tokens: int, k: int) -> "EngineProfile":
    """The engine as a server with these scheduler limits and k draft tokens (0: no speculation) captures
    graphs, where its limit follows them (EngineProfile.graph_capture_follows, the version read):

    - vllm-0.6.3 (V0, 0.6.3.post1 worker/model_runner.py): max_batchsize_to_capture =
      _get_max_graph_batch_size(max_num_seqs), the running-sequence limit padded to 1, 2, 4 or a multiple
      of 8, at most 8192; with batch expansion a speculating step's k + 1 sequences per request count.
      The user's --cuda-graph-max stands as given.
    - vllm-0.10.1 (0.10.1.1 config/scheduler.py): unless given (--cuda-graph-sizes), cuda_graph_sizes =
      [min(max_num_seqs x 2, 512)] tokens, captured at 1, 2, 4 and multiples of 8 up to it, none above
      max_num_batched_tokens (config/__init__.py _set_cudagraph_sizes).
    - vllm-0.14.1 (config/vllm.py _set_cudagraph_sizes): unless given, max_cudagraph_capture_size =
      min(max_num_seqs x (1 + k) x 2, 512), at most max_num_batched_tokens; the largest size it then
      captures (v1_sizes) is the limit, given or not ('Truncating max_cudagraph_capture_size'): with
      --max-num-seqs 16 the off server captures up to 32 tokens.

    Graphs off stay off."""
    rule = engine.graph_capture_follows
    if engine.graph_capture_limit == 0 or not rule:
        return engine
    given = "cuda_graph_max" in engine.settings
    if rule == "vllm-0.6.3":
        if given:
            return engine
        n = int(max_num_seqs)
        padded = n if n <= 2 else 4 if n <= 4 else -(-n // 8) * 8
        limit = min(padded, V0_LARGEST_GRAPH)
    else:
        query_len = 1 + k if rule == "vllm-0.14.1" else 1
        largest = engine.graph_capture_limit
        if not given:
            largest = min(int(max_num_seqs) * query_len * 2, largest)
        largest = min(largest, int(max_num_batched_tokens))
        sizes = v1_sizes(largest, query_len, rule)
        if not sizes and given:  # vLLM refuses to start: no size is a multiple of 1 + k within the limit
            raise InputError(f"{engine.label} captures no CUDA graph of a multiple of k + 1 = {1 + k} tokens "
                             f"within {largest} tokens: raise --cuda-graph-max or --max-num-batched-tokens, "
                             f"or run with --cuda-graphs none")
        # a token budget below k + 1 cannot run a speculating step at all: the budget itself is the limit
        limit = sizes[-1] if sizes else v1_sizes(largest, 1)[-1]
    return engine if limit == engine.graph_capture_limit else engine.model_copy(update={"graph_capture_limit": limit})


def for_servers(engine: "EngineProfile", max_num_seqs: int, max_num_batched_tokens: int, k: int,
                spec_max_num_seqs: int | None = None) -> "EngineProfile":
    """The engine of a pair of servers identical but for speculation (k draft tokens, the speculating
    one at spec_max_num_seqs where its limit differs): each server's capture limit from its own
    scheduler limits (for_server), the speculating one's as spec_graph_capture_limit where they differ."""
    off = for_server(engine, max_num_seqs, max_num_batched_tokens, 0).graph_capture_limit
    on = for_server(engine, spec_max_num_seqs or max_num_seqs, max_num_batched_tokens, k).graph_capture_limit
    if off == engine.graph_capture_limit and on == off:
        return engine
    return engine.model_copy(update={"graph_capture_limit": off, "spec_graph_capture_limit": None if on == off else on})
