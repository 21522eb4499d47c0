"""The work of one forward pass (`Forward`: positions, KV tokens read, query-key pairs, sampled
positions), of one engine step (`Mix`: the target's forward, the drafts' and who verifies) and the
builders for a uniform batch, whole prompts and a ragged batch: what `StepModel.price` (step.py) prices."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .roofline import CompiledOps


@dataclass(frozen=True)
class Forward:
    """The work of one forward pass: `tokens` new positions, logits at `sampled` of them (None: all),
    and the attention sums per distinct window of the compiled ops (window axis first): KV tokens read and
    query-key pairs scored. Integer `tokens` select the tabulated evaluation (same numbers)."""

    tokens: np.ndarray
    kv: np.ndarray
    qk: np.ndarray
    sampled: np.ndarray | None = None
    # KV tokens (per window) that the verifying sequences would read on top of `kv` if each of
    # their positions were scored as its own single-query sequence (vLLM V0's batch expansion).
    expansion: np.ndarray | float = 0.0
    # KV tokens (per window) the verifying sequences hold: what MLA's prefill path up-projects for them
    # (EngineProfile.mla_verify_prefill).
    verify_kv: np.ndarray | float = 0.0

    def __add__(self, other: "Forward") -> "Forward":
        """Two groups of sequences in one forward."""
        s1 = self.tokens if self.sampled is None else self.sampled
        s2 = other.tokens if other.sampled is None else other.sampled
        return Forward(self.tokens + other.tokens, self.kv + other.kv, self.qk + other.qk, s1 + s2,
                       self.expansion + other.expansion, self.verify_kv + other.verify_kv)

    def scaled(self, f) -> "Forward":
        """These sums times `f` (broadcast over the window axis): a share of the sequences."""
        return Forward(np.multiply(self.tokens, f), np.multiply(self.kv, f), np.multiply(self.qk, f),
                       None if self.sampled is None else np.multiply(self.sampled, f),
                       np.multiply(self.expansion, f), np.multiply(self.verify_kv, f))

    def expanded(self) -> "Forward":
        """The same positions scored by batch expansion: position j of a verifying sequence is a
        sequence of its own over context + j tokens, so each reads the KV history (k+1 reads in all)."""
        return Forward(self.tokens, self.kv + self.expansion, self.qk, self.sampled, 0.0, self.verify_kv)


@dataclass(frozen=True)
class Mix:
    """What one engine step (or an array of them, broadcast) runs.

    target: the target forward over every decode, verify and prefill position of the step.
    verifying: sequences that verify drafts; the speculative overheads (per step and per sequence)
      and the draft passes apply where it is > 0.
    draft_passes: (number of sequential passes, one pass's forward) groups; a chain is one group of
      k passes of width 1, a tree one group per distinct width.
    draft_prefill: the draft reading this step's prompt tokens (EAGLE heads, MTP layers and draft
      models keep their own KV cache); where a draft pass runs in the same step it shares that
      pass's launch (no second per-forward overhead).
    """

    target: Forward
    verifying: np.ndarray | float = 0.0
    draft_passes: tuple[tuple[np.ndarray | float, Forward], ...] = ()
    draft_prefill: Forward | None = None
    # Whether every sequence of the step has the same query length (a 'uniform' batch: pure decode,
    # or verify at one width), which engines replay as one full CUDA graph; a ragged step (n-gram
    # misses beside matches, prompt chunks beside decodes) runs its attention outside the graph.
    # A number in [0, 1]: the share of the steps it stands for that are uniform (a mean step whose
    # prompts arrive in some steps only).
    uniform: np.ndarray | bool | float = True
    sequences: np.ndarray | float | None = None  # sequences in the step (None: one per target token)
    # The steps (a slice of the last axis) the draft passes' forwards describe, where only those draft
    # (e.g. the speculating half of an off/on pair): the others draft nothing. None: every step.
    draft_at: slice | None = None
    # The share of the steps it stands for that carry prompt tokens (0 or 1 per simulated step): on an
    # engine that captures decode steps only (EngineProfile.prefill_graphs False) those run eagerly.
    prompting: np.ndarray | float = 0.0
    # A mean step's uniform share's target tokens (its decodes and verifies, without the prompts): the
    # graph key of those steps (None: the step's own tokens).
    decode_tokens: np.ndarray | float | None = None

    def busiest_rank(self, n: int) -> "Mix":
        """The step of the busiest of `n` data-parallel ranks the sequences are balanced over
        (Deployment.data_parallel): ceil(sequences / n) of them, every sum in proportion. The ranks step
        in lockstep, each padded to the busiest one's tokens (vLLM 0.14.1 v1/worker/dp_utils.py
        coordinate_batch_across_dp, with CUDA graphs), which the MoE layers see n times."""
        seqs = np.asarray(self.target.tokens if self.sequences is None else self.sequences, float)
        f = np.where(seqs > 0, np.ceil(seqs / n - 1e-9) / np.where(seqs > 0, seqs, 1.0), 0.0)

        def part(x):
            return None if x is None else np.multiply(x, f)
        fd = f if self.draft_at is None else f[..., self.draft_at]  # the steps the passes describe
        return Mix(self.target.scaled(f), part(self.verifying), tuple((c, w.scaled(fd)) for c, w in self.draft_passes),
                   None if self.draft_prefill is None else self.draft_prefill.scaled(f), self.uniform,
                   part(self.sequences), self.draft_at, self.prompting, part(self.decode_tokens))


def joined(works: list[Forward]) -> tuple[Forward, tuple]:
    """Several forwards of one compiled op list as one evaluation: joined along the last batch axis
    (each first broadcast to their common shape where the shapes differ), so one pricing call
    returns every forward's seconds: forward g's at [..., g * n:(g + 1) * n], n the last axis of the
    returned common shape (1 for scalar forwards), reshaped to that shape."""
    fields = [(w.tokens, w.kv, w.qk, w.tokens if w.sampled is None else w.sampled) for w in works]
    shapes = [(np.shape(t), np.shape(k)[1:], np.shape(q)[1:], np.shape(s)) for t, k, q, s in fields]
    one = shapes[0][0]
    if any(x != one for sh in shapes for x in sh):  # broadcast to one shape first
        shape = np.broadcast_shapes(*(x for sh in shapes for x in sh))
        windows = max(np.shape(k)[0] for _, k, _, _ in fields)
        fields = [(np.broadcast_to(t, shape), np.broadcast_to(k, (windows,) + shape),
                   np.broadcast_to(q, (windows,) + shape), np.broadcast_to(s, shape)) for t, k, q, s in fields]
    shape = np.shape(fields[0][0])
    if not shape:  # scalars: one element each (the window axis of kv, qk kept first)
        fields = [(np.reshape(t, 1), np.reshape(k, (-1, 1)), np.reshape(q, (-1, 1)), np.reshape(s, 1))
                  for t, k, q, s in fields]
    tokens, kv, qk, sampled = (np.concatenate([f[i] for f in fields], axis=-1) for i in range(4))
    return Forward(tokens, kv, qk, sampled), shape


def uniform(ops: CompiledOps, batch, q, context) -> Forward:
    """`batch` sequences with `q` new positions each over `context` cached tokens (all broadcast).
    Scored one position per sequence, query j would read context + j + 1 tokens: the causal
    query-key sum, so the expansion is qk - kv (0 where q = 1)."""
    tokens, kv, qk = ops.uniform_sums(batch, q, context)
    return Forward(tokens, kv, qk, None, qk - kv, np.where(np.asarray(q) > 1, kv, 0.0))


def prompts(ops: CompiledOps, count, length: float, attended: float) -> Forward:
    """`count` whole prompts of `length` tokens prefilled from an empty cache, causal within each;
    each attends to at most `attended` of its tokens (a draft's KV budget), logits at the last."""
    n = np.asarray(count, float)
    w = np.asarray(ops.windows)[(slice(None),) + (None,) * n.ndim]
    return Forward(n * length, n * np.minimum(attended, w), n * length * np.minimum((attended + 1.0) / 2.0, w), n)


def ragged(ops: CompiledOps, q: np.ndarray, context: np.ndarray, tokens=None, sampled=None,
           verifying: np.ndarray | None = None) -> Forward:
    """Sequences along the last axis with `q` new positions over `context` cached tokens each (q = 0:
    the sequence sits out); `tokens` (default: q summed) as integers for the tabulated path. With a
    `verifying` mask, the batch-expansion reads of those sequences (see `uniform`) and the KV they hold
    are kept too."""
    kv, qk = ops.window_sums(q, context)
    t = q.sum(axis=-1).astype(np.int64) if tokens is None else tokens
    expansion: np.ndarray | float = 0.0
    verify_kv: np.ndarray | float = 0.0
    if verifying is not None:
        kv_v, qk_v = ops.window_sums(np.where(verifying, q, 0.0), np.where(verifying, context, 0.0))
        expansion, verify_kv = qk_v - kv_v, kv_v
    return Forward(t, kv, qk, sampled, expansion, verify_kv)
