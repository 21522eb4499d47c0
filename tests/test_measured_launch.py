"""`measured --server-args`: the servers' launch configurations as inputs (issue 22, item 2). What the
files say fills every setting not given, each said with its source; a value given as well must agree,
and the two servers must agree on what they share."""

import pytest

import crossover
from crossover.errors import CrossoverError

from conftest import assert_one_line_error, run_cli

SWEEP = "tests/fixtures/measured/sweep.csv"
LAUNCH = "tests/fixtures/launch"
SERVE = "tests/fixtures/server_args/vllm_serve.sh"


def test_one_launch_file_configures_the_scenario_and_says_where_each_value_came_from():
    """vllm_serve.sh: TP 4, fp8 weights (--quantization fp8) and KV cache, --enforce-eager, chunked prefill
    off, 0.85 of GPU memory, EAGLE-3 k = 3 with its head at draft TP 1; one file: both servers ran it."""
    res = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=SERVE)
    dep, spec = res.scenario.deployment, res.scenario.speculation
    assert dep.model.name == "llama-3.1-8b" and dep.tp == 4
    assert (dep.wdtype, dep.kv_dtype, dep.memory_utilization) == ("fp8", "fp8", 0.85)
    assert (dep.engine.cuda_graphs, dep.engine.speculating.cuda_graphs, dep.engine.chunked_prefill) == (
        "none", "none", False)
    assert (spec.method, spec.k, spec.draft_tp) == ("eagle3", 3, 1)
    (note,) = [d for d in res.diagnostics if d.kind == "server_args"]
    assert "tp 4 (--tensor-parallel-size 4)" in note.message and "cuda graphs none (--enforce-eager)" in note.message
    assert "max num seqs 128 (--max-num-seqs 128; sizes the CUDA-graph limit where the engine does, not the batch)" in note.message
    assert note.evidence["sources"]["tp"].endswith("--tensor-parallel-size 4")
    assert "engine" in note.evidence["engine_defaults"]
    # every server ran eagerly: no CUDA-graph limit was left to a default, there is none
    assert "cuda_graph_max" not in note.evidence["engine_defaults"] and "cuda_graph_max" not in note.message


def test_a_setting_no_file_gives_is_named_as_the_engines_default():
    """off.sh sets no CUDA-graph mode: the note says the engine's default was taken for it."""
    res = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=f"{LAUNCH}/off.sh", method="eagle3")
    (note,) = [d for d in res.diagnostics if d.kind == "server_args"]
    assert "cuda_graphs" in note.evidence["engine_defaults"] and "cuda_graphs" in note.message
    assert "cuda_graph_max" in note.evidence["engine_defaults"]  # graphs on: their limit is the default's
    with_graphs = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=SERVE)
    (note,) = [d for d in with_graphs.diagnostics if d.kind == "server_args"]
    assert "cuda_graphs" not in note.evidence["engine_defaults"]


def test_one_file_per_server_sets_each_servers_cuda_graph_mode():
    res = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=[f"{LAUNCH}/off.sh", f"{LAUNCH}/on.sh"])
    eng = res.scenario.deployment.engine
    assert (eng.cuda_graphs, eng.speculating.cuda_graphs) == ("full", "none")
    assert res.scenario.deployment.kv_dtype == "fp8" and res.scenario.speculation.method == "eagle3"
    # the speculating server runs eagerly: its steps take at least the layers' launch time
    plain = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=f"{LAUNCH}/off.sh", method="eagle3")
    assert res.predicted["on"][0] < plain.predicted["on"][0]
    assert res.predicted["off"][0] == pytest.approx(plain.predicted["off"][0], rel=1e-9)


@pytest.mark.parametrize("argv, needle", [
    (["--k", "5", "--server-args", SERVE], "contradicts the 5 given"),
    (["--tp", "2", "--server-args", SERVE], "contradicts the 2 given"),
    (["--server-args", f"{LAUNCH}/off.sh", f"{LAUNCH}/on_tp2.sh"], "the two servers must share it"),
    (["--server-args", f"{LAUNCH}/on.sh", f"{LAUNCH}/on_tp2.sh"], "both speculate"),
    (["--server-args", "tests/fixtures/server_args/not_a_config.txt"], "not a vLLM or SGLang command line"),
    (["--server-args", SERVE, SERVE, SERVE], "one per server (two files)"),
])
def test_launch_files_that_contradict_are_one_line(argv, needle):
    assert_one_line_error(run_cli("measured", "--files", SWEEP, "--hardware", "h100-sxm", *argv), needle)


def test_the_cli_reads_them_too():
    r = run_cli("measured", "--files", SWEEP, "--hardware", "h100-sxm", "--server-args", SERVE, "--json")
    assert r.returncode == 0, r.stderr
    assert "launch configuration: tests/fixtures/server_args/vllm_serve.sh: model llama-3.1-8b" in r.stderr


def test_a_data_parallel_launch_is_priced_per_rank(tmp_path):
    """`vllm serve ... -tp 1 -dp 2 -ep` for a MoE model: the scenario runs 2 data-parallel attention ranks of
    one GPU each with the experts over both; `--dp` given as well must agree with the file."""
    launch = tmp_path / "serve.sh"
    launch.write_text("vllm serve mistralai/Mixtral-8x7B-Instruct-v0.1 -tp 1 -dp 2 -ep --speculative-config "
                      "'{\"method\": \"eagle\", \"model\": \"x/EAGLE-Mixtral\", \"num_speculative_tokens\": 3}'\n")
    res = crossover.measured(files=SWEEP, hardware="h100-sxm", model="mixtral-8x7b", server_args=str(launch))
    dep = res.scenario.deployment
    assert (dep.tp, dep.data_parallel, dep.gpus, dep.expert_parallel) == (1, 2, 2, True)
    (note,) = [d for d in res.diagnostics if d.kind == "server_args"]
    assert "data parallel 2 (-dp 2)" in note.message
    with pytest.raises(CrossoverError, match="contradicts"):
        crossover.measured(files=SWEEP, hardware="h100-sxm", model="mixtral-8x7b", server_args=str(launch),
                           data_parallel=4)
    r = run_cli("measured", "--files", SWEEP, "--hardware", "h100-sxm", "--model", "mixtral-8x7b",
                "--server-args", str(launch), "--dp", "2")
    assert r.returncode == 0 and "data parallel 2 (-dp 2)" in r.stdout + r.stderr


def test_the_launch_files_running_sequence_limit_sizes_each_servers_cuda_graphs(tmp_path):
    """vLLM 0.14.1 captures up to min(max_num_seqs x (1 + k) x 2, 512) tokens: launched with --max-num-seqs
    16, the server without speculation replays graphs up to 32 tokens and the EAGLE-3 k = 3 one up to 128
    (by hand: 16 x 2, 16 x 4 x 2); the note says the limit is priced, not the batch."""
    off, on = tmp_path / "off.sh", tmp_path / "on.sh"
    serve = "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --max-num-seqs 16"
    off.write_text(serve + "\n")
    on.write_text(serve + """ --speculative-config '{"method": "eagle3", "model": "x/EAGLE3", "num_speculative_tokens": 3}'\n""")
    res = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=[str(off), str(on)])
    dep = res.scenario.deployment
    assert dep.engine.capture_limit(False) == 32 and dep.speculating_engine.capture_limit(True) == 128
    (note,) = [d for d in res.diagnostics if d.kind == "server_args"]
    assert "max num seqs 16 (--max-num-seqs 16; sizes the CUDA-graph limit where the engine does, not the batch)" \
        in note.message
    plain = crossover.measured(files=SWEEP, hardware="h100-sxm", server_args=f"{LAUNCH}/off.sh", method="eagle3")
    assert plain.scenario.deployment.speculating_engine.capture_limit(True) == 512  # 256 seqs: the 512 cap
