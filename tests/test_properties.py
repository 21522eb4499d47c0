"""Invariants that must hold for any input (hypothesis)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crossover.api.build import ENGINES
from crossover.model.scenario import Scenario
from crossover.analysis.curves import find_crossings, predict, speedup
from crossover.model.step import step_time
from crossover.specs import Deployment, load_hardware, load_model
from crossover.model.acceptance import Acceptance, tau_from_rate
from crossover.model.speculation import Speculation

MODELS = ["llama-3.1-8b", "llama-2-7b", "mixtral-8x7b", "qwen2.5-7b"]
HW = ["h100-sxm", "a100-80gb-sxm", "l40s", "rtx-4090"]
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def deployment(model, hw, tp=1, **hw_scale):
    h = load_hardware(hw)
    if hw_scale:
        h = h.model_copy(update={k: getattr(h, k) * v for k, v in hw_scale.items()})
    return Deployment(model=load_model(model), hardware=h, tp=tp)


batches = st.floats(min_value=1, max_value=1024)
contexts = st.floats(min_value=0, max_value=32768)


@pytest.mark.parametrize("peak", ["memory_bandwidth_gb_s", "bf16_dense_tflops"], ids=["bandwidth", "flops"])
@FAST
@given(st.sampled_from(MODELS), st.sampled_from(HW), batches, contexts, st.integers(1, 8),
       st.floats(min_value=1.0, max_value=4.0))
def test_more_bandwidth_or_flops_is_never_slower(peak, model, hw, b, ctx, q, scale):
    slow = step_time(deployment(model, hw), [b], q, ctx).total[0]
    fast = step_time(deployment(model, hw, **{peak: scale}), [b], q, ctx).total[0]
    assert fast <= slow * (1 + 1e-12)


@FAST
@given(st.sampled_from(MODELS), batches, contexts, st.integers(1, 7))
def test_step_time_never_falls_with_batch_or_q(model, b, ctx, q):
    d = deployment(model, "h100-sxm")
    t = step_time(d, [b, b + 1], q, ctx).total
    assert t[1] >= t[0]
    assert step_time(d, [b], q + 1, ctx).total[0] >= step_time(d, [b], q, ctx).total[0]


@given(st.floats(min_value=0, max_value=0.999), st.integers(1, 12))
def test_tau_lies_in_1_to_k_plus_1(alpha, k):
    tau = tau_from_rate(alpha, k)
    assert 1.0 <= tau <= k + 1
    assert 1.0 <= Acceptance.rate(alpha).tau(k) <= k + 1


@given(st.lists(st.floats(min_value=0, max_value=0.999), min_size=1, max_size=10),
       st.floats(min_value=0, max_value=1))
def test_tau_of_per_position_rates_lies_in_range(rates, match):
    rates = sorted(rates, reverse=True)
    k = len(rates)
    tau = Acceptance.per_position(rates, match).tau(k)
    assert 1.0 <= tau <= k + 1


@FAST
@given(st.sampled_from(["eagle", "eagle3", "medusa", "ngram"]), st.integers(1, 6),
       st.floats(min_value=0.0, max_value=0.97), st.floats(min_value=0.0, max_value=0.02), batches, contexts)
def test_higher_acceptance_never_lowers_speedup(method, k, a, da, b, ctx):
    d = deployment("llama-3.1-8b", "h100-sxm")
    lo = Scenario(d, Speculation(method, k, Acceptance.rate(a)), ctx)
    hi = Scenario(d, Speculation(method, k, Acceptance.rate(min(a + da, 0.99))), ctx)
    assert speedup(hi, [b])[0] >= speedup(lo, [b])[0] * (1 - 1e-12)


@FAST
@given(st.sampled_from(MODELS), st.sampled_from(HW), st.integers(1, 6), st.floats(min_value=0.3, max_value=0.9),
       st.sampled_from([256.0, 2048.0, 16384.0]))
def test_speedup_at_the_crossover_is_one(model, hw, k, a, ctx):
    d = deployment(model, hw)
    sc = Scenario(d, Speculation("eagle", k, Acceptance.rate(a)), ctx)
    for c in find_crossings(sc, 4096.0):
        at = speedup(sc, [c.batch])[0]
        if at == pytest.approx(1.0, abs=1e-4):
            continue
        # or the speedup jumps through 1 there (the verify step leaves its CUDA graph): 1 lies between
        # its values just below and just above the crossover, on the side its direction names
        below, above = speedup(sc, [c.batch * (1 - 1e-3), c.batch * (1 + 1e-3)])
        assert (below > 1 > above) if c.direction == "down" else (below < 1 < above), (c, below, at, above)


def test_regimes_are_all_reachable():
    d = deployment("llama-3.1-8b", "rtx-4090")
    crosses = predict(Scenario(d, Speculation("eagle", 3, Acceptance.rate(0.6)), 512), [1, 512])
    assert crosses.regime == "crosses" and crosses.crossings[0].direction == "down"
    always = predict(Scenario(d, Speculation("eagle3", 2, Acceptance.rate(0.8)), 512), [1, 8])
    assert always.regime == "always_faster"
    never = predict(Scenario(d, Speculation("eagle", 5, Acceptance.rate(0.05)), 512), [1, 64])
    assert never.regime == "never_faster"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=12),
       st.floats(0.0, 0.99))
def test_tree_tau_lies_between_one_and_depth_plus_one_and_below_the_width_bound(raw, a):
    # close the random node set under prefixes, so it is a tree
    nodes = {tuple(p[:i]) for p in raw for i in range(1, len(p) + 1)}
    paths = tuple(sorted(nodes, key=lambda p: (len(p), p)))
    depth = max(len(p) for p in paths)
    real = Speculation("eagle", depth, Acceptance.rate(a), tree_paths=paths)
    bound = Speculation("eagle", depth, Acceptance.rate(a), tree=real.tree)
    assert 1.0 <= real.tau <= depth + 1 + 1e-12
    assert real.tau <= bound.tau + 1e-12


_ENGINES = ENGINES  # every shipped profile


@settings(max_examples=150, deadline=None, derandomize=True)
@given(engine=st.sampled_from(_ENGINES), method=st.sampled_from(["ngram", "eagle", "draft"]),
       b1=st.floats(1, 800), extra=st.floats(0, 400), ctx=st.floats(0, 8000), spec_on=st.booleans(),
       graphs=st.sampled_from([None, "full", "piecewise", "none"]), chunked=st.sampled_from([None, True, False]),
       sampling=st.sampled_from([{}, {"temperature": 0.8}, {"temperature": 0.8, "top_k": 40},
                                 {"temperature": 0.6, "top_p": 0.9}]),
       graph_max=st.sampled_from([None, 8, 100, 300]), hardware=st.sampled_from(["h100-sxm", "l40s"]))
def test_a_larger_batch_never_steps_faster_under_any_engine_profile(engine, method, b1, extra, ctx, spec_on,
                                                                     graphs, chunked, sampling, graph_max, hardware):
    """More sequences in a step never cost less under any engine profile and any configuration the user
    can set (CUDA-graph mode and capture limit, chunked prefill, the requests' sampling), on a GPU where
    SGLang captures up to 256 requests and one where it captures 32, across the CUDA-graph limit and the
    eager launch floor."""
    import crossover
    from crossover.model.step import StepModel
    from crossover.specs.loader import load_engine

    profile = load_engine(engine)
    if graphs == "piecewise" and not (profile.framework == "vllm" and profile.verify_layout == "multi_query"):
        graphs = None  # only vLLM V1 has the mode (refused elsewhere: tests/test_step_terms.py)
    if graphs in ("full", "piecewise") and profile.graph_capture_limit == 0:
        graphs = None
    if graphs == "none" or profile.graph_capture_limit == 0:
        graph_max = None  # nothing is captured (refused with a limit: tests/test_cuda_graph_max.py)
    kw = dict(model="llama-3.1-8b", hardware=hardware, method=method, k=4, acceptance=0.6, engine=engine,
              cuda_graphs=graphs, chunked_prefill=chunked, cuda_graph_max=graph_max, **sampling)
    if method == "draft":
        kw["draft"] = "llama-3.2-1b"
    sc = crossover.scenario(**kw)
    m = StepModel.of(sc.deployment, sc.speculation)
    spec = sc.speculation if spec_on else None
    t = m.price(m.decode(np.array([b1, b1 + extra]), ctx, spec)).total
    assert t[1] >= t[0] * (1 - 1e-12)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(engine=st.sampled_from(["vllm", "vllm-0.10", "sglang"]), hardware=st.sampled_from(["h200", "b200"]),
       b1=st.floats(1, 400), extra=st.floats(0, 200), ctx=st.floats(0, 16000), k=st.integers(1, 4))
def test_a_larger_batch_never_steps_faster_with_mla_verify_through_the_prefill_path(engine, hardware, b1, extra,
                                                                                    ctx, k):
    """DeepSeek-V3 with MTP where its verify positions take MLA's prefill path (vLLM 0.10, vLLM 0.14 on
    Blackwell) and where they do not: more sequences never cost less."""
    import crossover
    from crossover.model.step import StepModel

    sc = crossover.scenario(model="deepseek-v3", hardware=hardware, tp=8, method="mtp", k=k, acceptance=0.7,
                            engine=engine)
    m = StepModel.of(sc.deployment, sc.speculation)
    t = m.price(m.decode(np.array([b1, b1 + extra]), ctx, sc.speculation)).total
    assert t[1] >= t[0] * (1 - 1e-12)
