"""Speculation methods: what each drafts (its op list, passes and verify width), draft trees, and
the tokens a step yields (with acceptance.py). The step model (step.py) prices the passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Literal

import numpy as np

from . import memory
from .acceptance import Acceptance
from ..errors import CrossoverError
from .ops import Op, model_ops
from .roofline import CompiledOps, compile_ops
from ..specs.deployment import Deployment
from ..specs.model import Model

Method = Literal["draft", "eagle", "eagle3", "medusa", "ngram", "mtp"]
# Draft tokens per step: vLLM V1 verifies at most MAX_SPEC_LEN = 32 per request (0.14.1
# v1/sample/rejection_sampler.py); engines use a handful. The tree depth limit too; every verb takes this one.
MAX_K = 32

METHODS: tuple[str, ...] = ("draft", "eagle", "eagle3", "medusa", "ngram", "mtp")


# EAGLE-1's default draft tree: `mc_sim_7b_63` in SafeAILab/EAGLE (eagle/model/choices.py), 25
# nodes over 5 depths (4, 8, 8, 3, 2 per depth).
EAGLE1_TREE_PATHS: tuple[tuple[int, ...], ...] = (
    (0,), (1,), (2,), (3,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (0, 0, 0), (0, 0, 1),
    (0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (1, 0, 0), (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2),
    (0, 0, 0, 0, 0), (0, 0, 0, 0, 1))
TREE_PRESETS: dict[str, tuple[tuple[int, ...], ...]] = {"eagle1": EAGLE1_TREE_PATHS}


def _check_paths(paths) -> tuple[int, ...]:
    """Nodes per depth of a tree given as rank paths; one-line errors for a malformed tree."""
    if not paths:
        raise CrossoverError("a tree needs at least one node")
    seen = set()
    for path in paths:
        if (not isinstance(path, tuple) or not path
                or any(not isinstance(r, (int, np.integer)) or isinstance(r, bool) or r < 0 for r in path)):
            raise CrossoverError(
                f"tree node {path!r}: write it as the ranks (integers >= 0) of its tokens, e.g. (0, 1)")
        if path in seen:
            raise CrossoverError(f"tree node {list(path)} appears twice")
        seen.add(path)
    for path in paths:
        if len(path) > 1 and path[:-1] not in seen:
            raise CrossoverError(f"tree node {list(path)} has no parent {list(path[:-1])} in the tree")
    depth = max(len(p) for p in paths)
    return tuple(sum(1 for p in paths if len(p) == d) for d in range(1, depth + 1))


def parse_tree(text: str) -> tuple[tuple[int, ...] | None, tuple[tuple[int, ...], ...] | None]:
    """(nodes per depth, node paths) from '3x4' (depth 3, 4 nodes per depth), '4,4,2' (nodes per
    depth), a preset name ('eagle1') or node paths as JSON ('[[0],[1],[0,0]]')."""
    t = text.strip().lower()
    if t in TREE_PRESETS:
        return None, TREE_PRESETS[t]
    if t.startswith("["):
        try:
            raw = json.loads(t)
            paths = tuple(tuple(int(r) for r in node) for node in raw)
            if any(not isinstance(node, list) or any(isinstance(r, bool) or not isinstance(r, int) for r in node)
                   for node in raw):
                raise ValueError
        except (ValueError, TypeError, RecursionError):
            raise CrossoverError(
                f"tree {text!r}: node paths are a JSON list of rank lists, e.g. [[0],[1],[0,0]]") from None
        widths = _check_paths(paths)
        if len(widths) > MAX_K:
            raise CrossoverError(f"tree {text!r}: depth 1..{MAX_K}")
        return None, paths
    try:
        if "x" in t:
            depth, branch = (int(x) for x in t.split("x", 1))
            widths = (branch,) * depth
        else:
            widths = tuple(int(x) for x in t.split(",") if x.strip())
    except ValueError:
        raise CrossoverError(f"tree {text!r}: write DEPTHxBRANCHING (e.g. 3x4), nodes per depth (e.g. 4,4,2), "
                             f"node paths (e.g. [[0],[1],[0,0]]) or a preset ({', '.join(TREE_PRESETS)})") from None
    if not widths or any(w < 1 for w in widths) or len(widths) > MAX_K:
        raise CrossoverError(f"tree {text!r}: depth 1..{MAX_K} and at least one node per depth")
    return widths, None


def _path_arrays(paths: tuple[tuple[int, ...], ...], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(ranks per node and depth, -1 past the node's depth; each node's depth index)."""
    ranks = np.full((len(paths), k), -1, dtype=float)
    for i, path in enumerate(paths):
        ranks[i, :len(path)] = path
    return ranks, np.array([len(p) - 1 for p in paths])


# ------------------------------------------------------------------------------------ methods

@dataclass(frozen=True)
class Speculation:
    """A speculation method with its window k and acceptance."""

    method: Method
    k: int
    acceptance: Acceptance
    draft: Model | None = None  # method 'draft': the separate draft model
    draft_tp: int | None = None  # None = the target's TP
    draft_vocab: int = 32000  # eagle3's reduced draft vocabulary (EAGLE-3 / SpecForge configs)
    # KV budget of the draft (StreamingLLM / SnapKV self-speculation as in MagicDec): the draft
    # attends to at most this many cached tokens. None = the full context.
    draft_kv_budget: int | None = None
    # Draft tree: nodes verified at each depth, e.g. (4, 4, 2). None = a chain. A chain is the tree
    # of width 1 at every depth, with equal results. Widths alone place every node of a depth under
    # the accepted path (the best case: an upper bound on tau); `tree_paths` gives the real shape.
    tree: tuple[int, ...] | None = None
    # The tree node by node: each node is the ranks of its tokens among the draft's candidates at
    # each depth, e.g. (0, 1) = the second candidate under the top first-depth candidate. Must be
    # closed under prefixes. Sets `tree` (nodes per depth).
    tree_paths: tuple[tuple[int, ...], ...] | None = None
    # n-gram only: the engine pads a sequence without a match to k placeholder drafts (SGLang,
    # TensorRT-LLM), so every sequence verifies k+1 positions; False: it verifies its bonus position
    # only (vLLM). A Scenario sets it from its engine profile (`ngram_miss`).
    pad_misses: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise CrossoverError(f"unknown method {self.method!r}; expected one of {', '.join(METHODS)}")
        if not isinstance(self.k, (int, np.integer)) or not 1 <= self.k <= MAX_K:
            raise CrossoverError(f"k must be an integer in 1..{MAX_K} (got {self.k!r}); engines draft a few tokens per step")
        if self.method == "draft" and self.draft is None:
            raise CrossoverError("method 'draft' needs a draft model (--draft NAME, e.g. llama-3.2-1b)")
        if self.draft_kv_budget is not None and self.draft_kv_budget < 1:
            raise CrossoverError(f"draft KV budget must be >= 1 token (got {self.draft_kv_budget})")
        if self.method != "draft" and self.draft is not None:
            raise CrossoverError(f"--draft applies to method 'draft' only (method is {self.method!r})")
        if self.tree_paths is not None:
            widths = _check_paths(self.tree_paths)
            if self.tree is not None and tuple(self.tree) != widths:
                raise CrossoverError(f"tree widths {tuple(self.tree)} disagree with the tree's paths ({widths} nodes "
                                     f"per depth)")
            object.__setattr__(self, "tree", widths)
        if self.tree is not None:
            if not self.tree or any((not isinstance(w, (int, np.integer))) or w < 1 for w in self.tree):
                raise CrossoverError(f"tree widths must be integers >= 1 per depth (got {self.tree!r})")
            if len(self.tree) != self.k:
                raise CrossoverError(f"a tree of depth {len(self.tree)} needs k = {len(self.tree)} (got k = {self.k})")
            if self.method == "ngram":
                raise CrossoverError("n-gram proposals are a single chain; --tree applies to draft, eagle, eagle3, "
                                     "medusa and mtp")
        if self.acceptance.match_rate < 1.0 and self.method != "ngram":
            raise CrossoverError("a match rate applies to method 'ngram' only")
        self.acceptance.survival(self.k)  # validate k against per-position rates now

    @cached_property
    def survival(self) -> np.ndarray:
        """P(the accepted path reaches depth j), j = 1..k; for a tree, any of the w_j alternatives
        under the accepted path may match: per-depth acceptance 1 - (1 - a_j)^w_j, with a_j the
        chain's conditional rate at depth j (alternatives assumed as likely as the first choice: an
        upper bound that lower-ranked candidates do not quite reach). Found once (read-only)."""
        out = self._survival()
        out.flags.writeable = False
        return out

    def _survival(self) -> np.ndarray:
        s = np.array(self.acceptance.survival(self.k), float)
        if self.tree is None:
            return s
        cond = self.acceptance.conditional(self.k)
        if self.tree_paths is not None:
            # The draft's rank of the target's token at depth j is geometric: rank r with
            # probability a_j (1 - a_j)^r (a chain, which offers only rank 0, keeps a_j). Exactly
            # one path can be right at each depth, so P(reach depth d) sums over its nodes.
            ranks, depth = _path_arrays(self.tree_paths, self.k)
            p = np.where(ranks >= 0, cond * np.power(1.0 - cond, np.maximum(ranks, 0)), 1.0)
            return np.bincount(depth, weights=p.prod(axis=1), minlength=self.k)
        per_depth = 1.0 - np.power(1.0 - cond, np.asarray(self.tree, float))
        return np.cumprod(per_depth)

    @cached_property
    def tau(self) -> float:
        """Expected tokens per step per sequence (bonus included)."""
        return 1.0 + self.acceptance.match_rate * float(self.survival.sum())

    @property
    def verify_width(self) -> float:
        """Mean positions verified per sequence: k+1 (1 + all tree nodes), or 1 + match_rate k for n-gram
        (k+1 where the engine pads the drafts of sequences without a match)."""
        if self.tree is not None:
            return 1.0 + float(sum(self.tree))
        if self.pad_misses:
            return 1.0 + self.k
        return 1.0 + self.acceptance.match_rate * self.k

    @property
    def draft_pass_widths(self) -> tuple[int, ...]:
        """Positions per sequence each sequential draft forward processes (a tree pass expands the
        previous depth's nodes); empty for n-gram."""
        n = self.draft_forwards
        if n == 0:
            return ()
        if self.tree is None or self.method == "medusa":
            return (1,) * n
        return (1, *self.tree[:-1])

    def draft_deployment(self, target: Deployment) -> Deployment:
        """The deployment the draft forwards run on: a draft model's own, or the target's for a head
        (EAGLE, MTP, Medusa) at its own draft TP when one is set (vLLM's draft_tensor_parallel_size: 1
        or the target's, vllm/config/speculative.py _verify_and_get_draft_tp, 0.14.1)."""
        if self.method == "draft":
            assert self.draft is not None
            return Deployment(model=self.draft, hardware=target.hardware, tp=self.draft_tp or target.tp,
                              kv_dtype=target.kv_dtype, efficiency=target.efficiency)
        if self.draft_tp is not None and self.draft_tp != target.tp and self.method != "ngram":
            return target.model_copy(update={"tp": int(self.draft_tp)})
        return target

    def draft_ops(self, target: Deployment) -> list[Op]:
        """Ops of ONE draft forward (per sequential draft step; Medusa's one pass covers all k), sharded
        over the draft's TP (the target's unless a draft TP is set)."""
        m, tp = target.model, self.draft_deployment(target).tp
        h = m.hidden_size
        if self.method == "draft":
            d = self.draft_deployment(target)
            return model_ops(d.model, d.wdtype, d.tp)
        if self.method in ("eagle", "eagle3"):
            # One decoder layer of the target's shape; fc fuses [embedding, hidden] (EAGLE: 2h -> h).
            layer = model_ops(_dense_layer(m), "bf16", tp, layers=1, include_lm_head=False)
            if self.method == "eagle":
                fc = Op("draft_fc", "gemm", 1, params=2 * h * h, in_features=2 * h, out_features=h)
                head = Op("draft_lm_head", "gemm", 1, params=m.vocab_size * h, in_features=h, out_features=m.vocab_size)
            else:
                # EAGLE-3: fc fuses three target layers (3h -> h) and q/k/v take 2h inputs; its own
                # LM head over a reduced draft vocabulary.
                fc = Op("draft_fc", "gemm", 1, params=3 * h * h + h * (m.num_attention_heads + 2 * m.num_key_value_heads)
                        * m.hd, in_features=3 * h, out_features=h)
                head = Op("draft_lm_head", "gemm", 1, params=self.draft_vocab * h, in_features=h,
                          out_features=self.draft_vocab)
            return [*layer, fc, head]
        if self.method == "medusa":
            # k heads in one pass: each a ResBlock (h x h) and its own LM head (h x vocab).
            return [Op("medusa_resblocks", "gemm", self.k, params=h * h, in_features=h, out_features=h),
                    Op("medusa_heads", "gemm", self.k, params=m.vocab_size * h, in_features=h, out_features=m.vocab_size)]
        if self.method == "mtp":
            if m.mtp_layers < 1:
                raise CrossoverError(
                    f"model {m.name!r} has no MTP module (mtp_layers is 0); use --method eagle, eagle3 or draft")
            # DeepSeek-V3 MTP: eh_proj (2h -> h), one full target layer, the shared LM head.
            layer = model_ops(m, target.wdtype, tp, layers=1, include_lm_head=True)
            if m.moe is not None and m.moe.first_dense_layers:
                layer = [op for op in layer if op.name != "mlp"]  # the MTP layer is an MoE layer
            return [Op("mtp_eh_proj", "gemm", 1, params=2 * h * h, in_features=2 * h, out_features=h), *layer]
        return []  # ngram: proposals come from the context, no forward

    @property
    def draft_reads_prompts(self) -> bool:
        """Whether the draft keeps its own per-sequence state (KV cache or hidden states) and so
        processes every prompt too: draft models, EAGLE heads and MTP layers; not n-gram (no
        forward) or Medusa (heads on the target's last hidden state)."""
        return self.method not in ("ngram", "medusa")

    @property
    def draft_forwards(self) -> int:
        """Sequential draft forwards per speculative step."""
        return {"medusa": 1, "ngram": 0}.get(self.method, self.k)

    def with_k(self, k: int) -> "Speculation":
        """The same method and acceptance at window k. A mean accepted length (tau) describes one k, so
        it becomes the i.i.d. rate that reproduces it; per-position rates must cover k."""
        acc = self.acceptance
        if acc.kind == "tau":
            acc = acc.as_rate(self.k)
        if self.tree is not None:
            raise CrossoverError("a best-k schedule applies to chains; give --k-max without --tree")
        return replace(self, k=k, acceptance=acc)


    def memory(self, target: Deployment, held: float) -> tuple[float, float]:
        """(weights per GPU, KV bytes per sequence per GPU) the method adds when each sequence holds
        `held` tokens (plus the k + 1 positions a verify step writes)."""
        length = held + self.k + 1
        draft_length = length if self.draft_kv_budget is None else min(held, self.draft_kv_budget) + self.k + 1
        if self.method == "draft":
            d = self.draft_deployment(target)
            ops = model_ops(d.model, d.wdtype, d.tp)
            # The draft is sharded over its own TP; its share per target GPU assumes draft_tp <= tp.
            scale = d.tp / target.tp
            # self-speculation drafts with the target's own weights: only its (budgeted) KV cache is extra
            shared = d.model == target.model and d.tp == target.tp
            return (0.0 if shared else memory.weight_bytes_per_gpu(d, ops) * scale,
                    memory.kv_bytes_per_seq_per_gpu(d, ops, draft_length) * scale)
        ops = self.draft_ops(target)
        if not ops:
            return 0.0, 0.0
        # EAGLE and MTP drafts share the target's LM head; each other op is held at its own dtype
        # (an fp8 model's MTP layer is fp8, EAGLE heads are bf16)
        own = [op for op in ops if not (op.name in ("draft_lm_head", "lm_head") and self.method in ("eagle", "mtp"))]
        # at a draft TP of 1 the head sits whole on one GPU: the fullest GPU holds all of it
        d = self.draft_deployment(target)
        return memory.op_weight_bytes(own, d.tp, d.gpus), memory.kv_bytes_per_seq_per_gpu(d, ops, draft_length)

    @cached_property
    def drafter(self) -> "Speculation":
        """What the draft forward depends on, with everything else at a neutral value (the key its
        compiled op list is memoised under): acceptance and trees change no draft op, and k only
        Medusa's heads."""
        return replace(self, k=self.k if self.method == "medusa" else 1, acceptance=_NEUTRAL, tree=None,
                       tree_paths=None, draft_kv_budget=None)


_NEUTRAL = Acceptance.rate(0.5)


def compiled_draft(spec: Speculation, target: Deployment) -> CompiledOps | None:
    """The compiled op list of one draft forward (None for n-gram: no forward)."""
    return _compiled_draft(spec.drafter, target)


@lru_cache(maxsize=256)
def _compiled_draft(spec: Speculation, target: Deployment) -> CompiledOps | None:
    if spec.draft_forwards == 0:
        return None
    ops = spec.draft_ops(target)
    layers = None if spec.method == "draft" else sum(op.count for op in ops if op.kind == "attention")
    return compile_ops(spec.draft_deployment(target), ops, num_layers=layers)


@lru_cache(maxsize=128)
def _dense_layer(m: Model) -> Model:
    """The EAGLE head's decoder layer: the target's attention shape with a dense MLP of its width."""
    return m.model_copy(update={"moe": None, "mla": None, "sliding_window": None, "num_hidden_layers": 1,
                                "intermediate_size": m.intermediate_size})
