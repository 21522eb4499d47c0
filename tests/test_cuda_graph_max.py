"""The CUDA-graph capture limit (issue 21 item 2: "CUDA-graph mode ... and capture sizes"): SGLang's own
default by GPU memory and TP size (0.5.5 server_args.py _handle_gpu_memory_settings), `--cuda-graph-max`
as the user set it, the eager steps beyond it, and the launch flags that give it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli

import crossover
from crossover.errors import CrossoverError, InputError
from crossover.measurements.server_args import read_server_args
from crossover.model.graphs import eager_steps
from crossover.model.step import StepModel
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs.capture import default_capture_limit
from crossover.specs.loader import load_engine

SGLANG = load_engine("sglang")


@pytest.mark.parametrize("hardware, tp, dp, limit", [
    ("rtx-4090", 1, 1, 24), ("a10g", 4, 1, 80),  # 24 GB: below 35 GiB
    ("l40s", 1, 1, 32), ("l40s", 4, 1, 160), ("a100-40gb-sxm", 2, 1, 32),  # below 60 GiB
    ("h100-sxm", 1, 1, 256), ("h100-sxm", 4, 1, 512), ("h200", 2, 1, 256), ("h20", 8, 1, 512),  # below 160 GiB
    ("b200", 1, 1, 512), ("mi300x", 1, 1, 512),  # above
    ("h100-sxm", 1, 4, 512),  # SGLang's tp_size counts every data-parallel attention rank's GPUs
])
def test_sglang_sizes_its_capture_limit_from_the_gpus_memory_and_tp(hardware, tp, dp, limit):
    hw = load_hardware(hardware)
    model = load_model("mixtral-8x7b" if dp > 1 else "llama-3.1-8b")
    assert default_capture_limit(SGLANG, hw, tp * dp) == limit
    dep = Deployment(model=model, hardware=hw, tp=tp, data_parallel=dp, engine=SGLANG)
    assert dep.engine.graph_capture_limit == limit
    assert dep.engine.capture_limit(False) == dep.engine.capture_limit(True) == limit  # both lists hold it
    # the engines that size it once keep their profile's value on every GPU
    assert Deployment(model=model, hardware=hw, tp=tp, data_parallel=dp).engine.graph_capture_limit == 512


def test_a_given_limit_is_the_largest_size_captured_at_or_below_it():
    """SGLang drops the listed sizes above --cuda-graph-max-bs and runs a batch up to the largest one left:
    100 keeps 96 on both lists; 30 keeps 24 without speculation and 30 with it (its list steps by 2 there)."""
    at = {n: SGLANG.configured(cuda_graph_max=n) for n in (100, 30)}
    assert (at[100].capture_limit(False), at[100].capture_limit(True)) == (96, 96)
    assert (at[30].capture_limit(False), at[30].capture_limit(True)) == (24, 30)
    assert at[30].settings["cuda_graph_max"] == "30"
    # vLLM V1's profile lists no sizes: the limit as given
    assert load_engine("vllm").configured(cuda_graph_max=100).capture_limit(True) == 100
    # given, it is not replaced by the GPU's default
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("l40s"), engine=at[100])
    assert dep.engine.capture_limit(False) == 96


def test_a_step_beyond_the_limit_runs_eagerly_at_least_its_layers_launch_time():
    """Llama-3.2-1B (16 layers) under SGLang on an L40S at TP 1: 32 requests replay a graph, 33 run eagerly,
    the step at least 16 x 45 us; with --cuda-graph-max 64 the 33 replay a graph again."""
    small, hw = load_model("llama-3.2-1b"), load_hardware("l40s")
    m = StepModel.of(Deployment(model=small, hardware=hw, engine=SGLANG))
    b = np.array([32.0, 33.0])
    eager = eager_steps(m.decode(b, 100.0).target.tokens, np.zeros(2), m.deployment.engine, False)
    assert eager.tolist() == [False, True]
    t = m.price(m.decode(b, 100.0)).term("target_forward")
    assert float(t[1]) >= 16 * 45e-6
    wider = StepModel.of(Deployment(model=small, hardware=hw, engine=SGLANG.configured(cuda_graph_max=64)))
    assert eager_steps(wider.decode(b, 100.0).target.tokens, np.zeros(2), wider.deployment.engine, False) is None


def test_outputs_say_the_limit_and_whether_it_was_given():
    sc = crossover.scenario(model="llama-3.1-8b", hardware="l40s", engine="sglang")
    r = crossover.predict(sc, batches=[1, 8])
    assert r.inputs["cuda_graph_max"] == {"off": 32, "on": 32, "unit": "requests"}
    assert "CUDA graphs full (default), up to 32 requests (default)" in r.to_text()
    r = run_cli("predict", "--model", "llama-3.1-8b", "--hardware", "l40s", "--engine", "sglang",
                "--cuda-graph-max", "100", "--batch", "1,8")
    assert r.returncode == 0 and "up to 96 requests (given)" in r.stdout
    r = run_cli("predict", "--model", "llama-3.1-8b", "--batch", "1", "--cuda-graph-max", "64", "--json")
    assert json.loads(r.stdout)["inputs"]["cuda_graph_max"] == {"off": 64, "on": 64, "unit": "tokens"}


def test_bad_limits_are_one_line_errors():
    for extra, needle in ((["--cuda-graph-max", "0"], "--cuda-graph-max"), (["--cuda-graph-max", "x"], "--cuda-graph-max"),
                          (["--cuda-graphs", "none", "--cuda-graph-max", "8"], "no CUDA graphs")):
        assert_one_line_error(run_cli("predict", "--model", "llama-3.1-8b", "--batch", "1", *extra), needle)
    with pytest.raises(CrossoverError, match="whole number >= 1"):
        SGLANG.configured(cuda_graph_max=2.5)
    with pytest.raises(CrossoverError, match="captures none"):
        load_engine("hf").configured(cuda_graph_max=8)


@pytest.mark.parametrize("text, limit", [
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-cudagraph-capture-size 128", 128),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct -cc '{\"max_cudagraph_capture_size\": 64}'", 64),
    ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --cuda-graph-max-bs 80", 80),
])
def test_launch_flags_give_the_limit(tmp_path, text, limit):
    p = tmp_path / "launch.sh"
    p.write_text(text + "\n", encoding="utf-8")
    assert read_server_args(p).scenario_keywords()["cuda_graph_max"] == limit


def test_launch_flags_that_do_not_give_one_limit_are_said(tmp_path):
    p = tmp_path / "launch.sh"
    p.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --cudagraph-capture-sizes 8\n", encoding="utf-8")
    a = read_server_args(p)
    assert "cuda_graph_max" not in a.scenario_keywords()
    assert [k for k, _, _ in a.unmapped] == ["cuda_graph_max"]
    p.write_text("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --disable-cuda-graph "
                 "--cuda-graph-max-bs 80\n", encoding="utf-8")
    a = read_server_args(p)
    assert "cuda_graph_max" not in a.scenario_keywords() and a.scenario_keywords()["cuda_graphs"] == "none"
    # vLLM with --enforce-eager captures nothing whatever the size (config/vllm.py sets it 0): said, not an error
    p.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager --max-cudagraph-capture-size 64\n",
                 encoding="utf-8")
    a = read_server_args(p)
    assert "cuda_graph_max" not in a.scenario_keywords() and a.scenario_keywords()["cuda_graphs"] == "none"
    assert a.ignored == ["--max-cudagraph-capture-size 64 (--enforce-eager: no CUDA graphs)"]


def test_sweep_plan_writes_a_given_limit_in_its_engines_flag():
    """The limit is in the profile's unit, so only that engine's command carries it."""
    r = run_cli("sweep-plan", "--model", "llama-3.1-8b", "--engine", "sglang", "--cuda-graph-max", "64", "--method",
                "eagle3", "--k", "3")
    assert r.returncode == 0 and r.stdout.count("--cuda-graph-max-bs 64") == 2
    assert "--max-cudagraph-capture-size" not in r.stdout
    r = run_cli("sweep-plan", "--model", "llama-3.1-8b", "--cuda-graph-max", "128", "--method", "eagle3", "--k", "3")
    assert r.returncode == 0 and r.stdout.count("--max-cudagraph-capture-size 128") == 2
    assert "--cuda-graph-max-bs" not in r.stdout


def test_vllm_v0_captures_up_to_its_running_sequence_limit():
    """vLLM V0 (0.6.3.post1 model_runner.py) captures up to _get_max_graph_batch_size(max_num_seqs): the limit
    padded to 1, 2, 4 or a multiple of 8, at most 8192; batch expansion's k + 1 sequences per request count,
    so with --max-num-seqs 64 and k = 4 a speculating step of 13 requests (65 sequences) runs eagerly."""
    from crossover.serving.engine import EngineLimits, seated
    from crossover.specs.capture import for_server

    def for_seats(engine, n):  # V0: the running-sequence limit alone
        return for_server(engine, n, 8192, 4)

    v0 = load_engine("vllm-v0")
    assert [for_seats(v0, n).graph_capture_limit for n in (2, 3, 64, 100, 256, 10_000)] == [2, 4, 64, 104, 256, 8192]
    assert for_seats(v0, 512).capture_limit(True) == 512  # beyond the profile's listed sizes: the limit itself
    assert for_seats(v0, 256) is v0 and for_seats(SGLANG, 64) is SGLANG  # SGLang sizes it from the GPU instead
    assert for_seats(v0.configured(cuda_graph_max=32), 256).graph_capture_limit == 32  # given: kept
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm-v0", method="ngram", k=4,
                            match_rate=1.0)
    dep = seated(sc.deployment, EngineLimits(64), 4)
    m = StepModel.of(dep, sc.speculation)
    mix = m.decode(np.array([12.0, 13.0]), 500.0, sc.speculation)
    work = mix.target.expanded()
    eager = eager_steps(work.tokens, np.asarray(mix.verifying, float), dep.speculating_engine, True)
    assert eager.tolist() == [False, True]


def test_vllm_v1_captures_up_to_twice_its_running_sequences_times_the_query_length():
    """vLLM 0.14.1 config/vllm.py _set_cudagraph_sizes: max = min(max_num_seqs x (1 + k) x 2, 512), at most
    max_num_batched_tokens; captured 1, 2, 4, multiples of 8 below 256, multiples of 16 from 256, each
    rounded up to a multiple of 1 + k when speculating (adjust_cudagraph_sizes_for_spec_decode) and the
    largest kept is the limit. By hand: 16 seqs off 16 x 2 = 32; k = 3: 16 x 4 x 2 = 128; 1024 seqs with
    k = 4: 512, the largest multiple of 5 reached from [.., 480, 496, 512] is round_up(496, 5) = 500; a
    given 100 keeps 96 (no size between 96 and 100 is captured); a 256-token budget caps it at 256."""
    from crossover.serving.engine import EngineLimits, seated
    from crossover.specs.capture import for_server, v1_sizes

    v1 = load_engine("vllm")
    assert v1_sizes(20, 1) == [1, 2, 4, 8, 16] and v1_sizes(20, 3) == [3, 6, 9, 18] and v1_sizes(3, 4) == []
    got = [for_server(v1, n, t, k).graph_capture_limit
           for n, t, k in ((16, 8192, 0), (16, 8192, 3), (1024, 8192, 0), (1024, 8192, 4), (256, 256, 0))]
    assert got == [32, 128, 512, 500, 256]
    assert for_server(v1.configured(cuda_graph_max=100), 1024, 8192, 0).graph_capture_limit == 96
    assert for_server(v1, 1024, 8192, 0) is v1 and for_server(SGLANG, 16, 8192, 3) is SGLANG
    v010 = load_engine("vllm-0.10")  # 0.10.1.1: min(2 x max_num_seqs, 512), multiples of 8, no k factor
    assert [for_server(v010, n, 8192, k).graph_capture_limit for n, k in ((16, 3), (13, 0), (1024, 4))] == [32, 24, 512]
    assert v1_sizes(20, 3, "vllm-0.10.1") == [1, 2, 4, 8, 16]
    assert for_server(v1, 16, 2, 3).graph_capture_limit == 2  # a budget below k + 1: the budget, no rounding
    with pytest.raises(InputError, match="multiple of k \\+ 1 = 4"):
        for_server(v1.configured(cuda_graph_max=3), 1024, 8192, 3)
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm", method="eagle", k=3)
    off, on = (seated(sc.deployment, EngineLimits(16), k) for k in (0, 3))
    assert off.engine.capture_limit(False) == 32 and on.speculating_engine.capture_limit(True) == 128
    # a 40-token mixed step of the off server runs eagerly, the speculating server's replays a graph
    assert eager_steps(np.array([40.0]), np.array([0.0]), off.engine, False).tolist() == [True]
    assert eager_steps(np.array([40.0]), np.array([0.0]), on.speculating_engine, True) is None


def test_simulate_names_each_servers_graph_limit_from_its_running_sequence_limit():
    r = run_cli("simulate", "--model", "llama-3.1-8b", "--workload", "sharegpt", "--concurrency", "1",
                "--max-num-seqs", "16", "--num-prompts", "20", "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"]["cuda_graph_max"] == {"off": 32, "on": 128, "unit": "tokens"}


def test_a_uniform_step_beyond_the_graph_limit_pays_the_piecewise_host_time():
    """vLLM 0.14.1 replays no graph for a step beyond its largest capture size (512 tokens: min(256 x
    (1 + 3) x 2, 512) speculating with k = 3, min(256 x 2, 512) off), so its attention runs outside
    any graph as a PIECEWISE step's does and pays ragged_per_seq_us (40 us) per sequence. By hand:
    128 requests verify 512 tokens (captured, but half such verify steps miss a FULL graph:
    spec_graph_miss): 128 x 40 us x 0.5; 129 verify 516: 129 x 40 us = 5.16 ms, the whole of it (no
    graph to miss, so no half on top); 200: 8 ms; the server without speculation decodes 129 tokens in a
    graph: 0. A mean step with 0.05 prompts per
    step: its uniform share is keyed on its decodes alone, so the off server pays the prompt share
    (1 - e^-0.05) x 129.05 x 40 us and the speculating one 129.05 x 40 us."""
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm", method="eagle", k=3)
    m = StepModel.of(sc.deployment, sc.speculation)
    assert sc.deployment.speculating_engine.capture_limit(True) == 512
    b = np.array([128.0, 129.0, 200.0])
    on = m.price(m.decode(b, 1000.0, sc.speculation)).term("ragged_attention")
    np.testing.assert_allclose(on, [128 * 40e-6 * 0.5, 129 * 40e-6, 200 * 40e-6], rtol=1e-12, atol=0)
    assert np.all(m.price(m.decode(b, 1000.0, sc.speculation)).term("spec_overhead_per_seq") == 0.0)
    assert float(np.max(m.price(m.decode(b, 1000.0)).term("ragged_attention"))) == 0.0
    one = np.array([129.0])
    on_p = m.price(m.with_prompts(one, 0.05, 2000.0, 1000.0, sc.speculation)).term("ragged_attention")
    off_p = m.price(m.with_prompts(one, 0.05, 2000.0, 1000.0)).term("ragged_attention")
    assert float(on_p[0]) == pytest.approx(129.05 * 40e-6, rel=1e-12)
    assert float(off_p[0]) == pytest.approx((1 - np.exp(-0.05)) * 129.05 * 40e-6, rel=1e-12)


def test_a_crossover_at_the_graph_limit_says_so_and_a_larger_limit_moves_it():
    """Llama-3.1-8B with Qwama-0.5B at k = 5 on an H100: the verify step's 6 tokens a request outgrow
    vLLM's 512-token graph above batch 512 / 6 = 85.33, where the speedup jumps through 1: the crossover
    is that jump, and predict names it with the flag that moves it; with graphs to 1024 tokens it lies
    further out (118.6), on the smooth curve, and nothing is said."""
    args = ["predict", "--model", "llama-3.1-8b", "--method", "draft", "--draft", "qwama-0.5b", "--k", "5",
            "--acceptance", "0.62", "--draft-tp", "1"]
    d = json.loads(run_cli(*args, "--json").stdout)
    assert d["crossover_batch"] == pytest.approx(512 / 6, abs=0.01)
    assert d["crossover_at_graph_limit"] == {"server": "speculating", "batch": 85.333, "limit": 512,
                                             "unit": "tokens", "width": 6.0}
    text = run_cli(*args).stdout
    assert ("at the speculating server's CUDA-graph limit: above it its verify step (6 tokens a request) outgrows "
            "the largest graph (512 tokens)") in text and "--max-cudagraph-capture-size" in text
    wide = json.loads(run_cli(*args, "--cuda-graph-max", "1024", "--json").stdout)
    assert wide["crossover_batch"] > 100 and wide["crossover_at_graph_limit"] is None
    assert "CUDA-graph limit:" not in run_cli(*args, "--cuda-graph-max", "1024").stdout
