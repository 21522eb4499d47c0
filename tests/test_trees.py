"""The likeliest draft tree of n nodes and the best tree size by load."""

from __future__ import annotations

import json
import itertools

import numpy as np

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from crossover.model.scenario import Scenario
from crossover.errors import CrossoverError
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.speculation import EAGLE1_TREE_PATHS, Speculation
from crossover.model.acceptance import Acceptance
from crossover.analysis.trees import best_tree_paths, best_tree_policy, branching
from crossover.model.graphs import eager_steps


def test_likeliest_paths_by_hand():
    # a = 0.6: (0,) 0.6, (0,0) 0.36, (1,) 0.24, (0,0,0) 0.216, (0,1) = (1,0) 0.144, (0,0,0,0) 0.1296
    a = Acceptance.rate(0.6)
    assert best_tree_paths(a, 2, 5) == ((0,), (0, 0))
    assert best_tree_paths(a, 6, 5) == ((0,), (0, 0), (1,), (0, 0, 0), (0, 1), (1, 0))
    assert best_tree_paths(a, 3, 1) == ((0,), (1,), (2,))  # depth 1: the top-3 candidates
    # a likely draft grows a chain first
    assert best_tree_paths(Acceptance.rate(0.9), 3, 5) == ((0,), (0, 0), (0, 0, 0))


def test_equal_probability_ties_follow_the_rule_whatever_the_last_bit():
    """Paths equal in real arithmetic are ordered by the documented rule (the shallower, then the lower
    rank) even when the per-depth rates differ in their last bit, as numpy's SIMD pow and libm make
    0.7**4 / 0.7**3 differ (the golden that failed on AVX-512 machines)."""
    import math

    chain = [0.7, 0.7 * 0.7, 0.7 * 0.7 * 0.7, 0.7 * 0.7 * 0.7 * 0.7]  # i.i.d. 0.7 as per-position survival
    powers = [0.7 ** (j + 1) for j in range(4)]
    nudged = [math.nextafter(x, 1.0 if j % 2 else 0.0) for j, x in enumerate(chain)]
    want = ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0), (1,), (0, 1), (1, 0), (0, 0, 1), (0, 1, 0))
    for rates in (chain, powers, nudged):
        # 0.7, 0.49, 0.343, 0.2401, then (1,) 0.21; (0, 1) = (1, 0) 0.147; (0, 0, 1) = (0, 1, 0) = (1, 0, 0) 0.1029
        assert best_tree_paths(Acceptance.per_position(rates), 9, 4) == want, rates
    trees = {best_tree_paths(Acceptance.per_position(r), 40, 4) for r in (chain, powers, nudged)}
    assert len(trees) == 1 and trees == {best_tree_paths(Acceptance.rate(0.7), 40, 4)}


def test_the_likeliest_tree_beats_eagle1s_fixed_tree_of_the_same_size():
    acc = Acceptance.rate(0.65)
    best = Speculation("eagle", 5, acc, tree_paths=best_tree_paths(acc, 25, 5))
    fixed = Speculation("eagle", 5, acc, tree_paths=EAGLE1_TREE_PATHS)
    assert best.tau >= fixed.tau
    assert branching(EAGLE1_TREE_PATHS) == 4 and branching(((0,), (0, 0))) == 1


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.95), st.integers(1, 12), st.integers(1, 4))
def test_likeliest_tree_is_a_tree_and_optimal_among_small_trees(a, n, depth):
    acc = Acceptance.rate(a)
    paths = best_tree_paths(acc, n, depth)
    assert len(set(paths)) == n and all(len(p) <= depth for p in paths)
    assert all(p[:-1] in paths for p in paths if len(p) > 1)  # closed under prefixes
    tau = Speculation("eagle", max(map(len, paths)), acc, tree_paths=paths).tau
    if n <= 5 and depth <= 3:  # brute force: every prefix-closed set of n nodes with ranks < 3
        nodes = [p for d in range(1, depth + 1) for p in itertools.product(range(3), repeat=d)]
        for cand in itertools.combinations(nodes, n):
            if all(p[:-1] in cand for p in cand if len(p) > 1):
                other = Speculation("eagle", max(map(len, cand)), acc, tree_paths=cand).tau
                assert tau >= other - 1e-12
    if n > 1:
        smaller = best_tree_paths(acc, n - 1, depth)
        assert Speculation("eagle", max(map(len, smaller)), acc, tree_paths=smaller).tau <= tau + 1e-12


def test_tree_size_falls_with_load():
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    plan = best_tree_policy(Scenario(dep, Speculation("eagle3", 6, Acceptance.rate(0.7)), 1024), 512, 24)
    sched = plan.schedule()
    nodes = [r["nodes"] for r in sched]
    assert nodes[0] == 24 and nodes[-1] < 8
    # the tree shrinks as the batch grows, except where the smaller tree's verify step has just left
    # vLLM's 512-token CUDA graph (batch x (nodes + 1) tokens): a larger one can win again there
    engine = dep.engine.speculating
    for a, b in zip(sched, sched[1:]):
        if b["nodes"] > a["nodes"]:
            tokens = np.array([b["batch_min"] * (a["nodes"] + 1.0)])
            assert a["nodes"] > 0 and eager_steps(tokens, np.array([float(b["batch_min"])]), engine, True) is not None, sched
    assert plan.sizes[0] == 0 and plan.tau[0] == 1.0  # size 0 is speculation off
    assert sched[0]["batch_min"] == 1 and sched[-1]["batch_max"] == 512


def test_tree_policy_errors():
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    with pytest.raises(CrossoverError, match="single chain"):
        best_tree_policy(Scenario(dep, Speculation("ngram", 3, Acceptance.rate(0.7)), 1024), 64, 8)
    with pytest.raises(CrossoverError, match="1..256"):
        best_tree_policy(Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7)), 1024), 64, 0)


def test_policy_cli_sizes_trees_by_load():
    r = run_cli("policy", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--method", "eagle3",
                "--acceptance", "0.7", "--k-max", "5", "--tree-nodes", "12", "--batch-max", "128", "--json")
    assert r.returncode == 0, r.stderr
    trees = json.loads(r.stdout)["trees"]
    assert trees["max_nodes"] == 12 and trees["max_depth"] == 5
    first = trees["schedule"][0]
    assert first["batch_min"] == 1 and first["nodes"] == len(first["paths"]) == 12
    assert first["tokens_per_s"] >= first["best_chain_tokens_per_s"]
    text = run_cli("policy", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--method", "eagle3",
                   "--k-max", "4", "--tree-nodes", "6", "--batch-max", "64").stdout
    assert "draft trees by load" in text and "speculative-num-draft-tokens" in text


def test_a_measured_tau_with_a_tree_is_the_trees_tau():
    """`--tau` with `--tree` is the tree's measured mean accepted length: the scenario keeps it (it
    was re-expanded over the tree: tau 2.56 became ~4), from the per-token rate that gives it; a tau
    the tree cannot reach is one line."""
    import warnings

    import crossover
    from crossover.errors import CrossoverError

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        sc = crossover.scenario(model="llama-3.1-8b", method="eagle", tree="3x4", tau=2.56)
    assert abs(sc.speculation.tau - 2.56) < 1e-9 and sc.speculation.acceptance.kind == "rate"
    assert any("measured mean accepted length" in str(w.message) for w in said)
    rate = sc.speculation.acceptance.value
    same = crossover.scenario(model="llama-3.1-8b", method="eagle", tree="3x4", acceptance=rate)
    assert abs(same.speculation.tau - 2.56) < 1e-9
    with pytest.raises(CrossoverError, match="outside what this tree can accept"):
        crossover.scenario(model="llama-3.1-8b", method="eagle", tree="3x4", tau=4.5)
