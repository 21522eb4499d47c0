"""Issue 22, item 2: the engine's launch configuration as an input (crossover.measurements.server_args).

Every fixture under tests/fixtures/server_args/ is hand-written from the engines' formats (vLLM's
`vllm serve` / api_server flags, its `non-default args:` and `Initializing a V1 LLM engine` log lines,
SGLang's `launch_server` flags and `server_args=ServerArgs(...)` line), and each expectation below is
written by hand from what the file says.

The flag names the reader understands are checked against the engines' released sources: the
`--speculative-*` ones against tests/data/engine_args.yaml (another extraction), the others against
tests/fixtures/server_args/engine_flags.json, which this file writes from the wheels (or their
extracted files), read as text with `ast` (nothing of the engines is imported or run):

    python tests/test_server_args.py vllm=0.11.0=/tmp/sdists/wheels/vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl \
        vllm=0.14.1=/tmp/sdists/v0141 ... sglang=0.5.23=/tmp/sdists/wheels/sglang-0.5.23-...whl \
        > tests/fixtures/server_args/engine_flags.json
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from crossover.errors import CrossoverError, FileError
from crossover.measurements import server_args as sa
from crossover.measurements.server_args import crossover_model_name, read_server_args

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures" / "server_args"
FLAGS = FIX / "engine_flags.json"
ENGINE_ARGS = HERE / "data" / "engine_args.yaml"


def _read(path: Path | str):
    return read_server_args(path)


def _write(tmp_path: Path, text: str, name: str = "launch.sh") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _one_line_error(path: Path, *words: str) -> FileError:
    with pytest.raises(FileError) as info:
        read_server_args(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    assert info.value.parameter == "server_args"
    for w in words:
        assert w in msg, (w, msg)
    return info.value


# --------------------------------------------------------------------------- each fixture format

def test_vllm_serve_command_line():
    a = _read(FIX / "vllm_serve.sh")
    assert (a.engine, a.form, a.engine_version) == ("vllm", "command line", None)
    assert a.scenario_keywords() == {
        "model": "llama-3.1-8b", "tp": 4, "method": "eagle3", "k": 3, "draft_tp": 1, "cuda_graphs": "none",
        "max_num_seqs": 128, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.85, "kv_dtype": "fp8",
        "weight_dtype": "fp8", "chunked_prefill": False}
    # the draft is an EAGLE-3 head: kept with its source, not passed as crossover's --draft
    assert a.values["draft"] == ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                 "--speculative-config model='yuhuili/EAGLE3-LLaMA3.1-Instruct-8B'")
    assert a.scenario_keywords(names=False)["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert a.values["tp"][1] == "--tensor-parallel-size 4"
    assert a.values["cuda_graphs"][1] == "--enforce-eager"
    assert a.values["chunked_prefill"][1] == "--no-enable-chunked-prefill"
    assert a.values["k"][1] == "--speculative-config num_speculative_tokens=3"
    assert a.ignored == ["--host 0.0.0.0", "--port 8000", "--disable-log-requests",
                         "--served-model-name llama-8b-eagle3"]
    assert a.unmapped == []


def test_vllm_v0_era_flags():
    a = _read(FIX / "vllm_v0_api_server.sh")
    assert a.scenario_keywords() == {
        "model": "llama-3-70b", "tp": 4, "method": "draft", "draft": "llama-3.2-1b", "k": 5, "draft_tp": 1,
        "chunked_prefill": True, "max_num_seqs": 64, "gpu_memory_utilization": 0.9}
    assert a.values["method"][1] == "--speculative-model meta-llama/Llama-3.2-1B-Instruct (from the draft's name)"
    assert a.values["k"][1] == "--num-speculative-tokens 5"
    assert a.values["draft_tp"][1] == "--speculative-draft-tensor-parallel-size 1"
    assert a.values["tp"][1] == "-tp 4"
    assert a.values["gpu_memory_utilization"][1] == "--gpu-memory-utilization=0.9"
    # --dtype is the activation dtype: a checkpoint's own quantization would make the weights narrower
    assert [(k, t) for k, t, _ in a.unmapped] == [("weight_dtype", "--dtype float16")]
    assert "--use-v2-block-manager" in a.ignored


def test_vllm_v0_ngram_and_an_unknown_draft(tmp_path):
    a = _read(_write(tmp_path, 'python -m vllm.entrypoints.openai.api_server --model m --speculative-model "[ngram]" '
                               "--num-speculative-tokens 4 --ngram-prompt-lookup-max 4"))
    assert a.scenario_keywords(names=False) == {"model": "m", "method": "ngram", "k": 4}
    assert a.ignored == ["--ngram-prompt-lookup-max 4"]
    # a draft that is no library model and has no EAGLE name: vLLM decides by its config.json
    b = _read(_write(tmp_path, "vllm serve m --speculative-model someone/medusa-heads --num-speculative-tokens 2", "b.sh"))
    assert "method" not in b.values and b.values["draft"][0] == "someone/medusa-heads"
    assert [k for k, _, _ in b.unmapped] == ["method"]


def test_vllm_compilation_config_and_ngram():
    a = _read(FIX / "vllm_compilation.sh")
    assert a.scenario_keywords() == {"model": "qwen3-8b", "tp": 2, "method": "ngram", "k": 4, "cuda_graphs": "piecewise",
                                     "max_num_seqs": 256, "chunked_prefill": True, "kv_dtype": "bf16"}
    assert a.values["cuda_graphs"][1] == "--compilation-config cudagraph_mode='PIECEWISE'"
    assert a.values["max_num_seqs"][1] == "--max_num_seqs 256"  # underscores, as vLLM's parser takes them
    assert a.values["kv_dtype"][1] == "--kv-cache-dtype auto (the model's bfloat16)"
    assert {(k, t) for k, t, _ in a.unmapped} == {("weight_dtype", "--dtype bfloat16"),
                                                  ("weight_dtype", "--quantization gptq_marlin")}
    # the shell's redirection and `&` end the command
    assert not any("server.log" in i or "2>&1" in i for i in a.ignored)


def test_sglang_command_line():
    a = _read(FIX / "sglang_launch.sh")
    assert (a.engine, a.form) == ("sglang", "command line")
    assert a.scenario_keywords() == {"model": "llama-3.1-8b", "tp": 4, "method": "eagle3", "k": 3, "cuda_graphs": "none",
                                     "max_num_seqs": 64, "gpu_memory_utilization": 0.8, "kv_dtype": "fp8",
                                     "chunked_prefill": False}
    assert a.values["tp"][1] == "--tp 4"
    assert a.values["chunked_prefill"][1] == "--chunked-prefill-size -1"
    assert a.values["draft"][0] == "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"
    assert a.unmapped == []
    assert a.ignored == ["--cuda-graph-max-bs 32 (--disable-cuda-graph: no CUDA graphs)", "--host 0.0.0.0",
                         "--port 30000", "--trust-remote-code"]


def test_bare_speculative_config_json():
    a = _read(FIX / "speculative_config.json")
    assert (a.engine, a.form) == ("vllm", "speculative config")
    assert a.scenario_keywords() == {"method": "eagle", "k": 5, "draft_tp": 1}
    assert a.values["draft"] == ("yuhuili/EAGLE-LLaMA3-Instruct-8B",
                                 "--speculative-config model='yuhuili/EAGLE-LLaMA3-Instruct-8B'")
    assert a.ignored == ["--speculative-config disable_by_batch_size=64"]


def test_vllm_log_with_non_default_args_and_the_engine_config():
    a = _read(FIX / "vllm_v0.11.0.log")
    assert (a.engine, a.form, a.engine_version) == ("vllm", "startup log", "0.11.0")
    assert a.scenario_keywords() == {"engine": "vllm", "model": "llama-3.1-8b", "tp": 4, "max_num_seqs": 128,
                                     "method": "eagle3", "k": 3, "cuda_graphs": "piecewise", "weight_dtype": "bf16",
                                     "kv_dtype": "bf16", "chunked_prefill": True}
    # what the user passed comes first (line 3); the engine's resolved config (line 7) agrees and adds the rest
    assert a.values["tp"][1] == "line 3 non-default args: tensor_parallel_size=4"
    assert a.values["k"][1] == "line 3 non-default args: speculative_config num_speculative_tokens=3"
    assert a.values["cuda_graphs"][1] == "line 3 non-default args: compilation_config cudagraph_mode=1"
    assert a.values["weight_dtype"][1] == "line 7 engine config: dtype='torch.bfloat16' (the resolved config: no quantization)"
    assert a.values["chunked_prefill"][1] == "line 7 engine config: chunked_prefill_enabled=True"
    assert a.values["engine"][1] == "line 7: Initializing a V1 LLM engine (v0.11.0)"  # the API server line has no V1/V0
    assert a.ignored == ["line 3 non-default args: host='0.0.0.0'"]


def test_vllm_log_of_a_recent_version():
    a = _read(FIX / "vllm_v0.33.0.log")
    assert a.engine_version == "0.33.0"
    assert a.scenario_keywords() == {"engine": "vllm", "model": "qwen3-32b", "tp": 2, "gpu_memory_utilization": 0.92,
                                     "kv_dtype": "fp8", "max_num_batched_tokens": 16384, "method": "draft",
                                     "draft": "qwen3-0.6b", "k": 4, "draft_tp": 2, "weight_dtype": "bf16",
                                     "chunked_prefill": True, "cuda_graphs": "full", "cuda_graph_max": 256}
    assert a.values["cuda_graph_max"][1].endswith("max_cudagraph_capture_size=256")
    # the enum's repr in the resolved compilation config
    assert a.values["cuda_graphs"][1] == "line 3 engine config: compilation_config cudagraph_mode='FULL_AND_PIECEWISE'"
    assert a.values["engine"][1] == "line 3: Initializing a V1 LLM engine (v0.33.0)"


def test_sglang_log():
    a = _read(FIX / "sglang_server.log")
    assert (a.engine, a.form) == ("sglang", "startup log")
    assert a.scenario_keywords() == {"engine": "sglang", "model": "llama-3.1-8b", "gpu_memory_utilization": 0.79,
                                     "max_num_seqs": 48, "chunked_prefill": True, "tp": 1, "method": "eagle3", "k": 5,
                                     "cuda_graphs": "full", "cuda_graph_max": 48}
    assert a.values["cuda_graphs"][1] == "line 1 server_args: disable_cuda_graph=False"
    assert {k for k, _, _ in a.unmapped} == {"weight_dtype", "kv_dtype", "max_num_batched_tokens"}
    assert a.ignored == []  # a resolved ServerArgs lists every field: only what maps is reported


# --------------------------------------------------------------------------- quoting and flag forms

@pytest.mark.parametrize("flag", [
    """--speculative-config '{"method": "eagle3", "model": "a/b-eagle3", "num_speculative_tokens": 2}'""",
    """--speculative-config='{"method":"eagle3","model":"a/b-eagle3","num_speculative_tokens":2}'""",
    """--speculative-config "{\\"method\\": \\"eagle3\\", \\"model\\": \\"a/b-eagle3\\", \\"num_speculative_tokens\\": 2}" """,
    """-sc '{"method": "eagle3", "model": "a/b-eagle3", "num_speculative_tokens": 2}'""",
    """--speculative-config.method eagle3 --speculative-config.model=a/b-eagle3 --speculative-config.num_speculative_tokens 2""",
    """--speculative_config {\\"method\\":\\"eagle3\\",\\"model\\":\\"a/b-eagle3\\",\\"num_speculative_tokens\\":2}""",
])
def test_json_in_a_flag(tmp_path, flag):
    a = _read(_write(tmp_path, f"vllm serve m \\\n  {flag} --port 8000\n"))
    assert a.scenario_keywords(names=False) == {"model": "m", "method": "eagle3", "k": 2}
    assert a.values["draft"][0] == "a/b-eagle3"
    assert a.ignored == ["--port 8000"]


def test_json_with_quotes_inside_strings(tmp_path):
    p = _write(tmp_path, """vllm serve "my org/it's a model" --speculative-config '{"method": "ngram", """
                         """"num_speculative_tokens": 3, "note": "say \\"hi\\", it'"'"'s ok"}'""")
    a = _read(p)
    assert a.values["model"][0] == "my org/it's a model"
    assert a.values["k"][0] == 3
    assert a.ignored == ["""--speculative-config note='say "hi", it\\'s ok'"""]


@pytest.mark.parametrize("flags, mode", [
    ("-O3", "full"), ("-O 0", "none"), ("-O0", "none"), ("--optimization-level 1", "piecewise"),
    ("--optimization-level=2", "full"), ("""-O '{"cudagraph_mode": "FULL_DECODE_ONLY"}'""", "full"),
    ("""-cc '{"cudagraph_mode": "NONE"}'""", "none"), ("--compilation-config.cudagraph_mode=PIECEWISE", "piecewise"),
    ("-O.cudagraph_mode FULL", "full"), ("""--compilation-config '{"cudagraph_mode": [2, 1]}'""", "full"),
])
def test_cuda_graph_forms(tmp_path, flags, mode):
    a = _read(_write(tmp_path, f"vllm serve m {flags}"))
    assert a.values["cuda_graphs"][0] == mode, a.values


def test_ambiguous_and_overridden_graph_modes(tmp_path):
    a = _read(_write(tmp_path, "vllm serve m -O2"))
    assert "cuda_graphs" not in a.values and [k for k, _, _ in a.unmapped] == ["cuda_graphs"]
    assert "0.12" in a.unmapped[0][2]
    b = _read(_write(tmp_path, """vllm serve m --enforce-eager --compilation-config '{"cudagraph_mode": "FULL"}'""", "b.sh"))
    assert b.values["cuda_graphs"] == ("none", "--enforce-eager")  # eager wins, as in vLLM
    assert any("enforce-eager" in i for i in b.ignored)


def test_docker_image_and_sglang_serve(tmp_path):
    a = _read(_write(tmp_path, "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model m -tp 2 "
                               "--max-num-seqs 32"))
    assert (a.engine, a.engine_version) == ("vllm", "0.11.0")
    assert a.scenario_keywords(names=False) == {"model": "m", "tp": 2, "max_num_seqs": 32}
    b = _read(_write(tmp_path, "sglang serve org/m --tensor-parallel-size 2 --speculative-algorithm NEXTN "
                               "--speculative-draft-model-path org/m-nextn --speculative-num-steps 1 "
                               "--cuda-graph-backend-decode breakable", "b.sh"))
    assert b.scenario_keywords(names=False) == {"model": "org/m", "tp": 2, "method": "mtp", "k": 1, "cuda_graphs": "piecewise"}


def test_sglang_trees_and_ngram_are_not_read_as_chains(tmp_path):
    a = _read(_write(tmp_path, "python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE "
                               "--speculative-draft-model-path d --speculative-num-steps 5 --speculative-eagle-topk 8 "
                               "--speculative-num-draft-tokens 32"))
    assert a.values["k"][0] == 5 and ("k", "speculative_eagle_topk=8") in [(k, t) for k, t, _ in a.unmapped]
    b = _read(_write(tmp_path, "python -m sglang.launch_server --model-path m --speculative-algorithm NGRAM "
                               "--speculative-num-draft-tokens 12", "b.sh"))
    assert b.values["method"][0] == "ngram" and "k" not in b.values
    assert [k for k, _, _ in b.unmapped] == ["k"]


def test_dtypes_map_only_what_is_unambiguous(tmp_path):
    cases = {"--quantization awq": ("weight_dtype", "int4"), "-q modelopt_fp4": ("weight_dtype", "fp4"),
             "--quantization mxfp4": ("weight_dtype", "mxfp4"), "--kv-cache-dtype fp8_e5m2": ("kv_dtype", "fp8"),
             "--kv-cache-dtype fp8_e4m3": ("kv_dtype", "fp8")}
    for i, (flag, (key, value)) in enumerate(cases.items()):
        assert _read(_write(tmp_path, f"vllm serve m {flag}", f"{i}.sh")).values[key][0] == value, flag
    for i, flag in enumerate(["--quantization gptq", "--quantization bitsandbytes", "--kv-cache-dtype auto",
                              "--quantization compressed-tensors"]):
        a = _read(_write(tmp_path, f"vllm serve m {flag}", f"u{i}.sh"))
        assert not {"weight_dtype", "kv_dtype"} & set(a.values) and len(a.unmapped) == 1, flag


# --------------------------------------------------------------------------- provenance and names

def test_provenance_says_engine_default_for_what_the_file_leaves_out():
    a = _read(FIX / "vllm_compilation.sh")
    rows = {r["input"]: r for r in a.provenance()}
    assert list(rows) == list(sa.KEYWORDS)
    assert rows["k"] == {"input": "k", "value": 4, "source": """--speculative-config num_speculative_tokens=4"""}
    assert rows["gpu_memory_utilization"] == {"input": "gpu_memory_utilization", "value": None, "source": "engine default"}
    assert rows["weight_dtype"]["value"] is None
    assert rows["weight_dtype"]["source"].startswith("engine default (not mapped: --dtype bfloat16: ")
    assert "--quantization gptq_marlin: its weight width is the checkpoint's" in rows["weight_dtype"]["source"]


def test_crossover_model_names(tmp_path):
    assert crossover_model_name("meta-llama/Llama-3.1-8B") == "llama-3.1-8b"  # hf_repo
    assert crossover_model_name("meta-llama/llama-3.1-8b-instruct") == "llama-3.1-8b"  # an alias, any case
    assert crossover_model_name("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B") == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    (tmp_path / "mine.yaml").write_text("name: my-model\nhf_repo: 'me/My-Model'\naliases: [me/alias-one, 'me/two']\n")
    assert crossover_model_name("me/two", dirs=[tmp_path]) == "my-model"
    assert crossover_model_name("meta-llama/Llama-3.1-8B", dirs=[tmp_path]) == "meta-llama/Llama-3.1-8B"


# --------------------------------------------------------------------------- one-line errors

def test_a_contradicting_log_is_one_line():
    err = _one_line_error(FIX / "contradicting.log", "contradicts itself", "k is 3", "and 5", "line 2", "line 3")
    assert isinstance(err, CrossoverError)


def test_a_contradicting_command_line_is_one_line(tmp_path):
    p = _write(tmp_path, """vllm serve m --speculative-config '{"method": "eagle", "model": "x/eagle-y", """
                         """"num_speculative_tokens": 3}' --num-speculative-tokens 5""")
    _one_line_error(p, "contradicts itself: k is 3", "and 5 (--num-speculative-tokens 5)")
    _one_line_error(_write(tmp_path, "python -m sglang.launch_server --model-path m --tp 2 --tp-size 4", "b.sh"),
                    "tp is 2 (--tp 2) and 4 (--tp-size 4)")


def test_an_unknown_format_is_one_line(tmp_path):
    _one_line_error(FIX / "not_a_config.txt", "not a vLLM or SGLang command line")
    _one_line_error(_write(tmp_path, '{"requests": 10, "throughput": 3.2}', "bench.json"), "no --speculative-config")
    _one_line_error(_write(tmp_path, '{"method": "eagle"', "broken.json"), "no JSON")
    _one_line_error(_write(tmp_path, "vllm serve m --speculative-config '{\"method\": 1", "q.sh"), "quote is not closed")
    _one_line_error(_write(tmp_path, "vllm serve a\nvllm serve b --port 1", "two.sh"), "more than one server launch")
    _one_line_error(_write(tmp_path, "vllm serve m --max-num-seqs lots", "n.sh"), "max_num_seqs must be an integer")
    _one_line_error(_write(tmp_path, "vllm serve m --speculative-config '{nope'", "j.sh"), "not JSON")
    _one_line_error(tmp_path / "missing.sh", "no such file")
    _one_line_error(_write(tmp_path, "python -m sglang.launch_server --model-path m --chunked-prefill-size lots", "c.sh"),
                    "a value cannot be read")
    deep = "non-default args: {" + "'a': {" * 3000 + "x" + "}" * 3001
    _one_line_error(_write(tmp_path, deep, "deep.log"), "a value cannot be read (RecursionError")


def test_expert_and_data_parallel_are_read_and_said(tmp_path):
    """vLLM 0.14.1 arg_utils.py --enable-expert-parallel/-ep and --data-parallel-size/-dp; SGLang 0.5.5
    server_args.py --ep-size/--ep and --dp-size/--data-parallel-size, --enable-dp-attention (flags read in the
    released wheels). Expert parallelism and data-parallel attention become crossover's keywords (SGLang's
    --tp-size counts every rank's GPUs: crossover's --tp is a rank's); SGLang's --dp-size without
    data-parallel attention (replicas behind its router) is said as not modelled, never dropped."""
    from crossover.api.launch import launch_keywords

    a = _read(_write(tmp_path, "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -ep --data-parallel-size 2 --port 1"))
    kw = a.scenario_keywords()
    assert kw["expert_parallel"] is True and a.values["expert_parallel"][1] == "-ep"
    assert (kw["tp"], kw["data_parallel"]) == (8, 2) and a.unmapped == [] and a.ignored == ["--port 1"]
    one = _read(_write(tmp_path, "vllm serve m --tensor-parallel-size 4 -dp 1 --no-enable-expert-parallel"))
    assert one.scenario_keywords()["expert_parallel"] is False and one.unmapped == [] and one.ignored == []
    assert "data_parallel" not in one.values
    s = _read(_write(tmp_path, "python -m sglang.launch_server --model-path m --tp 8 --ep 8 --dp-size 8 "
                               "--enable-dp-attention"))
    kw = s.scenario_keywords()
    assert (kw["expert_parallel"], kw["tp"], kw["data_parallel"]) == (True, 1, 8)
    assert s.values["tp"][1] == "--tp 8, over 8 data-parallel attention ranks" and s.unmapped == [] and s.ignored == []
    router = _read(_write(tmp_path, "python -m sglang.launch_server --model-path m --tp 2 --dp-size 4"))
    assert router.scenario_keywords()["tp"] == 2 and "data_parallel" not in router.values
    assert [(k, t) for k, t, _ in router.unmapped] == [("tp", "--dp-size 4")]
    assert "4 data-parallel replicas behind SGLang's router" in router.unmapped[0][2]
    with pytest.raises(FileError, match="data_parallel_size must be an integer"):
        _read(_write(tmp_path, "vllm serve m -dp two"))
    with pytest.raises(FileError, match="tp_size 8 does not divide by dp_size 3"):
        _read(_write(tmp_path, "python -m sglang.launch_server --model-path m --tp 8 --dp-size 3 --enable-dp-attention"))
    extra, note = launch_keywords([_write(tmp_path, "vllm serve m -tp 8 -ep -dp 2")], {"expert_parallel": False})
    assert extra == {"tp": 8, "expert_parallel": True, "data_parallel": 2}
    assert "expert parallel True (-ep)" in note.message and "data parallel 2 (-dp 2)" in note.message


# --------------------------------------------------------------------------- flags against the sources

# Names the reader takes that are no command-line flag of the versions extracted: vLLM serve's
# positional model and a field of the engine-config log line (VllmConfig.__str__ up to 0.2x); the
# V0-era speculative flags, replaced by --speculative-config before 0.11.0 (the oldest extracted).
NOT_FLAGS = {"vllm": {"model_tag", "chunked_prefill_enabled"}, "sglang": set()}
V0_ERA = {"--speculative-model", "--num-speculative-tokens", "--speculative-draft-tensor-parallel-size"}


def _spellings(engine: str) -> set[str]:
    """Every command-line spelling the reader understands, as the engine's own parser names it."""
    names = set(sa.VLLM_FLAGS if engine == "vllm" else sa.SGLANG_FLAGS) - NOT_FLAGS[engine]
    out = {"--" + n.replace("_", "-") for n in names}
    if engine == "vllm":  # short aliases; -O (vLLM <= 0.11: --compilation-config's alias)
        return out | {"-" + a for a in sa.ALIASES["vllm"]} | {"-O"}
    return out | {"--" + a.replace("_", "-") for a in sa.ALIASES["sglang"] if a != "tp"}  # --tp: an abbreviation


def _engine_args_flags(engine: str) -> set[str]:
    facts = yaml.safe_load(ENGINE_ARGS.read_text(encoding="utf-8"))[engine]
    return {n for v in facts.values() for f, d in v["flags"].items() for n in (f, *d.get("aliases", []))}


def test_every_flag_read_exists_in_a_released_version():
    flags = json.loads(FLAGS.read_text(encoding="utf-8"))
    assert set(flags["vllm"]) >= {"0.11.0", "0.14.1", "0.33.0"} and set(flags["sglang"]) >= {"0.5.1", "0.5.23"}
    for engine in ("vllm", "sglang"):
        released = _engine_args_flags(engine) | {f for v in flags[engine].values() for f in v["flags"]}
        missing = sorted(_spellings(engine) - released - V0_ERA)
        assert not missing, f"{engine}: read but in no extracted version: {missing}"
    # the V0-era flags are really gone from every version extracted
    assert not V0_ERA & {f for v in flags["vllm"].values() for f in v["flags"]}
    # --no-enable-chunked-prefill is argparse's BooleanOptionalAction of --enable-chunked-prefill
    assert all("--enable-chunked-prefill" in v["boolean_optional"] for v in flags["vllm"].values())


def test_sglang_tp_abbreviates_one_flag():
    """`--tp` is argparse's prefix match (allow_abbrev) of --tp-size: unambiguous where it is the only --tp* flag."""
    flags = json.loads(FLAGS.read_text(encoding="utf-8"))["sglang"]
    assert all(v["prefix --tp"] == ["--tp-size"] for v in flags.values()), {k: v["prefix --tp"] for k, v in flags.items()}


def test_the_flags_file_is_what_the_extractor_writes():
    """Re-extract when the sources are at hand (CROSSOVER_ENGINE_SOURCES: the `engine=version=path` list
    of the data file's header); otherwise check that every entry cites its source."""
    import os

    flags = json.loads(FLAGS.read_text(encoding="utf-8"))
    for engine in ("vllm", "sglang"):
        for version, d in flags[engine].items():
            assert d["source"].startswith(f"{engine} {version}: "), d["source"]
    specs = os.environ.get("CROSSOVER_ENGINE_SOURCES")
    if not specs:
        pytest.skip("set CROSSOVER_ENGINE_SOURCES to the engine=version=path list to re-extract")
    assert dump(extract(specs.split())) == FLAGS.read_text(encoding="utf-8")


def _files(path: str, wanted) -> dict[str, str]:
    """The source files of a wheel (a zip) or of a folder of its extracted files that `wanted` accepts."""
    p = Path(path)
    if p.is_dir():
        return {str(f.relative_to(p)): f.read_text(encoding="utf-8") for f in sorted(p.rglob("*.py"))
                if wanted(str(f.relative_to(p)))}
    with zipfile.ZipFile(p) as z:
        return {n: z.read(n).decode() for n in sorted(z.namelist()) if wanted(n)}


def _const(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _flags_of(files: dict[str, str]) -> tuple[set[str], set[str]]:
    """Every option string of `add_argument(...)` calls and of SGLang's `name: A[T, Arg(...)]` fields
    (--name-with-dashes or cli_name, and aliases; no_cli excluded), and those with BooleanOptionalAction."""
    flags, boolean_optional = set(), set()
    for text in files.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
                flags.update(names)
                if any(ast.unparse(k.value).endswith("BooleanOptionalAction") for k in node.keywords if k.arg == "action"):
                    boolean_optional.update(names)
            elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                  and isinstance(node.annotation, ast.Subscript) and ast.unparse(node.annotation.value) in ("A", "Annotated")
                  and isinstance(node.annotation.slice, ast.Tuple) and len(node.annotation.slice.elts) >= 2):
                meta = node.annotation.slice.elts[1]
                kw = {k.arg: k.value for k in meta.keywords} if isinstance(meta, ast.Call) else {}
                if _const(kw.get("no_cli", ast.Constant(False))):
                    continue
                flags.add(_const(kw["cli_name"]) if "cli_name" in kw else "--" + node.target.id.replace("_", "-"))
                flags.update(_const(kw["aliases"]) or [] if "aliases" in kw else [])
    return flags, boolean_optional


def _bool_fields(files: dict[str, str]) -> set[str]:
    """vLLM's `**kwargs["name"]` flags whose EngineArgs field is a bool: get_kwargs gives them
    BooleanOptionalAction (vllm/engine/arg_utils.py, `contains_type(type_hints, bool)`)."""
    out = set()
    for text in files.values():
        tree = ast.parse(text)
        cls = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"), None)
        bools = {st.target.id for st in (cls.body if cls else []) if isinstance(st, ast.AnnAssign)
                 and isinstance(st.target, ast.Name) and "bool" in ast.unparse(st.annotation)}
        out |= {"--" + b.replace("_", "-") for b in bools}
    return out


def extract(specs: list[str]) -> dict[str, Any]:
    """{engine: {version: {source, flags (those the reader understands), ...}}} from `engine=version=path`."""
    out: dict[str, Any] = {"extracted_by": "python tests/test_server_args.py ENGINE=VERSION=WHEEL_OR_FOLDER ... "
                                           "(this file's docstring)", "vllm": {}, "sglang": {}}
    for spec in specs:
        engine, version, path = spec.split("=", 2)
        if engine == "vllm":
            files = _files(path, lambda n: n == "vllm/engine/arg_utils.py")
        else:
            files = _files(path, lambda n: n == "sglang/srt/server_args.py"
                           or (n.startswith("sglang/srt/arg_groups/fields/") and n.endswith(".py")))
        flags, boolean_optional = _flags_of(files)
        entry = {"source": f"{engine} {version}: " + ", ".join(files), "flags": sorted(flags & _spellings(engine)
                                                                                      | flags & V0_ERA)}
        if engine == "vllm":
            entry["boolean_optional"] = sorted((boolean_optional | _bool_fields(files) & flags) & _spellings(engine))
        else:
            entry["prefix --tp"] = sorted(f for f in flags if f.startswith("--tp"))
        out[engine][version] = entry
    for engine in ("vllm", "sglang"):
        out[engine] = dict(sorted(out[engine].items(), key=lambda kv: tuple(int(x) for x in kv[0].split("."))))
    return out


def dump(facts: dict[str, Any]) -> str:
    return json.dumps(facts, indent=1) + "\n"


if __name__ == "__main__":
    sys.stdout.write(dump(extract(sys.argv[1:])))



def test_async_scheduling_comes_from_the_server_without_speculation(tmp_path):
    """vLLM's --[no-]async-scheduling (0.14.1 arg_utils.py; a BooleanOptionalAction) and the startup log's
    resolved 'Asynchronous scheduling is enabled/disabled.' (config/vllm.py): the server without
    speculation's decides; the speculating server's follows its method (vLLM turns it off for n-gram,
    draft models and Medusa), so a lone n-gram server saying disabled tells nothing of the other; a
    lone EAGLE server's setting is both servers'."""
    from crossover.api.launch import launch_keywords

    off = _write(tmp_path, "vllm serve meta-llama/Llama-3.1-8B --no-async-scheduling", "off.sh")
    on = _write(tmp_path, "vllm serve meta-llama/Llama-3.1-8B --speculative-config "
                          "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'", "on.sh")
    assert read_server_args(off).values["async_scheduling"] == (False, "--no-async-scheduling")
    extra, note = launch_keywords([off, on], {})
    assert extra["async_scheduling"] is False and "async scheduling False (--no-async-scheduling)" in note.message
    log = _write(tmp_path, "INFO 12-01 10:00:00 [vllm.py:632] Asynchronous scheduling is disabled.\n"
                           "(APIServer pid=1) INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B'}\n", "off.log")
    assert launch_keywords([log, on], {})[0]["async_scheduling"] is False
    ngram_log = _write(tmp_path, "INFO Asynchronous scheduling is disabled.\nINFO non-default args: {'model': 'm', "
                                 "'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3}}\n", "ngram.log")
    extra, note = launch_keywords([ngram_log], {})
    assert "async_scheduling" not in extra and "the speculating server's, which vLLM sets by the method" in note.message
    eagle = _write(tmp_path, "vllm serve m --no-async-scheduling --speculative-config "
                             "'{\"method\": \"eagle3\", \"model\": \"h\", \"num_speculative_tokens\": 3}'", "eagle.sh")
    assert launch_keywords([eagle], {})[0]["async_scheduling"] is False
    with pytest.raises(CrossoverError, match="contradicts the True given"):
        launch_keywords([off, on], {"async_scheduling": True})


def test_sglang_disable_overlap_schedule_is_async_scheduling_off(tmp_path):
    """SGLang's --disable-overlap-schedule (server_args.py, every 0.5.x extracted) turns its overlap scheduler
    off for the server: crossover's async scheduling off. The resolved ServerArgs log's value is not read:
    up to 0.5.10 speculation itself sets it True."""
    from crossover.api.launch import launch_keywords

    off = _write(tmp_path, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                           "--disable-overlap-schedule", "off.sh")
    assert read_server_args(off).values["async_scheduling"] == (False, "--disable-overlap-schedule")
    assert launch_keywords([off], {})[0]["async_scheduling"] is False
    log = _write(tmp_path, "[2025-01-01] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
                           "disable_overlap_schedule=True, speculative_algorithm='EAGLE3')\n", "on.log")
    assert "async_scheduling" not in read_server_args(log).values
