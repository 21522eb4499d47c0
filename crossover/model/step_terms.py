"""The step terms `StepModel.price` adds beside the forwards, one function each: the sampler's traffic
over the vocabulary, the n-gram proposer's lookup, MLA's prefill path for verify positions and the
engine's host work per running sequence (hidden under the GPU where the engine overlaps it).
`StepModel.price` (step.py) stays the only code that adds them into a step."""

from __future__ import annotations

import numpy as np

from .forward import Mix
from .ops import mla_prefill_per_token
from .roofline import combine


def draft_positions(mix: Mix, verifying: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """Draft positions the step verifies: its `sampled` positions beyond one per sequence (each
    sequence samples its next token; a verifying one samples each of its drafts as well)."""
    seqs = np.asarray(sampled if mix.sequences is None else mix.sequences, float)
    return np.where(verifying > 0, np.maximum(sampled - seqs, 0.0), 0.0)


def sampler_seconds(dep, sampled: np.ndarray, positions, verifying) -> np.ndarray | float:
    """The sampler's fp32 traffic over the target's vocabulary at one GPU's achieved bandwidth, on the
    requests' sampling path: each sampled position, the rejection sampler's over each verified draft
    in place of the plain sampler's, each verifying request's bonus row beyond a sampled row's."""
    per_pos, per_draft, per_bonus = dep.sampler_bytes_per_vocab, dep.verify_bytes_per_vocab, dep.bonus_bytes_per_vocab
    if not (per_pos or per_draft or per_bonus):
        return 0.0
    positions = np.asarray(positions, float)
    traffic = (sampled - positions) * per_pos + positions * per_draft + np.asarray(verifying, float) * per_bonus
    return traffic * dep.model.vocab_size / dep.bandwidth


def lookup_seconds(dep, verifying, verify_kv) -> np.ndarray | float:
    """The n-gram proposer's CPU time: per verifying sequence, and per token of the contexts it
    searches (the KV the verifying sequences hold, in the longest window)."""
    out = verifying * dep.ngram_lookup_per_seq_s
    if dep.ngram_lookup_per_token_s > 0.0:
        tokens = np.asarray(verify_kv, float)
        out = out + (tokens[-1] if tokens.ndim else tokens) * dep.ngram_lookup_per_token_s
    return out


def mla_prefill_seconds(model, verify_kv, layers: float | None = None, tp: int | None = None) -> np.ndarray | float:
    """MLA's prefill path over the KV the verifying requests hold (Deployment.mla_verify_prefill), at
    every layer of the step model's target (or `layers` at `tp`: an MTP draft's): bytes and FLOPs per
    token from ops.mla_prefill_per_token."""
    tokens = np.asarray(verify_kv, float)
    tokens = tokens[-1] if tokens.ndim else tokens  # the whole-context window (MLA layers have none)
    if not np.any(tokens):
        return 0.0
    dep = model.deployment
    nbytes, flops = mla_prefill_per_token(dep.model, dep.tp if tp is None else tp, dep.kv_bytes, dep.act_bytes)
    n = (model.target_layers if layers is None else layers) * tokens
    return combine(n * nbytes / dep.bandwidth, n * flops / dep.flops, model.target.transition, model.target.p)


def host_seconds(dep, mix: Mix, rest: np.ndarray, overlapped) -> np.ndarray | float:
    """The engine's host work of the step that the GPU waits for: per running sequence
    (EngineProfile.host_per_seq_us: scheduling, input preparation, output processing) plus per step
    (host_per_step_us), all of it where the server runs its steps one after the other, what exceeds
    the `rest` of the step where it prepares the next step while the GPU runs this one (vLLM V1's
    async scheduling, SGLang's overlap scheduler), so that such a step takes max(rest, host).
    `overlapped` (a bool, or per element) says which. A step with no sequence has none."""
    per, fixed = dep.host_per_seq_s, dep.host_per_step_s
    if per <= 0.0 and fixed <= 0.0:
        return 0.0
    seqs = np.asarray(mix.target.tokens if mix.sequences is None else mix.sequences, float)
    host = np.where(seqs > 0.0, seqs * per + fixed, 0.0)
    if overlapped is False:
        return host
    return np.where(overlapped, np.maximum(host - rest, 0.0), host)
