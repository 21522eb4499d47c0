"""Acceptance formulas and the cost structure of each speculation method."""

import numpy as np
import pytest

from crossover.errors import CrossoverError
from crossover.specs import Deployment, Efficiency, load_hardware, load_model
from crossover.model.acceptance import Acceptance, rate_from_tau, tau_from_rate
from crossover.model.speculation import Speculation
from crossover.model.step import StepModel, step_time


def spec_step(d, s, batch, context):
    """One speculative step priced by the step model, with the per-op detail."""
    model = StepModel.of(d, s)
    return model.price(model.decode(np.asarray(batch, float), context, s), detail=True)


def dep(model="llama-3.1-8b", hw="h100-sxm", tp=1, eff=None):
    return Deployment(model=load_model(model), hardware=load_hardware(hw), tp=tp, efficiency=eff or Efficiency())


def test_tau_formula_reaches_k_plus_1():
    assert tau_from_rate(0.7, 3) == pytest.approx((1 - 0.7**4) / 0.3)
    assert tau_from_rate(0.7, 3) == pytest.approx(1 + 0.7 + 0.49 + 0.343)
    assert tau_from_rate(0.0, 5) == 1.0
    assert tau_from_rate(0.999999, 4) == pytest.approx(5.0, rel=1e-5)  # k+1, not k


def test_rate_from_tau_inverts():
    for a in (0.1, 0.5, 0.8, 0.95):
        assert rate_from_tau(tau_from_rate(a, 4), 4) == pytest.approx(a, abs=1e-9)
    with pytest.raises(CrossoverError):
        rate_from_tau(4.5, 3)


def test_acceptance_kinds_agree():
    k = 4
    by_rate = Acceptance.rate(0.6)
    by_tau = Acceptance.mean_length(by_rate.tau(k))
    by_pos = Acceptance.per_position([0.6**j for j in range(1, k + 1)])
    assert by_tau.tau(k) == pytest.approx(by_rate.tau(k))
    assert by_pos.tau(k) == pytest.approx(by_rate.tau(k))
    assert by_tau.alpha(k) == pytest.approx(0.6, abs=1e-9)


def test_per_position_rates_are_validated():
    with pytest.raises(CrossoverError, match="must not increase"):
        Acceptance.per_position([0.5, 0.7])
    with pytest.raises(CrossoverError, match="only 2"):
        Acceptance.per_position([0.8, 0.6]).survival(3)
    with pytest.raises(CrossoverError):
        Acceptance.rate(1.0)
    with pytest.raises(CrossoverError):
        Acceptance.rate(-0.1)


def test_ngram_match_rate_scales_drafted_positions():
    s = Speculation("ngram", 4, Acceptance.rate(0.5, match_rate=0.25))
    assert s.verify_width == pytest.approx(1 + 0.25 * 4)
    assert s.tau == pytest.approx(1 + 0.25 * (0.5 + 0.25 + 0.125 + 0.0625))
    assert s.draft_forwards == 0


def test_verify_with_q1_and_no_draft_equals_decode():
    # no speculative bookkeeping, no n-gram lookup (it runs, matched or not), no attention outside a
    # FULL graph (a verify batch that misses one) and no host work per sequence (the async scheduling the
    # n-gram proposer turns off hides it without speculation): a plain decode
    eff = Efficiency(spec_overhead_s=0.0, spec_overhead_per_seq_s=0.0, ngram_lookup_per_seq_s=0.0,
                     ragged_per_seq_s=0.0, host_per_seq_s=0.0)
    d = dep(eff=eff)
    s = Speculation("ngram", 3, Acceptance.rate(0.5, match_rate=0.0))
    b = np.array([1.0, 16.0, 128.0])
    on = spec_step(d, s, b, 2048)
    off = step_time(d, b, 1, 2048)
    np.testing.assert_allclose(on.total, off.total, rtol=1e-12)


def test_draft_model_pays_k_sequential_forwards():
    eff = Efficiency(draft_step_overhead_s=0.0)
    d = dep("llama-3.1-70b", tp=4, eff=eff)
    draft = load_model("llama-3.2-1b")
    s = Speculation("draft", 4, Acceptance.rate(0.7), draft=draft, draft_tp=1)
    dd = Deployment(model=draft, hardware=d.hardware, tp=1, efficiency=eff)
    # a draft forward: no engine step cost, no target sampler (8 positions x 10 B x 128256 entries)
    one = step_time(dd, [8], 1, 2048).total[0] - dd.step_overhead_s - 8 * dd.sampler_bytes_per_vocab * 128256 / dd.bandwidth
    st = spec_step(d, s, [8], 2048)
    assert float(st.term("draft_forwards")[0]) == pytest.approx(4 * one, rel=1e-9)
    assert float(st.draft[0]) == pytest.approx(4 * one, rel=1e-9)


def test_eagle_head_is_one_layer_plus_lm_head_and_eagle3_is_cheaper_per_step():
    d = dep("llama-3.1-8b")
    s1, s3 = Speculation("eagle", 3, Acceptance.rate(0.7)), Speculation("eagle3", 3, Acceptance.rate(0.7))
    e1, e3 = spec_step(d, s1, [1], 512), spec_step(d, s3, [1], 512)
    # three sequential passes of one forward each; vLLM V1's first one takes in the 4 verified positions
    # (logits at one), the other two one token each (vllm/v1/spec_decode/eagle.py propose, 0.14.1)
    assert StepModel.of(d, s1).draft_groups(s1) == ((4.0, 1, 1.0), (1.0, 2, None))
    passes = StepModel.of(d, s1).draft_passes(np.array([1.0]), 512, s1)
    assert [c for c, _ in passes] == [1, 2]
    assert float(passes[0][1].tokens[0]) == 4.0 and float(passes[0][1].sampled[0]) == 1.0
    one1, one3 = e1.drafts[0].ops, e3.drafts[0].ops
    # EAGLE reuses the 128,256-token LM head; EAGLE-3 reads a 32,000-token draft head instead
    assert float(one1["draft_lm_head"].bytes[0]) == pytest.approx(128256 * 4096 * 2, rel=1e-3)
    assert float(one3["draft_lm_head"].bytes[0]) == pytest.approx(32000 * 4096 * 2, rel=1e-2)
    assert float(e3.draft[0]) < float(e1.draft[0])
    # one decoder layer of the target's shape per draft step
    assert float(one1["mlp"].bytes[0]) == pytest.approx(3 * 4096 * 14336 * 2, rel=1e-3)


def test_medusa_is_one_pass_and_mtp_needs_a_module():
    d = dep("vicuna-7b", "a100-80gb-sxm")
    m = Speculation("medusa", 4, Acceptance.rate(0.6))
    assert m.draft_forwards == 1
    t = spec_step(d, m, [1], 512)
    assert float(t.term("draft_step_overhead")[0]) == pytest.approx(d.draft_step_overhead_s)
    assert float(t.drafts[0].ops["medusa_heads"].bytes[0]) == pytest.approx(4 * 32000 * 4096 * 2, rel=1e-3)
    with pytest.raises(CrossoverError, match="no MTP module"):
        Speculation("mtp", 2, Acceptance.rate(0.8)).draft_ops(d)
    ds = dep("deepseek-v3", "h200", tp=8)
    mtp = Speculation("mtp", 2, Acceptance.rate(0.8))
    assert float(spec_step(ds, mtp, [1], 1000).draft[0]) > 0


def test_method_arguments_are_validated():
    with pytest.raises(CrossoverError, match="needs a draft model"):
        Speculation("draft", 3, Acceptance.rate(0.7))
    with pytest.raises(CrossoverError, match="unknown method"):
        Speculation("lookahead", 3, Acceptance.rate(0.7))  # type: ignore[arg-type]
    with pytest.raises(CrossoverError, match="k must be"):
        Speculation("eagle", 0, Acceptance.rate(0.7))


def test_spec_step_shows_its_parts():
    d = dep()
    s = Speculation("eagle", 3, Acceptance.rate(0.7))
    st = spec_step(d, s, [4.0], 1024)
    assert s.verify_width == 4
    eff = d  # the overheads in effect
    assert float(st.total[0]) == pytest.approx(
        float(st.draft[0] + st.verify[0]) + eff.spec_overhead_s + 4 * eff.spec_overhead_per_seq_s
        + 4 * eff.ragged_per_seq_s * eff.engine.spec_graph_miss  # the verify batches that miss a FULL graph
        + (4 * (eff.sampler_bytes_per_vocab + eff.bonus_bytes_per_vocab) + 12 * eff.verify_bytes_per_vocab) * 128256
        / eff.bandwidth, rel=1e-12)
    # by hand: target forward at q = 4, the step overhead, three draft passes with their launches
    # (step_time samples all 16 positions plainly: its sampler is not the verify forward's)
    plain = 16 * eff.sampler_bytes_per_vocab * 128256 / eff.bandwidth
    assert float(st.verify[0]) == pytest.approx(float(step_time(d, [4.0], 4, 1024).total[0]) - plain, rel=1e-12)
    assert float(st.term("draft_step_overhead")[0]) == pytest.approx(3 * eff.draft_step_overhead_s)


# ----------------------------------------------------------------------- trees as node paths

def test_tree_paths_tau_by_hand():
    from crossover.model.speculation import Speculation

    # ranks are geometric: the top candidate is right with a, the second with a (1 - a); the child
    # (0, 0) needs the top candidate right twice
    spec = Speculation("eagle", 2, Acceptance.rate(0.65), tree_paths=((0,), (1,), (0, 0)))
    assert spec.tau == pytest.approx(1 + (0.65 + 0.65 * 0.35) + 0.65 * 0.65)
    assert spec.tree == (2, 1) and spec.verify_width == 4.0 and spec.draft_pass_widths == (1, 2)


def test_a_chain_written_as_paths_is_the_chain():
    from crossover.model.speculation import Speculation

    for acc in (Acceptance.rate(0.6), Acceptance.per_position((0.9, 0.7, 0.4))):
        chain = Speculation("eagle", 3, acc)
        paths = Speculation("eagle", 3, acc, tree_paths=((0,), (0, 0), (0, 0, 0)))
        assert paths.tau == pytest.approx(chain.tau)


def test_width_only_trees_bound_the_real_shape():
    from crossover.model.speculation import EAGLE1_TREE_PATHS, Speculation

    real = Speculation("eagle", 5, Acceptance.rate(0.7), tree_paths=EAGLE1_TREE_PATHS)
    assert real.tree == (4, 8, 8, 3, 2) and real.verify_width == 26
    bound = Speculation("eagle", 5, Acceptance.rate(0.7), tree=real.tree)
    chain = Speculation("eagle", 5, Acceptance.rate(0.7))
    assert chain.tau < real.tau < bound.tau
    # EAGLE-1 reports tau 3.94 for Vicuna-7B on MT-bench with this tree: a chain rate near 0.65
    assert Speculation("eagle", 5, Acceptance.rate(0.65), tree_paths=EAGLE1_TREE_PATHS).tau == pytest.approx(3.99, abs=0.01)


@pytest.mark.parametrize("paths, needle", [
    (((0,), (0, 1, 2)), "no parent"),
    (((0,), (0,)), "twice"),
    (((0,), (-1,)), "ranks"),
    ((), "at least one node"),
])
def test_malformed_tree_paths_are_one_line_errors(paths, needle):
    from crossover.model.speculation import Speculation

    with pytest.raises(CrossoverError, match=needle) as exc:
        Speculation("eagle", 3, Acceptance.rate(0.6), tree_paths=paths)
    assert "\n" not in str(exc.value)


def test_tree_widths_must_agree_with_paths():
    from crossover.model.speculation import Speculation

    with pytest.raises(CrossoverError, match="disagree"):
        Speculation("eagle", 2, Acceptance.rate(0.6), tree=(1, 1), tree_paths=((0,), (1,), (0, 0)))
