"""The CUDA graphs an engine captures on one deployment: the largest graph where the engine sizes it
from the GPU's memory and its tensor-parallel size (SGLang's cuda_graph_max_bs), or where the user set
it (`--cuda-graph-max`: vLLM's --max-cudagraph-capture-size, SGLang's --cuda-graph-max-bs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def for_seats(engine: "EngineProfile", max_num_seqs: int) -> "EngineProfile":
    """The engine as a server with this running-sequence limit captures graphs, where the limit follows it
    (graph_capture_by_seqs; vLLM V0 0.6.3.post1 worker/model_runner.py: max_batchsize_to_capture =
    _get_max_graph_batch_size(max_num_seqs), the limit padded to 1, 2, 4 or a multiple of 8, at most
    8192). With batch expansion a speculating step's k + 1 sequences per request count against it."""
    if not engine.graph_capture_by_seqs or engine.graph_capture_limit == 0 or "cuda_graph_max" in engine.settings:
        return engine
    n = int(max_num_seqs)
    padded = n if n <= 2 else 4 if n <= 4 else -(-n // 8) * 8
    limit = min(padded, V0_LARGEST_GRAPH)
    return engine if limit == engine.graph_capture_limit else engine.model_copy(update={"graph_capture_limit": limit})
