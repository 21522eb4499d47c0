"""The speculation a scenario drafts with, from plain values: the acceptance model from the first
source given (an explicit rate, tau or per-position rates, a calibration, the workload, the default),
the method with its k, draft and tree, and a measured tau given with a tree. `crossover.scenario`
(build.py) and the verbs that build their own deployments (plan) call these."""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Sequence

from ..defaults import DEFAULT_ACCEPTANCE, DEFAULT_DRAFT_VOCAB, DEFAULT_K, DEFAULT_METHOD, DEFAULT_NGRAM_MATCH_RATE
from ..errors import CrossoverError

if TYPE_CHECKING:
    from ..model.acceptance import Acceptance
    from ..model.speculation import Speculation
    from ..specs import Model
    from ..specs.workload import Workload


def _tree(tree) -> tuple[tuple[int, ...] | None, tuple[tuple[int, ...], ...] | None]:
    """(nodes per depth, node paths) from a preset or text (see speculation.parse_tree), a list of
    widths or a list of rank paths."""
    if tree is None:
        return None, None
    if isinstance(tree, str):
        from ..model.speculation import parse_tree

        return parse_tree(tree)
    items = list(tree)
    if items and all(isinstance(x, (list, tuple)) for x in items):
        return None, tuple(tuple(int(r) for r in node) for node in items)
    return tuple(int(w) for w in items), None


def _not_a_percentage(value: float, what: str, flag: str) -> None:
    """A one-line error for a rate written as a percentage (70 for 0.70) or not a finite number."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise CrossoverError(f"{what} ({flag}) must be a number in [0, 1) (got {value!r})") from None
    if not math.isfinite(v):
        raise CrossoverError(f"{what} ({flag}) must be a finite number in [0, 1) (got {value!r})")
    if 1 < v <= 100:
        raise CrossoverError(f"{what} {v:g} ({flag}) is a fraction in [0, 1), not a percentage: "
                             f"did you mean {v / 100:.2f}?")


def acceptance_of(*, acceptance: float | None = None, tau: float | None = None,
                  per_position: Sequence[float] | None = None, match_rate: float | None = None,
                  method: str = DEFAULT_METHOD, calibrated: float | None = None,
                  workload: Workload | None = None) -> Acceptance:
    """The acceptance model, from the first source given: an explicit rate, tau or per-position
    rates; a calibrated rate; the workload's measured acceptance; else the default rate."""
    from ..model.acceptance import Acceptance

    if sum(x is not None for x in (acceptance, tau, per_position)) > 1:
        raise CrossoverError("give one of acceptance, tau and per-position acceptance")
    if acceptance is not None:
        _not_a_percentage(acceptance, "acceptance", "--acceptance")
    for a in per_position or ():
        _not_a_percentage(a, "per-position acceptance", "--acceptance-per-position")
    if match_rate is not None:
        _not_a_percentage(match_rate, "match rate", "--match-rate")
    from dataclasses import replace

    wa = workload.acceptance if workload is not None else None
    match_origin = "given"
    if match_rate is None:
        if method != "ngram":
            match_rate, match_origin = 1.0, "method"  # every step drafts: no assumption
        elif wa is not None and wa.ngram_match_rate is not None:
            match_rate, match_origin = wa.ngram_match_rate, "workload"
        else:
            match_rate, match_origin = DEFAULT_NGRAM_MATCH_RATE, "default"
    if tau is not None:
        acc, origin = Acceptance.mean_length(tau, match_rate), "given"
    elif per_position is not None:
        acc, origin = Acceptance.per_position(per_position, match_rate), "given"
    elif acceptance is not None:
        acc, origin = Acceptance.rate(acceptance, match_rate), "given"
    elif calibrated is not None:
        acc, origin = Acceptance.rate(calibrated, match_rate), "calibration"
    elif wa is not None and wa.tau is not None:
        acc, origin = Acceptance.mean_length(wa.tau, match_rate), "workload"
    elif wa is not None and wa.per_position is not None:
        acc, origin = Acceptance.per_position(wa.per_position, match_rate), "workload"
    elif wa is not None and wa.rate is not None:
        acc, origin = Acceptance.rate(wa.rate, match_rate), "workload"
    else:
        acc, origin = Acceptance.rate(DEFAULT_ACCEPTANCE, match_rate), "default"
    return replace(acc, origin=origin, match_origin=match_origin)


def speculation(target: Model, *, method: str = DEFAULT_METHOD, k: int | None = None, tree=None,
                draft: str | Model | None = None, draft_tp: int | None = None,
                draft_vocab: int = DEFAULT_DRAFT_VOCAB, draft_kv_budget: int | None = None,
                acceptance: Acceptance, allow_vocab_mismatch: bool = False) -> Speculation:
    """A speculation method for `target`: k (default 3, or the tree's depth), the draft (`"self"`:
    the target drafts for itself), the tree and the acceptance. A separate draft must share the
    target's vocabulary (unless `allow_vocab_mismatch`); one larger than the target is a warning."""
    from ..model.speculation import Speculation
    from ..specs import load_model

    widths, paths = _tree(tree)
    depth = len(widths) if widths is not None else (max(len(p) for p in paths) if paths else None)
    if k is not None and (isinstance(k, bool) or int(k) != k or k < 1):
        raise CrossoverError(f"k must be an integer >= 1 (got {k}); speculation off is the baseline itself")
    if depth is not None:
        if k is not None and int(k) != depth:
            raise CrossoverError(f"k = {k} (--k) disagrees with the tree's depth {depth}; drop k")
        k = depth
    k = DEFAULT_K if k is None else int(k)
    draft_model = target if draft == "self" else (load_model(draft) if draft is not None else None)  # name or spec
    if draft_model is not None and draft_model is not target and method == "draft":
        _check_draft(target, draft_model, allow_vocab_mismatch)
    if acceptance.kind == "tau" and (widths is not None or paths is not None):
        acceptance = _tree_rate(method, k, acceptance, widths, paths)
    spec = Speculation(method, k, acceptance, draft=draft_model, draft_tp=draft_tp, draft_vocab=draft_vocab,  # type: ignore[arg-type]
                       tree=widths, tree_paths=paths, draft_kv_budget=draft_kv_budget)
    if acceptance.kind == "tau" and spec.tau > k + 1:
        raise CrossoverError(f"tau {acceptance.value:g} exceeds k+1 = {k + 1}")
    return spec


def _tree_rate(method: str, k: int, acceptance: Acceptance, widths, paths) -> Acceptance:
    """A measured tau with a draft tree: engines report the tree's own mean accepted length, so the
    per-token rate is the one that gives this tree that tau (bisection: a tree's tau rises with the
    rate), not the chain's rate re-expanded over the tree (tau 2.56 became 4.84)."""
    from ..model.acceptance import Acceptance
    from ..model.speculation import Speculation

    def tree_tau(rate: float) -> float:
        return Speculation(method, k, Acceptance.rate(rate, acceptance.match_rate), tree=widths, tree_paths=paths).tau

    tau = float(acceptance.value)
    top = tree_tau(1.0 - 1e-9)
    if not 1.0 <= tau <= top:
        raise CrossoverError(f"tau {tau:g} is outside what this tree can accept: 1 to {top:.3g} tokens per step "
                             f"(its depth {k} plus the bonus token, at any per-token rate)")
    lo, hi = 0.0, 1.0 - 1e-9
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tree_tau(mid) < tau else (lo, mid)
    rate = (lo + hi) / 2
    warnings.warn(f"tau {tau:g} with a draft tree: the tree's measured mean accepted length, from a per-token "
                  f"acceptance rate of {rate:.3f} over this tree (give --acceptance to set the rate itself)",
                  UserWarning, stacklevel=4)
    return Acceptance.rate(rate, acceptance.match_rate)


def _check_draft(target: Model, draft: Model, allow_vocab_mismatch: bool) -> None:
    """A separate draft proposes token ids the target verifies: vLLM, SGLang and TensorRT-LLM map
    them one to one, so the vocabularies must match. A draft with more parameters than the target
    costs more per token than it saves."""
    from ..model.ops import total_params

    if draft.vocab_size != target.vocab_size and not allow_vocab_mismatch:
        raise CrossoverError(
            f"draft {draft.name} (vocabulary {draft.vocab_size}) does not share the vocabulary of target "
            f"{target.name} ({target.vocab_size}): engines verify draft token ids as target ids; choose a draft "
            f"of the same tokenizer, or allow it (allow_vocab_mismatch, --allow-vocab-mismatch)")
    d, t = total_params(draft), total_params(target)
    if d > t:
        warnings.warn(f"draft {draft.name} ({d / 1e9:.1f}B parameters) is larger than target {target.name} "
                      f"({t / 1e9:.1f}B): drafting will cost more than it saves", UserWarning, stacklevel=3)
