"""Which CUDA graph an engine step replays: its graph key (what the engine's graphs are keyed by), the
captured size it pads to (EngineProfile.capture_sizes), where it runs eagerly beyond the capture limit,
and the host time of attention outside a full graph; for `StepModel.price` and the breakdown."""

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
    ratio = np.where((key > 0) & (key <= engine.capture_limit(speculating)), padded / np.where(key > 0, key, 1.0), 1.0)
    return ratio if (ratio > 1.0).any() else None


def replayed(tokens, verifying, engine, speculating: bool) -> dict:
    """One step's graph in words' terms (the first element): its key and unit, the captured size it
    replays (None: it runs eagerly, beyond the capture limit or with graphs off), the limit, whether
    the engine's profile lists its captured sizes (else no padding is priced), and the share of such
    verify steps that miss a full graph (EngineProfile.spec_graph_miss; 0 for a plain step)."""
    key = float(np.ravel(graph_key(tokens, np.asarray(verifying, float), engine))[0])
    limit = engine.capture_limit(speculating)
    size = None if limit == 0 or key > limit else float(engine.padded_key(np.array([key]), speculating)[0])
    miss = engine.graph_miss(speculating) if size is not None else 0.0
    return {"key": key, "unit": engine.graph_capture_unit, "replayed": size, "limit": float(limit),
            "sizes_listed": engine.captured(speculating) is not None, "miss": float(miss)}


def limit_batch(engine, speculating: bool, width: float) -> float | None:
    """The batch beyond which a uniform step of `width` positions a request (its verify width; 1 for a
    plain decode) outgrows the (speculating) server's largest CUDA graph: where its graph key
    (graph_key: tokens, expanded sequences, or requests) passes capture_limit. None: no graph."""
    limit = engine.capture_limit(speculating)
    if limit == 0:
        return None
    return float(limit) if engine.graph_capture_unit == "requests" else limit / float(width)


def eager_steps(tokens, verifying: np.ndarray, engine, speculating: bool) -> np.ndarray | None:
    """Where the target forward runs outside a captured CUDA graph (None: nowhere): its graph key
    beyond the (speculating) server's largest graph, everywhere where it captures none."""
    limit = engine.capture_limit(speculating)
    if limit == 0:
        return np.True_
    over = graph_key(tokens, verifying, engine) > limit
    return over if over.any() else None


def ragged_host(mix, engine, per_seq: float, tokens, speculating: bool) -> np.ndarray | float:
    """Host time of a step whose attention runs outside a full CUDA graph, `per_seq` per sequence: a
    ragged step's, 0 for uniform steps where the engine replays those as full graphs (every step's
    where it never does: EngineProfile.full_graphs). It holds beyond the graph capture limit too: a
    uniform step whose key (its `tokens`; a mean step's uniform share: its decodes, Mix.decode_tokens)
    exceeds the (speculating) server's largest graph replays none and runs its attention as a
    PIECEWISE step does, with the same per-sequence metadata (its launch floor is a separate cost).
    A speculating server's uniform verify steps inside the limit miss a full graph in the share
    EngineProfile.spec_graph_miss of them (vLLM V1: its capture sizes rounded to multiples of 1 + k)."""
    if per_seq == 0.0:
        return 0.0
    # share of the steps whose attention runs outside the graph
    if engine.full_graphs:
        miss = engine.graph_miss(speculating)
        if miss:  # the verify steps only: the elements where sequences verify
            miss = miss * (np.asarray(mix.verifying, float) > 0)
        ragged = 1.0 - np.asarray(mix.uniform, float) * (1.0 - miss)
    else:
        ragged = np.float64(1.0)
    key = tokens if mix.decode_tokens is None else mix.decode_tokens
    eager = eager_steps(key, np.asarray(mix.verifying, float), engine, speculating)
    if eager is not None:
        ragged = np.where(eager, 1.0, ragged)
    if not ragged.any():
        return 0.0
    seqs = np.asarray(mix.target.tokens if mix.sequences is None else mix.sequences, float)
    return ragged * seqs * per_seq


def per_arm(drafting, on, off, neutral):
    """Both servers priced in one array, each element its own server's value: `on` where sequences
    verify (`drafting`), `off` elsewhere; None (the server has no such term) reads as `neutral`, and
    None comes back where neither has one."""
    if on is None and off is None:
        return None
    return np.where(drafting, neutral if on is None else on, neutral if off is None else off)
