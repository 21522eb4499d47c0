"""Best-k schedules, engine configs, draft trees."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from crossover.model.scenario import Scenario
from crossover.analysis.curves import evaluate
from crossover.errors import CrossoverError
from crossover.analysis.engine_config import engine_configs
from crossover.analysis.policy import best_k_policy, ranges
from crossover.model.graphs import eager_steps
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.loader import load_engine
from crossover.model.acceptance import Acceptance
from crossover.model.speculation import Speculation


def scenario(hw="rtx-4090", model="llama-3.1-8b", method="eagle", alpha=0.6, k=3, ctx=512.0, tree=None):
    dep = Deployment(model=load_model(model), hardware=load_hardware(hw), tp=1)
    return Scenario(dep, Speculation(method, k, Acceptance.rate(alpha), tree=tree), ctx)


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["rtx-4090", "h100-sxm", "a100-80gb-sxm", "l40s"]), st.floats(0.3, 0.9),
       st.sampled_from(["eagle", "eagle3", "medusa"]))
def test_schedule_is_never_worse_than_any_fixed_k_and_k_never_rises(hw, alpha, method):
    sc = scenario(hw=hw, alpha=alpha, method=method)
    pol = best_k_policy(sc, 256, 6)
    for row in pol.tput:
        assert np.all(pol.best_tput >= row * (1 - 1e-12))
    # short context, dense model: the best k falls (or stays) as the batch grows, except where the
    # smaller k's verify step has just left its CUDA graph (batch x (k + 1) tokens beyond vLLM's 512):
    # then a larger k, beyond the graph at a smaller batch already, can win again
    engine = sc.deployment.engine.speculating
    for i in np.flatnonzero(np.diff(pol.best_k) > 0) + 1:
        b, k_prev = float(pol.batches[i]), int(pol.best_k[i - 1])
        assert k_prev > 0 and eager_steps(np.array([b * (k_prev + 1)]), np.array([b]), engine, True) is not None, \
            pol.schedule


def test_schedule_ranges_cover_the_batch_range():
    pol = best_k_policy(scenario(), 128, 8)
    sched = pol.schedule
    assert sched[0]["batch_min"] == 1 and sched[-1]["batch_max"] == 128
    for a, b in zip(sched, sched[1:]):
        assert b["batch_min"] == a["batch_max"] + 1 and b["k"] != a["k"]
    assert ranges(np.array([1, 2, 3, 4]), np.array([3, 3, 0, 0])) == [
        {"batch_min": 1, "batch_max": 2, "k": 3}, {"batch_min": 3, "batch_max": 4, "k": 0}]


def test_speculation_switches_off_where_it_never_pays():
    # an EAGLE-3 head: TensorRT-LLM's Eagle3 type loads it (an EAGLE-1 head gets no TensorRT-LLM config)
    pol = best_k_policy(scenario(alpha=0.35, method="eagle3"), 256, 4)
    below = pol.speculate_below_batch
    assert below is not None and 1 < below <= 256
    assert np.all(pol.best_k[below - 1:] == 0) and pol.best_k[0] > 0
    cfg = engine_configs(pol, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    vllm = cfg["vllm"]["speculative_config"]
    table = vllm["num_speculative_tokens_per_batch_size"]
    assert table[0][0] == 1 and table[-1][2] == 0 and vllm["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert all(k <= vllm["num_speculative_tokens"] for _, _, k in table)
    trt = cfg["tensorrt_llm"]["speculative_config"]
    assert max(trt["draft_len_schedule"]) == below - 1  # upper bounds; above the largest key: off
    assert f"below batch {below}" in cfg["rule"]
    assert "disable_by_batch_size" in " ".join(cfg["vllm"]["notes"])


def test_tau_acceptance_is_carried_to_other_k_as_its_rate():
    spec = Speculation("eagle", 3, Acceptance.mean_length(2.5))
    s5 = spec.with_k(5)
    assert s5.acceptance.kind == "rate"
    assert s5.acceptance.tau(3) == pytest.approx(2.5, rel=1e-6)


def test_tree_of_branching_one_equals_the_chain():
    chain = scenario(k=3)
    tree = scenario(k=3, tree=(1, 1, 1))
    b = [1, 8, 64]
    c, t = evaluate(chain, b), evaluate(tree, b)
    np.testing.assert_allclose(c.tokens_per_s_on, t.tokens_per_s_on, rtol=1e-12)
    assert tree.speculation.tau == pytest.approx(chain.speculation.tau)


def test_tree_verifies_all_nodes_and_accepts_more():
    s = Speculation("eagle", 3, Acceptance.rate(0.6), tree=(4, 4, 2))
    assert s.verify_width == 11
    assert s.draft_pass_widths == (1, 4, 4)  # one pass per depth, expanding the previous depth
    chain = Speculation("eagle", 3, Acceptance.rate(0.6))
    assert chain.tau < s.tau <= 4
    # depth-1 acceptance with 4 alternatives: 1 - 0.4^4
    assert s.survival[0] == pytest.approx(1 - 0.4**4)
    with pytest.raises(CrossoverError, match="depth"):
        Speculation("eagle", 2, Acceptance.rate(0.6), tree=(4, 4, 2))
    with pytest.raises(CrossoverError):
        Speculation("ngram", 2, Acceptance.rate(0.6), tree=(2, 2))


def test_policy_cli_json_contract():
    png = __import__("pathlib").Path(__import__("tempfile").mkdtemp()) / "policy.png"
    r = run_cli("policy", "--model", "llama-3.1-8b", "--hardware", "rtx-4090", "--acceptance", "0.4",
                "--context", "512", "--batch-max", "96", "--k-max", "5", "--json", "--plot", str(png))
    assert png.stat().st_size > 10_000
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"schedule", "speculate_below_batch", "engine_configs", "gains"}
    assert set(d["engine_configs"]) == {"vllm", "sglang", "tensorrt_llm"}
    assert all(set(x) == {"batch_min", "batch_max", "k"} for x in d["schedule"])
    assert d["gains"]["mean_gain_over_always_on"] >= 1.0 and d["gains"]["mean_gain_over_always_off"] >= 1.0
    bad = run_cli("policy", "--k-max", "0")
    assert_one_line_error(bad, "--k-max")


def test_tree_flag_on_predict_and_simulate():
    p = run_cli("predict", "--model", "llama-3.1-8b", "--tree", "3x2", "--json", "--batch", "1,8")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["inputs"]["tree"] == [2, 2, 2] and d["verify_width"] == 7 and d["inputs"]["k"] == 3
    s = run_cli("simulate", "--workload", "gsm8k", "--concurrency", "4", "--model", "llama-3.1-8b", "--tree", "2,2",
                "--num-prompts", "40", "--json")
    assert s.returncode == 0, s.stderr
    bad = run_cli("predict", "--tree", "3xz")
    assert_one_line_error(bad, "--tree")


def test_adaptive_with_threshold_zero_and_no_budget_is_fixed_k():
    from crossover.analysis.adaptive import adaptive_throughput

    sc = scenario(hw="h100-sxm", method="eagle3", alpha=0.72, k=7, ctx=1024)
    b = [1, 16, 64, 256]
    a = adaptive_throughput(sc, b, 7, threshold=0.0, load_budget=False)
    fixed = evaluate(sc, b).tokens_per_s_on
    np.testing.assert_allclose(a.tokens_per_s, fixed, rtol=1e-12)


def test_adaptive_beats_fixed_k_at_load_but_not_without_bound():
    from crossover.analysis.adaptive import adaptive_throughput

    # graphs captured to 4096 tokens: at batch 256 fixed k = 1 (512 tokens) would keep vLLM's default
    # graph and the adaptive widths not, and the comparison is of the rule, not of the capture limit
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1,
                     engine=load_engine("vllm").configured(cuda_graph_max=4096))
    sc = Scenario(dep, Speculation("eagle3", 7, Acceptance.rate(0.72)), 1024)
    pol = best_k_policy(sc, 256, 7)
    a = adaptive_throughput(sc, [256], 7, kappa=1.0)
    assert a.tokens_per_s[0] > pol.best_tput[255]  # informative confidences: better than any fixed k at load
    assert a.verified_drafts[0] < 7
    # it moves the crossover up, not to infinity: a weak draft on a compute-poor card still loses at large batch
    weak = scenario(alpha=0.3, k=4)
    aw = adaptive_throughput(weak, [1024], 4, kappa=1.0)
    off = evaluate(weak, [1024]).tokens_per_s_off
    assert aw.tokens_per_s[0] < off[0]


def test_whatif_grid_matches_the_predictor_and_finds_crossovers():
    from crossover.analysis.whatif import grid, parse_axis

    sc = scenario()
    xs = [1.0, 16.0, 64.0, 256.0]
    g = grid(sc, "batch", xs, "k", [1, 3, 5])
    for row, k in zip(g.speedup, [1, 3, 5]):
        s = Scenario(sc.deployment, sc.speculation.with_k(k), sc.context)
        np.testing.assert_allclose(row, evaluate(s, xs).speedup, rtol=1e-10)
    a = grid(sc, "acceptance", [0.4, 0.8], "batch", [8.0])
    assert a.speedup[0, 1] > a.speedup[0, 0]
    cross = grid(sc, "batch", parse_axis("batch=1..512", 64)[1], "k", [2, 4, 6]).crossover_along_x()
    assert cross[0] > cross[1] > cross[2]  # a longer window stops paying at a smaller batch
    with pytest.raises(CrossoverError, match="unknown axis"):
        parse_axis("gpus=1..8", 8)
    with pytest.raises(CrossoverError, match="batch"):
        grid(sc, "k", [1, 2], "acceptance", [0.5])


def test_whatif_cli_csv_json_and_plot(tmp_path):
    csv_path, png = tmp_path / "g.csv", tmp_path / "g.png"
    r = run_cli("whatif", "--model", "llama-3.1-8b", "--hardware", "rtx-4090", "--x", "batch=1..256", "--y", "k=1..4",
                "--points", "16", "--csv", str(csv_path), "--plot", str(png), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(d["speedup"]) == 4 and len(d["speedup"][0]) == 16 and "crossover_batch_per_k" in d
    assert csv_path.read_text().splitlines()[0] == "batch,k,speedup" and len(csv_path.read_text().splitlines()) == 65
    assert png.stat().st_size > 10_000
    bad = run_cli("whatif", "--x", "batch=1..8", "--y", "acceptance=0.5..1.5")
    assert_one_line_error(bad, "acceptance")


def test_speculation_that_pays_again_beyond_the_graph_limit_is_routed_by_band():
    """Llama-3.1-70B on 4 x H100 at context 128 (the fuzz campaign's case: an index error): speculation
    stops paying at batch 241 and pays again from 513, where the server without speculation leaves its
    512-token CUDA graph and pays attention outside it on every step, which the speculating one, beyond
    its own graph already and with fewer steps per token, pays less often. The rule, the routing notes
    and the vLLM schedule say so; nothing reads it as "off from batch 241"."""
    dep = Deployment(model=load_model("llama-3.1-70b"), hardware=load_hardware("h100-sxm"), tp=4)
    pol = best_k_policy(Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7)), 128.0), 1024, 8)
    assert pol.off_ranges == [(241, 512)] and pol.speculate_below_batch == 241
    assert pol.best_k[512] > 0 and pol.best_k[511] == 0  # batch 513 speculates, 512 does not
    # why: batch 513 is the first whose plain decode (one token a request) leaves the 512-token graph
    assert eager_steps(np.array([512.0, 513.0]), np.zeros(2), dep.engine, False).tolist() == [False, True]
    cfg = engine_configs(pol, "yuhuili/EAGLE-LLaMA3.1-Instruct-70B")
    assert cfg["rule"] == "speculate except at batches 241-512 (k = 7 at batch 1)"
    route = "send traffic at batches 241-512 to a server without speculation."
    assert any(n.endswith(route) for n in cfg["sglang"]["notes"])
    assert cfg["vllm"]["speculative_config"]["num_speculative_tokens_per_batch_size"][-2:] == [[241, 512, 0],
                                                                                             [513, 1024, 1]]
    r = run_cli("policy", "--context", "128", "--batch-max", "1024", "--k-max", "8", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["off_ranges"] == [[241, 512]] and d["speculate_below_batch"] == 241


def test_dynamic_sd_is_priced_as_vllm_runs_it_every_step_piecewise():
    """vLLM's Dynamic SD (num_speculative_tokens_per_batch_size) runs every step PIECEWISE on model runner V1
    (issue #49548): by hand at batch 64 (k = 4 there) the step pays 64 x 40 us of attention outside the graph
    where full graphs paid half of it (the verify batches that miss one), so the schedule's tokens/s is
    64 tau / (step + 64 x 40 us x 0.5); at a k = 0 batch the plain step pays all of b x 40 us. The vLLM note
    says the mean gain priced so and where one Dynamic-SD server is slower than one without speculation."""
    from crossover.analysis.policy import dynamic_sd_throughput

    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    sc = Scenario(dep, Speculation("eagle3", 7, Acceptance.rate(0.72)), 1024)
    pol = best_k_policy(sc, 256, 7)
    dyn = dynamic_sd_throughput(pol)
    i = 63
    k = int(pol.best_k[i])
    c = evaluate(Scenario(dep, sc.speculation.with_k(k), 1024), [64.0])
    tau = sc.speculation.with_k(k).tau
    assert k == 4 and dyn[i] == pytest.approx(64 * tau / (c.step_on[0] + 64 * 40e-6 * 0.5), rel=1e-9)
    ratio = dyn / pol.tput[0]
    cfg = engine_configs(pol, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")["vllm"]
    d = cfg["dynamic_sd_piecewise"]
    assert d["mean_gain_over_always_off"] == pytest.approx(float(np.mean(ratio)))
    assert d["slower_than_off"] == [[252, 256]] and np.all(ratio[251:] < 1) and np.all(ratio[:251] >= 1)
    assert any("Dynamic SD runs every step with PIECEWISE CUDA graphs" in n and "252 and above" in n
               for n in cfg["notes"])
    # an engine that has no full graphs to lose (vLLM 0.10: PIECEWISE already) or is not vLLM V1: nothing
    old = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1,
                     engine=load_engine("vllm-0.10"))
    assert dynamic_sd_throughput(best_k_policy(Scenario(old, sc.speculation, 1024), 16, 3)) is None
