"""Draft trees: the most likely tree of n nodes, and the best tree size at each load.

Under the geometric rank model (speculation.Speculation.survival) the chance that a node's path is
the right one is the product over its depths of a_j (1 - a_j)^r_j: a child is never likelier than
its parent, nor a lower-ranked sibling than a higher one. So the n likeliest paths form a tree (closed
under prefixes), and it is the n-node tree of highest tau; a best-first search finds it. Bigger
trees raise tau with diminishing returns while every node costs a verified position, so the best
size falls with load, as EAGLE-2's dynamic trees and SGLang's `speculative_num_draft_tokens` assume.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

import numpy as np

from ..model.scenario import Scenario
from .curves import evaluate
from ..errors import CrossoverError
from ..model.acceptance import Acceptance


def _log_prob_key(cond: np.ndarray):
    """The ordering key of a rank path: minus its log-probability, summed exactly (math.fsum) over one
    term per depth and one per rank step, each rate rounded to 12 significant digits first. Paths whose
    probabilities are equal in real arithmetic (every i.i.d. tie: the same depths and rank steps in
    another order) get bit-identical keys on every machine, so the documented tie rule decides them,
    not the last bit of a pow (numpy's SIMD pow and libm differ there: 0.7**4)."""
    rates = [float(f"{c:.12g}") for c in np.asarray(cond, float).tolist()]
    log_a = [math.log(c) if c > 0 else -math.inf for c in rates]
    log_b = [math.log(1.0 - c) if c < 1 else -math.inf for c in rates]

    def key(path: tuple[int, ...]) -> float:
        terms = [log_a[j] for j in range(len(path))] + [log_b[j] for j, r in enumerate(path) for _ in range(r)]
        return -math.fsum(terms) if -math.inf not in terms else math.inf

    return key


def best_tree_paths(acceptance: Acceptance, nodes: int, max_depth: int) -> tuple[tuple[int, ...], ...]:
    """The `nodes` likeliest rank paths of depth <= `max_depth` (ties: the shallower, then the lower rank)."""
    if nodes < 1 or max_depth < 1:
        raise CrossoverError(f"a tree needs at least one node and depth 1 (got {nodes} nodes, depth {max_depth})")
    key = _log_prob_key(acceptance.conditional(max_depth))  # rates in [0, 1]: survival never rises

    heap = [(key((0,)), 1, (0,))]
    seen = {(0,)}
    out: list[tuple[int, ...]] = []
    while heap and len(out) < nodes:
        _, _, path = heapq.heappop(heap)
        out.append(path)
        nxt = [path[:-1] + (path[-1] + 1,)]  # the next candidate at this depth
        if len(path) < max_depth:
            nxt.append(path + (0,))  # the top candidate one depth further
        for p in nxt:
            if p not in seen:
                seen.add(p)
                heapq.heappush(heap, (key(p), len(p), p))
    return tuple(out)


def branching(paths: tuple[tuple[int, ...], ...]) -> int:
    """The most children any node of the tree has (the root included): SGLang's per-step top-k."""
    counts: dict[tuple[int, ...], int] = {}
    for p in paths:
        counts[p[:-1]] = counts.get(p[:-1], 0) + 1
    return max(counts.values(), default=0)


@dataclass
class TreeSchedule:
    """Throughput of the likeliest tree of each size at every batch (size 0: speculation off), and
    the best size per batch."""

    batches: np.ndarray
    sizes: list[int]  # nodes verified besides the bonus position; 0 = speculation off
    paths: list[tuple[tuple[int, ...], ...]]
    tau: list[float]
    tput: np.ndarray  # (len(sizes), len(batches)) output tokens/s

    @property
    def best(self) -> np.ndarray:
        """Index into `sizes` of the best tree at each batch (ties: the smaller tree)."""
        return np.argmax(self.tput, axis=0)

    def schedule(self) -> list[dict[str, int]]:
        """Batch ranges sharing the best size: {batch_min, batch_max, nodes, depth, topk} (nodes 0: off)."""
        out: list[dict[str, int]] = []
        for b, i in zip(self.batches.astype(int), self.best):
            n, p = self.sizes[i], self.paths[i]
            if out and out[-1]["nodes"] == n:
                out[-1]["batch_max"] = int(b)
            else:
                out.append({"batch_min": int(b), "batch_max": int(b), "nodes": n,
                            "depth": max((len(x) for x in p), default=0), "topk": branching(p)})
        return out


def best_tree_policy(sc: Scenario, b_max: int, max_nodes: int, max_depth: int | None = None) -> TreeSchedule:
    """The likeliest tree of every size 1..max_nodes (depth <= max_depth, default the scenario's k),
    priced at every integer batch 1..b_max."""
    spec = sc.speculation
    if spec.method == "ngram":
        raise CrossoverError("n-gram proposals are a single chain; tree sizes apply to draft, eagle, eagle3, medusa "
                             "and mtp")
    if max_nodes < 1 or max_nodes > 256:
        raise CrossoverError(f"--tree-nodes must lie in 1..256 (got {max_nodes})")
    if b_max < 1:
        raise CrossoverError(f"the batch range must reach at least 1 (got {b_max})")
    depth = max_depth or spec.k
    acc = spec.acceptance
    if acc.kind == "tau":
        acc = acc.as_rate(spec.k)
    b = np.arange(1, b_max + 1, dtype=float)
    sizes: list[int] = [0]
    paths: list[tuple[tuple[int, ...], ...]] = [()]
    taus, rows = [1.0], []
    for n in range(1, max_nodes + 1):
        p = best_tree_paths(acc, n, depth)
        s = replace(spec, k=max(len(x) for x in p), acceptance=acc, tree=None, tree_paths=p)
        c = evaluate(Scenario(sc.deployment, s, sc.context, sc.prompt_len, sc.output_len), b)
        if not rows:
            rows.append(c.tokens_per_s_off)
        sizes.append(n)
        paths.append(p)
        taus.append(s.tau)
        rows.append(c.tokens_per_s_on)
    return TreeSchedule(b, sizes, paths, taus, np.vstack(rows))
