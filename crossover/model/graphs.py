"""Which CUDA graph an engine step replays: its graph key (what the engine's graphs are keyed by) and
the captured size it pads to (EngineProfile.capture_sizes), for `StepModel.price` and the breakdown."""

from __future__ import annotations

import numpy as np


def graph_key(tokens, verifying: np.ndarray, engine) -> np.ndarray:
    """A step's CUDA-graph key: its tokens (vLLM V1), its sequences after batch expansion (vLLM V0: one
    per position, so also the tokens), or its requests (SGLang, TensorRT-LLM: the verifying sequences
    of a speculative step, else one per token of a decode step)."""
    key = np.asarray(tokens, float)
    if engine.graph_capture_unit == "requests":
        key = np.where(verifying > 0, verifying, key)
    return key


def padding(tokens, verifying: np.ndarray, engine, speculating: bool) -> np.ndarray | None:
    """Rows of the replayed graph per row of the step (None: 1 everywhere): a captured step pads its key
    to the next size the engine captures, its rows growing in proportion; beyond the capture limit the
    step runs eagerly at its own size."""
    if engine.graph_capture_limit == 0 or engine.captured(speculating) is None:
        return None
    key = graph_key(tokens, verifying, engine)
    padded = engine.padded_key(key, speculating)
    ratio = np.where((key > 0) & (key <= engine.graph_capture_limit), padded / np.where(key > 0, key, 1.0), 1.0)
    return ratio if (ratio > 1.0).any() else None


def replayed(tokens, verifying, engine, speculating: bool) -> dict:
    """One step's graph in words' terms (the first element): its key and unit, the captured size it
    replays (None: it runs eagerly, beyond the capture limit or with graphs off), the limit, and whether
    the engine's profile lists its captured sizes (else no padding is priced)."""
    key = float(np.ravel(graph_key(tokens, np.asarray(verifying, float), engine))[0])
    limit = engine.graph_capture_limit
    size = None if limit == 0 or key > limit else float(engine.padded_key(np.array([key]), speculating)[0])
    return {"key": key, "unit": engine.graph_capture_unit, "replayed": size, "limit": float(limit),
            "sizes_listed": engine.captured(speculating) is not None}
