"""Issue 24: `crossover sweep-plan`, the two-server sweep the model plans.

Done when: the plan for the README's worked example (llama-3.1-8b on h100-sxm, EAGLE-3) puts at
least half its levels inside the model's crossover interval; its request counts reproduce the stated
half-width in the simulator (`crossover.simulate` at the planned counts and seed); the emitted
commands use only documented flags; and `crossover measured` reads the files they name with no
extra flags.

The documented flags live in tests/data/client_args.yaml. They were extracted from the released
wheels (the clients' code is not vendored) by this file, with `ast` only (nothing imported or run):

    pip download --no-deps guidellm==0.6.1 aiperf==0.4.0 -d /tmp/clients
    pip download --no-deps vllm==0.14.1 sglang==0.5.11 -d /tmp/wheels
    python tests/test_sweep_plan.py /tmp/clients/guidellm-0.6.1-py3-none-any.whl \\
        /tmp/clients/aiperf-0.4.0-py3-none-any.whl /tmp/wheels/vllm-0.14.1-*.whl \\
        /tmp/wheels/sglang-0.5.11-*.whl > tests/data/client_args.yaml
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import sys
import zipfile
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "client_args.yaml"


# ------------------------------------------------------------------------------------ extraction

def _strings(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def _flags_of_add_argument(tree: ast.AST) -> list[str]:
    """The option strings of every `*.add_argument("--x", ...)` call."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument":
            out += [s for s in _strings(n) if s.startswith("-")]
    return out


def _choices_of(tree: ast.AST, flag: str) -> list[str] | None:
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument" and flag in _strings(n):
            for kw in n.keywords:
                if kw.arg == "choices" and isinstance(kw.value, (ast.List, ast.Tuple)):
                    return [ast.literal_eval(e) for e in kw.value.elts]
    return None


def _dict_keys(tree: ast.AST, name: str) -> list[str]:
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            target = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if isinstance(target, ast.Name) and target.id == name and isinstance(n.value, ast.Dict):
                return [k.value for k in n.value.keys if isinstance(k, ast.Constant)]
    raise AssertionError(f"no dict {name}")


def _literal_values(tree: ast.AST, name: str) -> list[str]:
    """The strings of `Name = Annotated[Literal[...], ...]` (or `Literal[...]`)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name:
            return [c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and not c.value[:1].isupper()]
    raise AssertionError(f"no Literal {name}")


def _enum_values(tree: ast.AST, cls: str) -> list[str]:
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef) and n.name == cls:
            return [s.value.value for s in n.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)
                    and isinstance(s.value.value, str)]
    raise AssertionError(f"no enum {cls}")


def _click_flags(tree: ast.AST, group: str, command: str) -> list[str]:
    """The option strings of the click options decorating `@<group>.command("<command>")`."""
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef):
            decos = [d for d in n.decorator_list if isinstance(d, ast.Call)]
            if any(getattr(d.func, "attr", None) == "command" and getattr(d.func.value, "id", None) == group
                   and command in _strings(d) for d in decos):
                return [s for d in decos if getattr(d.func, "attr", None) == "option" for s in _strings(d)
                        if s.startswith("-")]
    raise AssertionError(f"no {group} {command} command")


def _cli_parameter_names(trees: list[ast.AST]) -> list[str]:
    """AIPerf's flags: the `name=` of every CLIParameter(...) in its config models."""
    out = []
    for tree in trees:
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "CLIParameter":
                for kw in n.keywords:
                    if kw.arg == "name":
                        v = ast.literal_eval(kw.value)
                        out += list(v) if isinstance(v, (tuple, list)) else [v]
    return [x for x in out if x.startswith("-")]


def _dataclass_flags(tree: ast.AST, cls: str) -> list[str]:
    """vLLM's FrontendArgs: one `--field-name` per annotated field (cli_args.py adds them so)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef) and n.name == cls:
            return ["--" + s.target.id.replace("_", "-") for s in n.body if isinstance(s, ast.AnnAssign)
                    and isinstance(s.target, ast.Name)]
    raise AssertionError(f"no class {cls}")


def extract(wheels: list[str]) -> dict[str, Any]:
    """The documented flags of each client and server, from its wheel."""
    def version(whl: str) -> str:
        return Path(whl).name.split("-")[1]

    found = {Path(w).name.split("-")[0]: w for w in wheels}
    out: dict[str, Any] = {"clients": {}, "servers": {}}
    with zipfile.ZipFile(found["vllm"]) as z:
        read = {f: ast.parse(z.read(f)) for f in ("vllm/benchmarks/serve.py", "vllm/benchmarks/datasets.py",
                                                   "vllm/benchmarks/lib/endpoint_request_func.py",
                                                   "vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")}
    serve, datasets = read["vllm/benchmarks/serve.py"], read["vllm/benchmarks/datasets.py"]
    out["clients"]["vllm-bench"] = {
        "command": "vllm bench serve", "package": "vllm", "version": version(found["vllm"]),
        "files": ["vllm/benchmarks/serve.py", "vllm/benchmarks/datasets.py"],
        "how": "the option strings of every add_argument call",
        "flags": sorted(set(_flags_of_add_argument(serve) + _flags_of_add_argument(datasets))),
        "choices": {"--dataset-name": _choices_of(datasets, "--dataset-name"),
                    "--backend": _dict_keys(read["vllm/benchmarks/lib/endpoint_request_func.py"],
                                            "ASYNC_REQUEST_FUNCS")}}
    out["servers"]["vllm"] = {
        "command": "vllm serve", "package": "vllm", "version": version(found["vllm"]),
        "files": ["vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py"],
        "how": "EngineArgs' add_argument option strings, and FrontendArgs' fields as --field-name",
        "flags": sorted(set(_flags_of_add_argument(read["vllm/engine/arg_utils.py"])
                            + _flags_of_add_argument(read["vllm/entrypoints/openai/cli_args.py"])
                            + _dataclass_flags(read["vllm/entrypoints/openai/cli_args.py"], "FrontendArgs")))}
    with zipfile.ZipFile(found["guidellm"]) as z:
        main = ast.parse(z.read("guidellm/__main__.py"))
        profiles = ast.parse(z.read("guidellm/benchmark/profiles.py"))
        strategies = ast.parse(z.read("guidellm/scheduler/strategies.py"))
    out["clients"]["guidellm"] = {
        "command": "guidellm benchmark run", "package": "guidellm", "version": version(found["guidellm"]),
        "files": ["guidellm/__main__.py", "guidellm/benchmark/profiles.py", "guidellm/scheduler/strategies.py"],
        "how": "the click options of @benchmark.command('run'); --profile's choices: ProfileType | StrategyType",
        "flags": sorted(set(_click_flags(main, "benchmark", "run"))),
        "choices": {"--profile": sorted(set(_literal_values(profiles, "ProfileType")
                                              + _literal_values(strategies, "StrategyType")))}}
    with zipfile.ZipFile(found["aiperf"]) as z:
        configs = sorted(f for f in z.namelist() if re.fullmatch(r"aiperf/common/config/\w+\.py", f))
        trees = [ast.parse(z.read(f)) for f in configs]
        cli = ast.parse(z.read("aiperf/cli.py"))
        enums = {f: ast.parse(z.read(f)) for f in ("aiperf/common/enums/plugin_enums.py",
                                                   "aiperf/common/enums/timing_enums.py")}
    assert any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "command"
               and any(k.arg == "name" and getattr(k.value, "value", None) == "profile" for k in n.keywords)
               for n in ast.walk(cli)), "aiperf has no profile command"
    out["clients"]["aiperf"] = {
        "command": "aiperf profile", "package": "aiperf", "version": version(found["aiperf"]),
        "files": ["aiperf/cli.py", *configs],
        "how": "the name= of every CLIParameter in the config models (aiperf/cli.py: app.command(name='profile'))",
        "flags": sorted(set(_cli_parameter_names(trees))),
        "choices": {"--endpoint-type": _enum_values(enums["aiperf/common/enums/plugin_enums.py"], "EndpointType"),
                    "--request-rate-mode": _enum_values(enums["aiperf/common/enums/timing_enums.py"],
                                                        "RequestRateMode")}}
    with zipfile.ZipFile(found["sglang"]) as z:
        args = ast.parse(z.read("sglang/srt/server_args.py"))
        assert "sglang/launch_server.py" in z.namelist()
    out["servers"]["sglang"] = {
        "command": "python -m sglang.launch_server", "package": "sglang", "version": version(found["sglang"]),
        "files": ["sglang/srt/server_args.py"], "how": "the option strings of every add_argument call",
        "flags": sorted(set(_flags_of_add_argument(args)))}
    return out


HEADER = """\
# Documented flags of the benchmark clients and servers `crossover sweep-plan` writes commands for
# (issue 24), for tests/test_sweep_plan.py, which checks every emitted flag against them.
# Extracted, not vendored: read with `ast` from the released wheels on PyPI, nothing imported or run:
#   pip download --no-deps guidellm==0.6.1 aiperf==0.4.0 -d /tmp/clients
#   pip download --no-deps vllm==0.14.1 sglang==0.5.11 -d /tmp/wheels
#   python tests/test_sweep_plan.py /tmp/clients/guidellm-0.6.1-py3-none-any.whl \\
#       /tmp/clients/aiperf-0.4.0-py3-none-any.whl /tmp/wheels/vllm-0.14.1-*.whl \\
#       /tmp/wheels/sglang-0.5.11-*.whl > tests/data/client_args.yaml
# Why these releases: GuideLLM 0.6 is the last with `guidellm benchmark` (0.7 moved to `guidellm run`
# with registry-built options) and writes the v0.5-v0.6 report layout crossover measured reads; AIPerf
# 0.4 writes input_config.loadgen (its level) in profile_export_aiperf.json (0.13's config has none);
# vLLM 0.14.1 is the release the vllm engine profile covers; SGLang 0.5.11 the last whose server_args.py
# declares its flags with add_argument.
# Each entry names the package, version, the files read and how (`how`); `choices` lists the values
# of the flags whose values the test checks too.
"""


# ------------------------------------------------------------------------------------ the tests

import copy  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402
from conftest import FIXTURES, assert_one_line_error, run_cli  # noqa: E402

import crossover  # noqa: E402
from crossover.api.records import Run  # noqa: E402

ARGS = yaml.safe_load(DATA.read_text()) if DATA.exists() else None
ENGINE_ARGS = yaml.safe_load((Path(__file__).parent / "data" / "engine_args.yaml").read_text())
EXAMPLE = dict(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3")  # README.md, "Worked example"
EXAMPLE_ARGV = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3"]
_PLANS: dict[str, Any] = {}


def _plan(key: str = "example", **kw):
    """One plan per key for the whole module (each takes a second or two to size)."""
    if key not in _PLANS:
        _PLANS[key] = crossover.sweep_plan(**{**EXAMPLE, **kw})
    return _PLANS[key]


def test_the_worked_example_puts_at_least_half_its_levels_inside_the_models_crossover_interval():
    plan = _plan()
    d = plan.to_dict()
    low, high = plan.interval
    # the model's interval: the closed form's crossover at the ends of the assumed acceptance's range
    at_low = crossover.predict(**EXAMPLE, acceptance=crossover.defaults.ACCEPTANCE_RANGE[0], prompt_len=1024,
                               output_len=128, batches=[1, 256]).crossover_batch
    at_high = crossover.predict(**EXAMPLE, acceptance=crossover.defaults.ACCEPTANCE_RANGE[1], prompt_len=1024,
                                output_len=128, batches=[1, 256]).crossover_batch
    # the top: the memory limit, 342 (vLLM V1's default on an H100 runs up to 1024 requests, no cap below it)
    assert low == pytest.approx(at_low, rel=1e-3) and at_high is None and high == d["top"] == 342
    loads = [lv["load"] for lv in d["levels"]]
    inside = [x for x in loads if low <= x <= high]
    assert loads == sorted(set(loads)) and loads[0] == 1 and loads[-1] == 342
    assert len(loads) == crossover.defaults.DEFAULT_SWEEP_PLAN_LEVELS
    assert 2 * len(inside) >= len(loads) and d["inside_interval"] == len(inside)
    assert all(lv["inside_interval"] == (low <= lv["load"] <= high) for lv in d["levels"])
    below = [x for x in loads if x < low]  # sparse where the model is sure: the seed's powers of two
    assert below and all(x & (x - 1) == 0 for x in below)


def test_the_planned_requests_reproduce_the_stated_half_width_in_the_simulator():
    """`crossover simulate` at each planned level with the planned requests and seed gives the on/off
    throughput ratio the plan states, its 95% interval within the target half-width."""
    d = _plan().to_dict()
    target = d["half_width"]
    sc = crossover.scenario(**EXAMPLE, prompt_len=d["prompt_len"], output_len=d["output_len"])
    for lv in d["levels"]:
        res = crossover.simulate("random-1024-128", concurrency=[lv["load"]], scenario=sc,
                                 run=Run(num_prompts=lv["requests"], seed=d["seed"]))
        level = res.sweep.levels[0]
        on, off = level.on, level.off
        low = on["output_throughput_ci_low"] / off["output_throughput_ci_high"]
        high = on["output_throughput_ci_high"] / off["output_throughput_ci_low"]
        assert (high - low) / 2 <= target, lv
        assert (high - low) / 2 == pytest.approx(lv["half_width"], abs=1e-5)
        assert on["output_throughput"] / off["output_throughput"] == pytest.approx(lv["ratio"], abs=1e-4)
        assert lv["warmup"] == int(0.1 * lv["requests"]) and lv["measured_requests"] == lv["requests"] - lv["warmup"]


def test_a_tighter_half_width_takes_more_requests_and_still_holds():
    d = _plan("tight", sweep={"half_width": 0.01, "levels": 4}).to_dict()
    wide = {lv["load"]: lv["requests"] for lv in _plan().to_dict()["levels"]}
    assert all(lv["half_width"] <= 0.01 or not lv["target_met"] for lv in d["levels"])
    assert any(lv["requests"] > wide.get(lv["load"], 0) for lv in d["levels"])


# ---- every emitted flag is documented (tests/data/client_args.yaml)

def _tool(words: list[str]) -> tuple[str, str, int]:
    """(kind, name, index of the first flag) of a command line by its program."""
    for kind, table in ARGS.items():
        for name, entry in table.items():
            prog = entry["command"].split()
            if words[:len(prog)] == prog:
                return kind, name, len(prog)
    raise AssertionError(f"no documented program runs {' '.join(words[:3])}")


def _negated(kind: str, name: str, entry: dict, flag: str) -> bool:
    """`--no-X` of a vLLM flag `--X` that its release declares with argparse's BooleanOptionalAction
    (tests/fixtures/server_args/engine_flags.json, extracted from the same wheel)."""
    if not (kind == "servers" and name == "vllm" and flag.startswith("--no-")):
        return False
    flags = json.loads((Path(__file__).parent / "fixtures" / "server_args" / "engine_flags.json").read_text())
    return "--" + flag[5:] in flags["vllm"][str(entry["version"])]["boolean_optional"]


def undocumented(line: str) -> list[str]:
    """The flags (and values of flags with known choices) of a command line its release does not
    document; the speculative config's keys against vLLM 0.14.1's SpeculativeConfig."""
    words = shlex.split(line)
    kind, name, start = _tool(words)
    entry = ARGS[kind][name]
    bad = []
    for i, w in enumerate(words[start:], start):
        if not w.startswith("-"):
            continue
        flag = w.split("=", 1)[0]
        if flag not in entry["flags"] and not _negated(kind, name, entry, flag):
            bad.append(flag)
            continue
        value = words[i + 1] if i + 1 < len(words) else None
        choices = (entry.get("choices") or {}).get(flag)
        if choices is not None and value not in choices:
            bad.append(f"{flag} {value}")
        if flag == "--speculative-config":
            fields = ENGINE_ARGS["vllm"][entry["version"]]["speculative_config"]["fields"]
            bad += [f"--speculative-config key {k}" for k in json.loads(value) if k not in fields]
    return bad


def _lines(d: dict) -> list[str]:
    out = [d["servers"][eng][arm] for eng in ("vllm", "sglang") for arm in ("off", "on") if d["servers"][eng][arm]]
    return out + [row["command"] for rows in d["clients"].values() for row in rows]


CASES = {
    "example": {},
    "rates": dict(sweep={"load_axis": "request_rate", "levels": 4}),
    "ngram-fp8-eager": dict(method="ngram", kv_dtype="fp8", cuda_graphs="none", sweep={"levels": 3}),
    "draft-fp8-weights": dict(method="draft", draft="llama-3.2-1b", weight_dtype="fp8", sweep={"levels": 3}),
    "sglang-profile": dict(engine="sglang", sweep={"levels": 3, "draft_model_id": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}),
    "async-off": dict(method="ngram", async_scheduling="off", sweep={"levels": 3}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_emitted_flag_is_documented_by_its_release(case):
    d = _plan(case, **CASES[case]).to_dict()
    lines = _lines(d)
    assert len(lines) == 4 + 3 * 2 * len(d["levels"])
    for line in lines:
        assert not undocumented(line), (line, undocumented(line))
    progs = {_tool(shlex.split(x))[1] for x in lines}
    assert progs == {"vllm", "sglang", "vllm-bench", "guidellm", "aiperf"}
    for client, rows in d["clients"].items():
        pkg, ver = d["releases"]["clients"][client]["package"], d["releases"]["clients"][client]["version"]
        assert (ARGS["clients"][client]["package"], ARGS["clients"][client]["version"]) == (pkg, ver)


def test_async_scheduling_as_given_is_written_into_the_vllm_commands():
    """--async-scheduling off: both vLLM servers get --no-async-scheduling; on (vLLM 0.10's opt-in): the server
    without speculation gets --async-scheduling, the n-gram one nothing (vLLM would refuse it there)."""
    off = _plan("async-off", **CASES["async-off"]).to_dict()["servers"]["vllm"]
    assert all(" --no-async-scheduling" in off[arm] for arm in ("off", "on"))
    on = _plan("async-on-0.10", method="ngram", engine="vllm-0.10", async_scheduling="on",
               sweep={"levels": 3}).to_dict()["servers"]["vllm"]
    assert on["off"].endswith("--async-scheduling") and "async-scheduling" not in on["on"]
    assert undocumented(off["off"]) == [] and undocumented(off["off"] + " --no-seed") == ["--no-seed"]
    sgl = _plan("async-off", **CASES["async-off"]).to_dict()["servers"]["sglang"]  # its overlap scheduler, off on both
    assert all(" --disable-overlap-schedule" in sgl[arm] and not undocumented(sgl[arm]) for arm in ("off", "on"))


def test_the_flag_check_refuses_what_no_release_documents():
    """The negative check: a flag of another tool, a misspelt one, a value outside a flag's choices
    and a speculative-config key vLLM does not have are all caught."""
    d = _plan().to_dict()
    vllm_bench = d["clients"]["vllm-bench"][0]["command"]
    guide = d["clients"]["guidellm"][0]["command"]
    aiperf = d["clients"]["aiperf"][0]["command"]
    assert undocumented(vllm_bench + " --concurrency 8") == ["--concurrency"]  # AIPerf's, not vLLM's
    assert undocumented(vllm_bench + " --num-requests 8") == ["--num-requests"]
    assert undocumented(guide.replace("--profile concurrent", "--profile concurrency")) == ["--profile concurrency"]
    assert undocumented(guide + " --request-rate 2") == ["--request-rate"]
    assert undocumented(aiperf.replace("--endpoint-type completions", "--endpoint-type completion")) == [
        "--endpoint-type completion"]
    assert undocumented(aiperf + " --num-warmups 3") == ["--num-warmups"]  # vLLM's, not AIPerf's
    on = d["servers"]["vllm"]["on"]
    bad = on.replace('"num_speculative_tokens"', '"num_spec_tokens"')
    assert undocumented(bad) == ["--speculative-config key num_spec_tokens"]
    assert undocumented(d["servers"]["sglang"]["off"] + " --max-num-seqs 8") == ["--max-num-seqs"]
    with pytest.raises(AssertionError, match="no documented program"):
        undocumented("genai-perf profile -m x")


def test_the_client_names_are_the_same_in_the_options_and_the_commands():
    from crossover.api.options import SWEEP_PLAN_CLIENTS
    from crossover.planning.sweep_commands import CLIENT_RELEASES, CLIENTS

    assert SWEEP_PLAN_CLIENTS == CLIENTS == tuple(CLIENT_RELEASES) == tuple(ARGS["clients"])


def test_the_client_args_name_their_source():
    for kind in ("clients", "servers"):
        for name, entry in ARGS[kind].items():
            assert entry["package"] and entry["version"] and entry["files"] and entry["how"] and entry["flags"]
    text = DATA.read_text()
    assert "pip download --no-deps guidellm==0.6.1 aiperf==0.4.0" in text and "python tests/test_sweep_plan.py" in text


# ---- `crossover measured` reads what the commands write, with --on/--off alone

def _json(path: Path) -> dict:
    return json.loads(path.read_text())


GUIDE = _json(FIXTURES / "measured" / "guidellm" / "v0.6_off.json")
AIPERF = _json(FIXTURES / "measured" / "aiperf" / "off" / "concurrency16" / "profile_export_aiperf.json")


def _written(client: str, axis: str, load: float, requests: int, tput: float, e2el_ms: float, model: str) -> dict:
    """A result file as the client writes it (vLLM bench serve's result JSON; GuideLLM 0.6's report of
    one benchmark; AIPerf 0.4's profile export of one run)."""
    conc = axis == "concurrency"
    if client == "vllm-bench":
        return {"date": "20260301-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
                "model_id": model, "tokenizer_id": model, "num_prompts": requests,
                "request_rate": "inf" if conc else load, "burstiness": 1.0, "max_concurrency": load if conc else None,
                "duration": requests * 128 / tput, "completed": requests, "failed": 0,
                "total_input_tokens": requests * 1024, "total_output_tokens": requests * 128,
                "request_throughput": tput / 128, "output_throughput": tput, "total_token_throughput": tput * 9,
                **{f"{s}_{m}_ms": v for m, v in (("ttft", 40.0), ("tpot", 8.0), ("itl", 8.0), ("e2el", e2el_ms))
                   for s in ("mean", "median", "p99")}}
    if client == "guidellm":
        report = copy.deepcopy(GUIDE)
        bench = report["benchmarks"][0]
        report["benchmarks"] = [bench]
        report["args"].update(profile="concurrent" if conc else "poisson", rate=[load], max_requests=requests)
        bench["config"]["strategy"] = ({"type_": "concurrent", "streams": load} if conc else
                                       {"type_": "poisson", "rate": load, "max_concurrency": None})
        bench["metrics"]["output_tokens_per_second"]["successful"]["mean"] = tput
        bench["metrics"]["request_latency"]["successful"]["mean"] = e2el_ms / 1e3
        return report
    export = copy.deepcopy(AIPERF)
    export.pop("run_info", None)  # a single run: no sweep variation values
    export["aiperf_version"] = "0.4.0"
    export["input_config"]["loadgen"] = {"concurrency": load if conc else None,
                                         "request_rate": None if conc else load, "request_count": requests}
    export["output_token_throughput"]["avg"] = tput
    export["request_latency"] = {"unit": "ms", "avg": e2el_ms, "p50": e2el_ms, "p99": e2el_ms}
    return export


def _run_the_plan(tmp: Path, d: dict, client: str, ratio) -> dict[float, float]:
    """Write every result file the plan's `client` commands name, the on arm `ratio(load)` times faster
    (in throughput on concurrency levels, in mean e2e latency on request rates)."""
    model = d["clients"][client][0]["command"].split("--model ", 1)[1].split()[0]
    for row in d["clients"][client]:
        lv = next(x for x in d["levels"] if x["load"] == row["load"])
        r = ratio(row["load"]) if row["arm"] == "on" else 1.0
        tput = 1000.0 * (r if d["load_axis"] == "concurrency" else 1.0)
        path = tmp / row["writes"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_written(client, d["load_axis"], row["load"], lv["measured_requests"], tput,
                                            2000.0 / r, model)))
        if client == "vllm-bench":  # vllm bench serve writes its PyTorch-format twin beside each result
            path.with_suffix(".pytorch.json").write_text("[]")
        if client == "aiperf":  # and AIPerf its CSV and per-request records beside the export
            (path.parent / "profile_export_aiperf.csv").write_text("Metric,avg\n")
            (path.parent / "profile_export.jsonl").write_text("{}\n")
    return {lv["load"]: ratio(lv["load"]) for lv in d["levels"]}


@pytest.mark.parametrize("client", ["vllm-bench", "guidellm", "aiperf"])
@pytest.mark.parametrize("case", ["example", "rates"])
def test_measured_reads_the_files_the_commands_name_with_no_extra_flags(case, client, tmp_path):
    d = _plan(case, **CASES[case]).to_dict()
    want = _run_the_plan(tmp_path, d, client, lambda load: 1.5 if load < d["levels"][-1]["load"] / 2 else 0.8)
    argv = shlex.split(d["read_back"][client])
    assert argv[:2] == ["crossover", "measured"] and not [a for a in argv if a.startswith("--")
                                                          and a not in ("--on", "--off")]
    r = run_cli(*argv[1:], "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["load_axis"] == d["load_axis"]
    assert {p["level"]: p["speedup"] for p in got["points"]} == pytest.approx(want, rel=1e-3)


def test_a_second_call_with_the_first_sweeps_results_refines_the_plan(tmp_path, monkeypatch):
    """The refined plan is dense across the measured crossing bracket, leaves its levels out and
    keeps at least half of its levels inside it; its results land beside the first sweep's, and its
    read-back reads both, each folder once."""
    d = _plan().to_dict()
    _run_the_plan(tmp_path, d, "vllm-bench", lambda load: 1.3 if load <= 96 else 0.9)
    monkeypatch.chdir(tmp_path)  # where the user ran the first sweep's commands
    on, off = "results/vllm-bench/on", "results/vllm-bench/off"
    again = crossover.sweep_plan(**EXAMPLE, on=[on], off=[off], sweep={"levels": 8}).to_dict()
    first = [lv["load"] for lv in d["levels"]]  # the measured crossing: between the levels around 96
    lo, hi = max(x for x in first if x <= 96), min(x for x in first if x > 96)
    assert again["crossover"]["interval"] == [lo, hi]
    assert f"measured sweep's crossing between {lo:g} and {hi:g}" in again["crossover"]["source"]
    loads = [lv["load"] for lv in again["levels"]]
    assert again["measured_levels"] == first
    assert not set(loads) & set(again["measured_levels"])
    inside = [x for x in loads if lo < x < hi]
    assert len(loads) == 8 and 2 * len(inside) >= len(loads) and again["inside_interval"] == len(inside)
    assert again["prompt_len"] == 1024 and again["output_len"] == 128  # the measured sweep's lengths
    r = run_cli("sweep-plan", *EXAMPLE_ARGV, "--levels", "8", "--on", on, "--off", off, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(again))
    assert again["read_back"]["vllm-bench"] == f"crossover measured --on {on} --off {off}"
    aiperf = shlex.split(again["read_back"]["aiperf"])  # the first sweep is no AIPerf run: read beside it
    assert aiperf.count(on) == aiperf.count(off) == 1
    assert aiperf.count("--on") == 1 and len([a for a in aiperf if a.startswith("results/aiperf/on/")]) == len(loads)
    _run_the_plan(tmp_path, again, "vllm-bench", lambda load: 1.3 if load <= 96 else 0.9)
    r = run_cli(*shlex.split(again["read_back"]["vllm-bench"])[1:], "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [p["level"] for p in json.loads(r.stdout)["points"]] == sorted(loads + again["measured_levels"])


FIT = """crossover_calibration: 1
parameters:
  flops_fraction: {value: 0.127, stderr: 0.01}
  step_overhead_ms: {value: 1.416, stderr: 0.37}
scenario: {model: llama-3.1-8b, hardware: h100-sxm, tp: 1, method: eagle3, k: 3, weight_dtype: bf16, kv_dtype: bf16}
"""


def test_a_calibrated_scenario_plans_around_its_own_crossover_or_the_fits_interval(tmp_path):
    """--calibration: the fitted efficiencies move the crossover (the closed form's interval around
    it), and a fit that records a bootstrap `crossover_interval` gives the interval itself."""
    fit = tmp_path / "fit.yaml"
    fit.write_text(FIT)
    d = crossover.sweep_plan(**EXAMPLE, calibration=str(fit), sweep={"levels": 6}).to_dict()
    low, high = d["crossover"]["interval"]
    assert high < d["top"] and d["crossover"]["estimate"] is not None and low < d["crossover"]["estimate"] < high
    assert "closed form" in d["crossover"]["source"] and 2 * d["inside_interval"] >= len(d["levels"])
    fit.write_text(FIT + "crossover_interval: [40, 120]\n")
    d = crossover.sweep_plan(**EXAMPLE, calibration=str(fit), sweep={"levels": 6}).to_dict()
    assert d["crossover"]["interval"] == [40, 120] and "calibration's bootstrap interval" in d["crossover"]["source"]
    assert all(lv["inside_interval"] == (40 <= lv["load"] <= 120) for lv in d["levels"])
    fit.write_text(FIT + "crossover_interval: [40]\n")
    r = run_cli("sweep-plan", *EXAMPLE_ARGV, "--calibration", str(fit))
    assert_one_line_error(r, "crossover_interval must be [low, high]")


# ---- the CLI

def test_the_cli_json_is_the_api_result(capsys):
    res = crossover.sweep_plan(**EXAMPLE, sweep={"levels": 4, "client": "guidellm", "port": 8100})
    r = run_cli("sweep-plan", *EXAMPLE_ARGV, "--levels", "4", "--client", "guidellm", "--port", "8100", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(res.to_dict()))
    text = run_cli("sweep-plan", *EXAMPLE_ARGV, "--levels", "4", "--client", "guidellm", "--port", "8100")
    assert text.stdout.rstrip() == res.to_text()
    assert "guidellm benchmark run --target http://127.0.0.1:8100" in text.stdout
    assert "crossover measured --on results/guidellm/on --off results/guidellm/off" in text.stdout


@pytest.mark.parametrize("argv, needle", [
    (["--half-width", "0"], "--half-width"),
    (["--half-width", "1.5"], "half-width must be a number in (0, 1)"),
    (["--levels", "0"], "--levels"),
    (["--levels", "65"], "levels must be a whole number 1..64"),
    (["--peak", "5000"], "peak concurrency 5000"),
    (["--peak", "2.5"], "whole number of clients"),
    (["--port", "70000"], "port must be a whole number 1..65535"),
    (["--max-requests", "1"], "max-requests must be a whole number >= 2"),
    (["--prompt-len", "-3"], "--prompt-len"),
    (["--load-axis", "batch"], "--load-axis"),
    (["--client", "genai-perf"], "--client"),
    (["--results-dir", ""], "--results-dir"),
    (["--on", "no/such/dir", "--off", "no/such/dir"], "no such file"),
    (["--on", str(FIXTURES / "measured" / "vllm_on")], "--off"),
])
def test_bad_input_is_one_line(argv, needle):
    assert_one_line_error(run_cli("sweep-plan", *EXAMPLE_ARGV, *argv), needle)


def test_bad_api_input_is_one_input_error():
    with pytest.raises(crossover.CrossoverError, match="sweep: unknown field 'levls'"):
        crossover.sweep_plan(**EXAMPLE, sweep={"levls": 3})
    with pytest.raises(crossover.CrossoverError, match="sweep must be a SweepRequest"):
        crossover.sweep_plan(**EXAMPLE, sweep=3)
    with pytest.raises(crossover.CrossoverError, match="not both"):
        crossover.sweep_plan(crossover.scenario(**EXAMPLE, prompt_len=10, output_len=10), model="llama-3.1-8b")


if __name__ == "__main__":
    import yaml

    sys.stdout.write(HEADER + yaml.safe_dump(extract(sys.argv[1:]), sort_keys=False, width=110,
                                                 default_flow_style=None))
