"""Issue 12 items 13-15, 17, 21: inputs the engines would refuse get one clear line (CrossoverError
in the library, exit 2 and one stderr line in the CLI), and accepted inputs print no numpy warnings."""

from __future__ import annotations

import warnings

import pytest
from conftest import assert_one_line_error, run_cli

import crossover
from crossover.defaults import AUTO_TP
from crossover.api.build import _deployment, scenario
from crossover.errors import CrossoverError
from crossover.model.memory import batch_ceiling, check_batches
from crossover.specs import load_hardware, load_model
from crossover.specs.parallel import tp_problem, valid_tps
from crossover.analysis.whatif import parse_axis

# --- item 13 / 21: TP an engine accepts --------------------------------------------------------


@pytest.mark.parametrize("tp", [3, 64, 1024])
def test_tp_that_does_not_divide_the_heads_is_refused(tp):
    with pytest.raises(CrossoverError, match=rf"tp {tp} \(--tp\) is not one an engine accepts.*valid: 1, 2, 4, 8"):
        scenario("llama-3.1-8b", "h100-sxm", tp=tp)


def test_kv_heads_neither_split_nor_replicated():
    # qwen2.5-7b: 28 heads, 4 KV heads: tp 7 divides the heads but neither splits nor replicates the KV heads
    with pytest.raises(CrossoverError, match="4 KV heads"):
        scenario("qwen2.5-7b", "h100-sxm", tp=7)
    assert valid_tps(load_model("qwen2.5-7b"), load_hardware("h100-sxm")) == [1, 2, 4]
    # replication: qwen3-235b (4 KV heads) at tp 8 is fine
    assert tp_problem(load_model("qwen3-235b-a22b"), load_hardware("h200"), 8) is None


def test_expert_parallel_needs_experts_divisible_by_tp():
    m = load_model("mixtral-8x7b")  # 8 experts, 32 heads
    hw = load_hardware("h100-sxm").model_copy(update={"gpus_per_node": 16})
    assert tp_problem(m, hw, 16, expert_parallel=False) is None
    assert "8 experts" in tp_problem(m, hw, 16, expert_parallel=True)


def test_tp_beyond_one_box_needs_a_multi_node_link():
    m, hw = load_model("llama-3.1-405b"), load_hardware("h100-sxm")
    with pytest.raises(CrossoverError, match="holds 8 GPUs.*multi_node_interconnect"):
        scenario(m, hw, tp=16, weight_dtype="fp8")
    linked = hw.model_copy(update={"multi_node_interconnect": "InfiniBand NDR 400 Gb/s"})
    assert scenario(m, linked, tp=16, weight_dtype="fp8").deployment.tp == 16
    assert tp_problem(m, hw.model_copy(update={"gpus_per_node": 72}), 16) is None


def test_automatic_tp_picks_only_valid_tps():
    m, hw = load_model("qwen2.5-7b"), load_hardware("l4")
    for ctx in (2048, 16384, 32768):
        try:
            dep = _deployment(m, hw, None, ctx, ctx)
        except CrossoverError as exc:
            assert "any tp an engine accepts" in str(exc)
            continue
        assert dep.tp in AUTO_TP and tp_problem(m, hw, dep.tp) is None


def test_draft_tp_must_suit_the_draft():
    with pytest.raises(CrossoverError, match=r"draft tp 8 .*--draft-tp.*qwama-0.5b"):
        scenario("llama-3.1-8b", "h100-sxm", tp=8, method="draft", draft="qwama-0.5b")
    assert scenario("llama-3.1-8b", "h100-sxm", tp=8, method="draft", draft="qwama-0.5b", draft_tp=1)


def test_batches_are_positive_integers_the_kv_cache_could_hold():
    sc = scenario("llama-3.1-8b", "h100-sxm", tp=1)
    top = batch_ceiling(sc.deployment)
    assert 1000 < top < 10**7
    assert check_batches([1, 8.0, top], top) == [1, 8, top]
    for bad, needle in ((0, ">= 1"), (-3, ">= 1"), (1.5, "whole number"), (float("nan"), "whole number"),
                        (float("inf"), "whole number"), (1e12, "could ever hold"), (top + 1, "could ever hold")):
        with pytest.raises(CrossoverError, match=needle):
            check_batches([1, bad], top)


# --- item 14: drafts ---------------------------------------------------------------------------


def test_a_draft_with_another_vocabulary_is_refused_unless_allowed():
    with pytest.raises(CrossoverError, match=r"tinyllama-1.1b \(vocabulary 32000\).*llama-3.1-8b \(128256\)"):
        scenario("llama-3.1-8b", method="draft", draft="tinyllama-1.1b", tp=1)
    sc = scenario("llama-3.1-8b", method="draft", draft="tinyllama-1.1b", tp=1, allow_vocab_mismatch=True)
    assert sc.speculation.draft.name == "tinyllama-1.1b"


def test_a_draft_larger_than_its_target_is_a_warning():
    with pytest.warns(UserWarning, match="larger than target llama-3.2-1b"):
        scenario("llama-3.2-1b", "h100-sxm", tp=1, method="draft", draft="llama-3.1-8b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scenario("llama-3.1-8b", "h100-sxm", tp=1, method="draft", draft="llama-3.2-1b")


def test_cli_prints_the_draft_warning_as_one_line():
    r = run_cli("predict", "--model", "llama-3.2-1b", "--tp", "1", "--method", "draft", "--draft", "llama-3.1-8b",
                "--batch", "1,8")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines == [lines[0]] and lines[0].startswith("crossover: warning: draft llama-3.1-8b")


# --- item 15: percentages and reversed ranges --------------------------------------------------


def test_acceptance_as_a_percentage_suggests_the_fraction():
    with pytest.raises(CrossoverError, match=r"acceptance 70 \(--acceptance\).*did you mean 0.70\?"):
        scenario("llama-3.1-8b", tp=1, acceptance=70)
    with pytest.raises(CrossoverError, match="did you mean 0.80"):
        scenario("llama-3.1-8b", tp=1, per_position=[80, 60])
    with pytest.raises(CrossoverError, match="did you mean 0.60"):
        parse_axis("acceptance=60..90", 4)


@pytest.mark.parametrize("spec,needle", [
    ("batch=512..1", "reversed; write batch=1..512"),
    ("batch=1..inf", "not a finite value"),
    ("batch=nan,4", "not a finite value"),
    ("context=1..1e12", "not a finite value"),
    ("k=1..1e9", "[1, 32]"),
    ("acceptance=nan,0.5", "not a finite value"),
])
def test_whatif_axes_refuse_reversed_and_non_finite_values(spec, needle):
    with pytest.raises(CrossoverError, match=None) as exc:
        parse_axis(spec, 8)
    assert needle in str(exc.value)


def test_whatif_axes_within_memory_and_positions():
    with pytest.raises(CrossoverError, match="could ever hold"):
        crossover.whatif(x="batch=1..1e9", y="k=1..3", points=4, model="llama-3.1-8b", tp=1)
    with pytest.raises(CrossoverError, match="max_position_embeddings"):
        crossover.whatif(x="batch=1..64", y="context=128..1e6", points=4, model="llama-3.1-8b", tp=1)


# --- items 17 / 21: positions, efficiency, warnings --------------------------------------------


def test_context_beyond_the_models_positions_is_refused():
    with pytest.raises(CrossoverError, match=r"context 4096 \(--context\) exceeds vicuna-7b's 2048 positions"):
        scenario("vicuna-7b", "h100-sxm", tp=1, context=4096)
    with pytest.raises(CrossoverError, match="prompt \\+ output"):
        scenario("vicuna-7b", "h100-sxm", tp=1, prompt_len=2000, output_len=500)
    assert scenario("vicuna-7b", "h100-sxm", tp=1, context=2048).context == 2048


@pytest.mark.parametrize("kw,needle", [
    ({"bandwidth_fraction": 1e-320}, "--bandwidth-fraction"),
    ({"flops_fraction": 1e-9}, "--flops-fraction"),
    ({"step_overhead_ms": float("inf")}, "--step-overhead-ms"),
    ({"step_overhead_ms": 1e308}, "--step-overhead-ms"),
    ({"context": float("inf")}, "--context"),
])
def test_efficiency_values_that_break_step_times_are_refused(kw, needle):
    with pytest.raises(CrossoverError, match=needle):
        scenario("llama-3.1-8b", "h100-sxm", tp=1, **kw)


def test_a_calibration_with_an_infinite_overhead_is_refused(tmp_path):
    fit = tmp_path / "fit.yaml"
    fit.write_text("fixed:\n  step_overhead_ms: .inf\n")
    with pytest.raises(CrossoverError):
        scenario("llama-3.1-8b", "h100-sxm", tp=1, calibration=str(fit))


@pytest.mark.parametrize("args", [
    ["predict", "--tp", "3"], ["predict", "--tp", "64", "--model", "llama-3.1-8b"],
    ["predict", "--tp", "16", "--model", "llama-3.1-8b"], ["predict", "--acceptance", "70"],
    ["predict", "--bandwidth-fraction=1e-320"], ["predict", "--model", "vicuna-7b", "--context", "4096"],
    ["predict", "--model", "llama-3.1-8b", "--method", "draft", "--draft", "tinyllama-1.1b"],
    ["whatif", "--x", "batch=512..1"], ["whatif", "--x", "batch=1..inf"], ["whatif", "--y", "k=1..1e9"],
])
def test_cli_refuses_in_one_line(args):
    assert_one_line_error(run_cli(*args))


@pytest.mark.parametrize("args", [
    ["predict", "--model", "llama-3.1-8b", "--context", "0"],
    ["predict", "--model", "llama-3.1-8b", "--bandwidth-fraction", "0.001", "--flops-fraction", "0.001"],
    ["whatif", "--model", "llama-3.1-8b", "--x", "batch=1..64", "--y", "acceptance=0,0.5", "--points", "4"],
    ["whatif", "--model", "llama-3.1-8b", "--x", "context=0..4096", "--y", "batch=1,8", "--points", "4"],
    ["predict", "--model", "vicuna-7b", "--hardware", "rtx-3090", "--context", "2048"],
])
def test_accepted_inputs_print_no_numpy_warnings(args):
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr and "Warning" not in r.stderr, r.stderr
