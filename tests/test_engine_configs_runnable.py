"""Issue 23: every engine config `crossover policy` prints runs as printed.

Each emitted vLLM and SGLang config is checked against the argument names, value types and JSON
keys of the engines' released source, for every speculation method:
- vLLM: the `--speculative-config` flag (vllm/engine/arg_utils.py: parsed with json.loads) and the
  fields of SpeculativeConfig (vllm/config/speculative.py): each key exists, each value has the
  field's declared type and bounds, `method` is one of SpeculativeMethod's values, a method the
  version's EngineArgs refuses (draft_model up to 0.14) is not emitted for it, and a config that
  names no `model` uses a method that supplies its own (mtp, ngram, ...);
- SGLang: each `--speculative-*` flag exists with a value of its declared type and choices, and
  the algorithms that need a draft checkpoint get one;
- TensorRT-LLM: PyPI's tensorrt-llm is a 10 kB stub whose build downloads the wheel from another
  index (not reachable here), so its keys are checked against /work/shared/docs/engine_facts.md, as
  the data file says.
Where the tool cannot know a value (a draft checkpoint's HF id) the config carries a placeholder that
fails loudly, listed under `placeholders` and printed by the text output.

The facts live in tests/data/engine_args.yaml. They were extracted from the released wheels (the
engines' code is not vendored) by this file:

    pip download --no-deps vllm==0.14.1 -d /tmp/wheels   # and the other versions listed there
    python tests/test_engine_configs_runnable.py /tmp/wheels/*.whl > tests/data/engine_args.yaml

The extraction reads the files with `ast` only (nothing of the engines is imported or run).
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shlex
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

DATA = Path(__file__).parent / "data" / "engine_args.yaml"
FACTS_MD = Path("/work/shared/docs/engine_facts.md")


# ------------------------------------------------------------------------------------ extraction

def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _const(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _literals(tree: ast.Module) -> dict[str, list]:
    """Module-level `Name = Literal[...]` aliases, nested aliases resolved."""
    raw: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id == "Literal":
                raw[node.targets[0].id] = v.slice

    def resolve(sl: ast.AST) -> list:
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        out: list = []
        for it in items:
            if isinstance(it, ast.Constant):
                out.append(it.value)
            elif isinstance(it, ast.Name) and it.id in raw:
                out += resolve(raw[it.id])
        return out

    return {name: resolve(sl) for name, sl in raw.items()}


def _type_of(ann: ast.AST, literals: dict[str, list]) -> dict[str, Any]:
    """A field's type as the checker reads it: {"type": "int" | "float" | "str" | "bool" |
    "list[...]" ..., "nullable": bool, "choices": [...]}; a type it cannot check keeps its source text."""
    nullable = False
    parts: list[ast.AST] = []

    def split(n: ast.AST) -> None:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            split(n.left)
            split(n.right)
        else:
            parts.append(n)

    split(ann)
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "Optional":
        parts = [ann.slice]
        nullable = True
    kept = []
    for p in parts:
        if isinstance(p, ast.Constant) and p.value is None:
            nullable = True
        else:
            kept.append(p)
    out: dict[str, Any] = {"nullable": nullable}
    if len(kept) == 1:
        p = kept[0]
        if isinstance(p, ast.Name) and p.id in literals:
            out.update(type="str", choices=literals[p.id])
            return out
        if isinstance(p, ast.Subscript) and isinstance(p.value, ast.Name) and p.value.id == "Literal":
            out.update(type="str", choices=_literals_of(p.slice))
            return out
        if isinstance(p, ast.Subscript) and isinstance(p.value, ast.Name) and p.value.id == "SkipValidation":
            inner = _type_of(p.slice, literals)  # pydantic skips validating it; the engine reads it as this
            return {**inner, "nullable": nullable or inner["nullable"]}
    out["type"] = " | ".join(ast.unparse(p) for p in kept)
    return out


def _literals_of(sl: ast.AST) -> list:
    return [e.value for e in (sl.elts if isinstance(sl, ast.Tuple) else [sl]) if isinstance(e, ast.Constant)]


def _model_free_methods(cls: ast.ClassDef) -> list[str]:
    """SpeculativeConfig.__post_init__: `if self.model is None and self.num_speculative_tokens is not
    None:` then an if/elif chain on self.method; the methods whose branch sets self.model itself
    (the others end in "num_speculative_tokens was provided but without speculative model")."""
    out: list[str] = []
    for node in ast.walk(cls):
        if isinstance(node, ast.If) and "self.model is None and self.num_speculative_tokens is not None" in \
                ast.unparse(node.test):
            branch: Any = node.body[0] if node.body and isinstance(node.body[0], ast.If) else None
            while isinstance(branch, ast.If):
                sets_model = any(isinstance(n, ast.Assign) and any(ast.unparse(t) == "self.model" for t in n.targets)
                                 for b in branch.body for n in ast.walk(b))
                if sets_model:
                    out += [c.value for c in ast.walk(branch.test) if isinstance(c, ast.Constant)
                            and isinstance(c.value, str) and not c.value.startswith("[")]
                branch = branch.orelse[0] if len(branch.orelse) == 1 and isinstance(branch.orelse[0], ast.If) else None
            break
    return sorted(set(out))


def _vllm(z: zipfile.ZipFile, version: str) -> dict[str, Any]:
    names = set(z.namelist())
    spec_file = "vllm/config/speculative.py" if "vllm/config/speculative.py" in names else "vllm/config.py"
    args_file = "vllm/engine/arg_utils.py"
    args_src = z.read(args_file).decode()
    spec_src = z.read(spec_file).decode()
    utils_src = z.read("vllm/config/utils.py").decode() if "vllm/config/utils.py" in names else ""
    tree = ast.parse(spec_src)
    literals = _literals(tree)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig")
    fields: dict[str, Any] = {}
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            f = _type_of(st.annotation, literals)
            if isinstance(st.value, ast.Call) and ast.unparse(st.value.func) == "Field":
                for kw in st.value.keywords:
                    if kw.arg in ("gt", "ge", "lt", "le"):
                        f[kw.arg] = _const(kw.value)
            fields[st.target.id] = f
    flag = None
    for node in ast.walk(ast.parse(args_src)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            strs = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if "--speculative-config" in strs:
                flag = strs
    json_typed = bool(re.search(r'\["speculative_config"\]\["type"\]\s*=\s*optional_type\(json\.loads\)', args_src))
    refused = sorted(set(re.findall(r'method == "(\w+)":\s*raise NotImplementedError', args_src)))
    forbid = bool(re.search(r'extra\s*=\s*"forbid"', utils_src))
    return {
        "source": f"PyPI vllm=={version} wheel: {args_file}, {spec_file}" + (", vllm/config/utils.py" if utils_src else ""),
        "flags": {flag[0]: {"aliases": flag[1:], "type": "json" if json_typed else "unknown",
                            "file": args_file}} if flag else {},
        "speculative_config": {
            "file": spec_file,
            "unknown_keys": "forbidden" if forbid else "ignored (a pydantic dataclass without extra='forbid')",
            "methods": fields.get("method", {}).get("choices", []),
            "methods_refused_by_engine_args": refused,
            "methods_that_need_no_model": _model_free_methods(cls),
            "fields": fields,
        },
    }


# SGLang: the flags crossover emits or names, and their neighbours.
_SGL_PREFIXES = ("--speculative-", "--cuda-graph-max-bs", "--enable-multi-layer-eagle")


def _sgl_flag_from_call(node: ast.Call, consts: dict[str, list]) -> dict[str, Any] | None:
    strs = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not strs or not strs[0].startswith(_SGL_PREFIXES):
        return None
    kw = {k.arg: k.value for k in node.keywords}
    f: dict[str, Any] = {"aliases": strs[1:]}
    action = _const(kw["action"]) if "action" in kw else None
    if action in ("store_true", "store_false"):
        f["type"] = "bool_flag"
    elif "action" in kw:
        f["type"] = "action: " + ast.unparse(kw["action"])
    else:
        f["type"] = ast.unparse(kw["type"]) if "type" in kw else "str"
    if "choices" in kw:
        ch = _const(kw["choices"])
        if ch is None and isinstance(kw["choices"], ast.Name):
            ch = consts.get(kw["choices"].id, "named: " + kw["choices"].id)
        f["choices"] = list(ch) if isinstance(ch, (list, tuple)) else ch
    if "nargs" in kw:
        f["nargs"] = _const(kw["nargs"])
    return {"name": strs[0], **f}


def _sgl_flag_from_field(st: ast.AnnAssign) -> dict[str, Any] | None:
    """A `name: A[T, "help" | Arg(...)] = default` field (sglang/srt/arg_groups/arg_utils.py:
    --name-with-dashes, Optional unwrapped, Literal -> choices, bool -> store_true)."""
    ann = st.annotation
    if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in ("A", "Annotated")):
        return None
    if not isinstance(ann.slice, ast.Tuple) or len(ann.slice.elts) < 2:
        return None
    tp, meta = ann.slice.elts[0], ann.slice.elts[1]
    kw = {k.arg: k.value for k in meta.keywords} if isinstance(meta, ast.Call) else {}
    if _const(kw.get("no_cli", ast.Constant(False))):
        return None
    name = _const(kw["cli_name"]) if "cli_name" in kw else "--" + st.target.id.replace("_", "-")
    if not name.startswith(_SGL_PREFIXES):
        return None
    f: dict[str, Any] = {"aliases": list(_const(kw["aliases"]) or []) if "aliases" in kw else []}
    if isinstance(tp, ast.Subscript) and isinstance(tp.value, ast.Name) and tp.value.id == "Optional":
        tp = tp.slice
    if "action" in kw:
        f["type"] = "action: " + ast.unparse(kw["action"])
    elif isinstance(tp, ast.Subscript) and isinstance(tp.value, ast.Name) and tp.value.id == "Literal":
        vals = _literals_of(tp.slice)
        f["type"] = type(vals[0]).__name__ if vals else "str"
        f["choices"] = vals
    elif isinstance(tp, ast.Name) and tp.id == "bool":
        f["type"] = "bool_flag"
    elif isinstance(tp, ast.Subscript) and ast.unparse(tp.value) in ("List", "list"):
        f["type"] = ast.unparse(tp.slice)
        f["nargs"] = "+"
    else:
        f["type"] = ast.unparse(tp)
    if "choices" in kw and "choices" not in f:
        ch = _const(kw["choices"])
        f["choices"] = list(ch) if isinstance(ch, (list, tuple)) else "named: " + ast.unparse(kw["choices"])
    return {"name": name, **f}


def _sglang(z: zipfile.ZipFile, version: str) -> dict[str, Any]:
    files = sorted(n for n in z.namelist() if n == "sglang/srt/server_args.py"
                   or (n.startswith("sglang/srt/arg_groups/fields/") and n.endswith(".py")))
    flags: dict[str, Any] = {}
    used: set[str] = set()
    for fn in files:
        tree = ast.parse(z.read(fn).decode())
        consts = {n.targets[0].id: _const(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and isinstance(_const(n.value), list)}
        for node in ast.walk(tree):
            f = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                f = _sgl_flag_from_call(node, consts)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                f = _sgl_flag_from_field(node)
            if f:
                name = f.pop("name")
                flags.setdefault(name, {**f, "file": fn})
                used.add(fn)
    algo = flags.get("--speculative-algorithm")
    if algo is not None and "choices" not in algo:
        # a free name (newer SGLang): the builtins are SpeculativeAlgorithm's members (less NONE) and
        # the reserved aliases (NEXTN), sglang/srt/speculative/spec_info.py and spec_registry.py
        info, registry = "sglang/srt/speculative/spec_info.py", "sglang/srt/speculative/spec_registry.py"
        tree = ast.parse(z.read(info).decode())
        cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SpeculativeAlgorithm")
        names = [t.id for st in cls.body if isinstance(st, ast.Assign) for t in st.targets
                 if isinstance(t, ast.Name) and t.id != "NONE"]
        for node in ast.parse(z.read(registry).decode()).body:
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in ("_RESERVED_ALIASES", "_RESERVED_NAMES"):
                names += [n for n in sorted(_const(node.value.args[0])) if n not in names and n != "NONE"]
        algo["choices"] = names
        algo["choices_from"] = f"{info} (SpeculativeAlgorithm), {registry} (the reserved names: NEXTN aliases EAGLE)"
        used |= {info, registry}
    return {"source": f"PyPI sglang=={version} wheel: " + ", ".join(sorted(used)), "flags": dict(sorted(flags.items()))}


def extract(wheels: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"vllm": {}, "sglang": {}}
    for w in sorted(wheels, key=lambda p: (Path(p).name.split("-")[0], _version(Path(p).name.split("-")[1]))):
        name, version = Path(w).name.split("-")[:2]
        with zipfile.ZipFile(w) as z:
            if name == "vllm":
                out["vllm"][version] = _vllm(z, version)
            elif name == "sglang":
                out["sglang"][version] = _sglang(z, version)
    return out


# ------------------------------------------------------------------------------------ the checks

# Read by hand (cited): SGLang's EAGLE, EAGLE3 and STANDALONE workers load the checkpoint named by
# --speculative-draft-model-path; only the MTP architectures' NEXTN defaults it to the model path
# (sglang/srt/server_args.py _handle_speculative_decoding up to 0.5.19; arg_groups/speculative_hook.py
# _handle_eagle_family from 0.5.20).
SGL_NEEDS_DRAFT_PATH = ("EAGLE", "EAGLE3", "STANDALONE")
# TensorRT-LLM (PyTorch backend) keys and values, from engine_facts.md section 4 (decoding_type values
# 4.1, max_draft_len in the notation paragraph, draft_len_schedule 4.4); speculative_model (the draft
# checkpoint of Eagle3 and DraftTarget) is from TensorRT-LLM's docs, not in engine_facts.md: the one
# name this file cannot check against a source.
TRT_KEYS = {"decoding_type": {"type": "str", "choices": ["MTP", "Eagle3", "NGram", "DraftTarget", "PARD", "DFlash", "SA",
                                                          "UserProvided", "DSpark"]},
            "max_draft_len": {"type": "int", "ge": 1},
            "draft_len_schedule": {"type": "dict[int, int]"},
            "speculative_model": {"type": "str"}}
TRT_NEEDS_MODEL = ("Eagle3", "DraftTarget")
PLACEHOLDER = re.compile(r"^<[^<>]+: set --draft-model-id>$")


def _in(version: str, rng: dict[str, Any] | None) -> bool:
    rng = rng or {}
    lo, hi = rng.get("min"), rng.get("max")
    return (lo is None or _version(version) >= _version(lo)) and (hi is None or _version(version) <= _version(hi))


def _type_ok(value: Any, tp: str) -> bool | None:
    """Whether the value has the type; None: a type this checker cannot check."""
    node = ast.parse(tp, mode="eval").body
    if isinstance(node, ast.Name):
        return {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
                "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                "str": lambda v: isinstance(v, str),
                "bool": lambda v: isinstance(v, bool)}.get(node.id, lambda v: None)(value)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        sub = [ast.unparse(a) for a in args]
        if node.value.id == "list":
            return isinstance(value, list) and all(_type_ok(v, sub[0]) for v in value)
        if node.value.id == "tuple":  # a JSON array of exactly these items
            return isinstance(value, (list, tuple)) and len(value) == len(sub) and \
                all(_type_ok(v, t) for v, t in zip(value, sub))
        if node.value.id == "dict":
            return isinstance(value, dict) and all(_type_ok(k, sub[0]) and _type_ok(v, sub[1]) for k, v in value.items())
    return None


def _value_problem(name: str, value: Any, spec: dict[str, Any]) -> str | None:
    if value is None:
        return None if spec.get("nullable") else f"{name}: null where {spec['type']} is required"
    ok = _type_ok(value, spec["type"])
    if ok is None:
        return f"{name}: type {spec['type']!r} cannot be checked, so it must not be emitted"
    if not ok:
        return f"{name}: {value!r} is not {spec['type']}"
    if "choices" in spec and value not in spec["choices"]:
        return f"{name}: {value!r} is not one of {spec['choices']}"
    for bound, holds in (("gt", lambda b: value > b), ("ge", lambda b: value >= b), ("lt", lambda b: value < b),
                         ("le", lambda b: value <= b)):
        if bound in spec and not holds(spec[bound]):
            return f"{name}: {value!r} breaks {bound} {spec[bound]}"
    return None


def vllm_problems(flag: str, facts: dict[str, Any]) -> list[str]:
    """What keeps `vllm serve MODEL <flag>` from running as printed on the version the facts are of."""
    argv = shlex.split(flag)
    names = {n: f for n, f in facts["flags"].items()} | {a: f for f in facts["flags"].values() for a in f.get("aliases", [])}
    if len(argv) != 2 or argv[0] not in names:
        return [f"{argv[:1]} is not a vLLM flag of this version (known: {sorted(names)})"]
    if names[argv[0]]["type"] != "json":
        return [f"{argv[0]} does not take JSON in this version"]
    try:
        cfg = json.loads(argv[1])
    except json.JSONDecodeError as e:
        return [f"{argv[0]}: not JSON ({e})"]
    sc = facts["speculative_config"]
    out = []
    for key, value in cfg.items():
        if key not in sc["fields"]:
            out.append(f"{key}: not a SpeculativeConfig field (unknown keys are {sc['unknown_keys']})")
        elif (p := _value_problem(key, value, sc["fields"][key])) is not None:
            out.append(p)
    method = cfg.get("method")
    if method not in sc["methods"]:
        out.append(f"method {method!r} is not one of SpeculativeMethod's {sc['methods']}")
    if method in sc["methods_refused_by_engine_args"]:
        out.append(f"method {method!r}: EngineArgs raises NotImplementedError")
    if "model" not in cfg and method not in sc["methods_that_need_no_model"]:
        out.append(f"method {method!r} without `model`: 'num_speculative_tokens was provided but without "
                   "speculative model'")
    return out


def sglang_problems(flags: str, facts: dict[str, Any]) -> list[str]:
    """What keeps `python -m sglang.launch_server --model-path M <flags>` from running as printed."""
    known = {n: f for n, f in facts["flags"].items()} | {a: f for f in facts["flags"].values() for a in f.get("aliases", [])}
    argv, out, seen, values = shlex.split(flags), [], set(), {}
    i = 0
    while i < len(argv):
        name = argv[i]
        if not name.startswith("--") or name not in known:
            out.append(f"{name}: not an SGLang flag of this version")
            i += 1
            continue
        if name in seen:
            out.append(f"{name}: given twice")
        seen.add(name)
        spec = known[name]
        if spec["type"] == "bool_flag":
            i += 1
            continue
        if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
            out.append(f"{name}: needs a value")
            i += 1
            continue
        raw = argv[i + 1]
        parse = {"int": int, "float": float, "str": str}.get(spec["type"])
        if parse is None:
            out.append(f"{name}: type {spec['type']!r} cannot be checked, so it must not be emitted")
        else:
            try:
                values[name] = parse(raw)
            except ValueError:
                out.append(f"{name}: {raw!r} does not parse as {spec['type']}")
            else:
                if isinstance(spec.get("choices"), list) and values[name] not in spec["choices"]:
                    out.append(f"{name}: {raw!r} is not one of {spec['choices']}")
        i += 2
    algo = values.get("--speculative-algorithm")
    if algo is None:
        out.append("no --speculative-algorithm")
    elif algo in SGL_NEEDS_DRAFT_PATH and "--speculative-draft-model-path" not in seen:
        out.append(f"{algo} without --speculative-draft-model-path")
    return out


def trt_problems(cfg: dict[str, Any]) -> list[str]:
    out = [f"{k}: not a documented TensorRT-LLM decoding-config key" for k in cfg if k not in TRT_KEYS]
    out += [p for k, v in cfg.items() if k in TRT_KEYS and (p := _value_problem(k, v, TRT_KEYS[k])) is not None]
    if cfg.get("decoding_type") in TRT_NEEDS_MODEL and "speculative_model" not in cfg:
        out.append(f"{cfg['decoding_type']} without speculative_model")
    return out


# ------------------------------------------------------------------------------------ the tests

FACTS = yaml.safe_load(DATA.read_text(encoding="utf-8"))
METHODS = ("draft", "eagle", "eagle3", "medusa", "ngram", "mtp")
_SCENARIO = {"draft": dict(model="llama-3.1-70b", draft="llama-3.2-1b", tp=4), "medusa": dict(model="vicuna-7b"),
             "mtp": dict(model="deepseek-v3", hardware="h200", tp=8, weight_dtype="fp8")}


def _policy(method: str, draft_model_id: str | None = None, **kw: Any):
    import crossover

    args = {"model": "llama-3.1-8b", **_SCENARIO.get(method, {}), **kw}
    return crossover.policy(method=method, k_max=4, batch_max=64, draft_model_id=draft_model_id, **args)


def test_every_crossover_method_is_covered():
    from crossover.model.speculation import METHODS as ALL

    assert set(ALL) == set(METHODS)


def _versions(engine: str, rng: dict[str, Any] | None) -> list[str]:
    return [v for v in FACTS[engine] if _in(v, rng)]


@pytest.mark.parametrize("draft_id", [None, "org/head-1"])
@pytest.mark.parametrize("method", METHODS)
def test_vllm_configs_run_on_every_version_they_claim(method, draft_id):
    c = _policy(method, draft_id).configs["vllm"]
    for cfg, rng in ((c, c["versions"]), (c["static"], c["static"]["versions"])):
        if cfg["flag"] is None:
            continue
        versions = _versions("vllm", rng)
        assert versions, f"no extracted vLLM version in {rng}"
        for v in versions:
            assert vllm_problems(cfg["flag"], FACTS["vllm"][v]) == [], (method, v, cfg["flag"])
        # the claimed first version is tight: the extracted version just below it refuses the config
        below = [v for v in FACTS["vllm"] if rng.get("min") and _version(v) < _version(rng["min"])]
        if below and rng["min"] != "0.11.0":
            assert vllm_problems(cfg["flag"], FACTS["vllm"][below[-1]]), (method, below[-1])
        assert json.loads(shlex.split(cfg["flag"])[1]) == cfg["speculative_config"]


def test_the_per_batch_schedule_is_refused_or_dropped_before_0_24():
    """The reason for the one-k config: 0.11-0.15 drop the unknown key silently (speculating at the
    maximum k at every batch), 0.16-0.23 refuse it."""
    flag = _policy("eagle3", "org/head").configs["vllm"]["flag"]
    for v, facts in FACTS["vllm"].items():
        sc = facts["speculative_config"]
        has = "num_speculative_tokens_per_batch_size" in sc["fields"]
        assert has == (_version(v) >= (0, 24)), v
        assert sc["unknown_keys"].startswith("forbidden") == (_version(v) >= (0, 16)), v
        assert bool(vllm_problems(flag, facts)) == (not has), v
        assert ("disable_by_batch_size" in sc["fields"]) == (_version(v) < (0, 17)), v
        assert ("medusa" in sc["methods"]) == (_version(v) < (0, 33)), v
        assert ("draft_model" in sc["methods_refused_by_engine_args"]) == (_version(v) <= (0, 14, 1)), v


@pytest.mark.parametrize("draft_id", [None, "org/head-1"])
@pytest.mark.parametrize("method", METHODS)
def test_sglang_flags_run_on_every_version_they_claim(method, draft_id):
    c = _policy(method, draft_id).configs["sglang"]
    if c["flags"] is None:
        assert method == "medusa" and c["notes"]
        return
    versions = _versions("sglang", c["versions"])
    assert versions
    for v in versions:
        assert sglang_problems(c["flags"], FACTS["sglang"][v]) == [], (method, v, c["flags"])
    lo = (c["versions"] or {}).get("min")
    below = [v for v in FACTS["sglang"] if lo and _version(v) < _version(lo)]
    if below:
        assert sglang_problems(c["flags"], FACTS["sglang"][below[-1]]), (method, below[-1])


def test_sglang_flags_named_in_notes_exist():
    """The notes name flags too (--speculative-adaptive, --cuda-graph-max-bs): each exists in the
    versions the note gives."""
    notes = " ".join(n for m in METHODS for n in _policy(m).configs["sglang"]["notes"])
    named = set(re.findall(r"--[a-z][a-z-]+[a-z]", notes)) - {"--draft-model-id"}
    every = {n for f in FACTS["sglang"].values() for n in f["flags"]}
    assert named and named <= every, named - every
    has = {v: set(f["flags"]) for v, f in FACTS["sglang"].items()}
    assert "--speculative-adaptive" in has["0.5.11"] and "--speculative-adaptive" not in has["0.5.10"]
    assert "SGLang >= 0.5.11" in notes
    assert "--cuda-graph-max-bs" in has["0.5.19"] and "--cuda-graph-max-bs" not in has["0.5.20"]
    assert "--cuda-graph-max-bs-decode" in has["0.5.20"] and "0.5.20" in notes


@pytest.mark.parametrize("draft_id", [None, "org/head-1"])
@pytest.mark.parametrize("method", METHODS)
def test_tensorrt_llm_configs_use_documented_keys(method, draft_id):
    c = _policy(method, draft_id).configs["tensorrt_llm"]
    if c["speculative_config"] is None:
        assert method in ("eagle", "medusa") and c["notes"]
        return
    assert trt_problems(c["speculative_config"]) == []


@pytest.mark.skipif(not FACTS_MD.exists(), reason="engine_facts.md not in this checkout")
def test_tensorrt_llm_names_are_in_engine_facts():
    text = FACTS_MD.read_text(encoding="utf-8")
    names = [k for k in TRT_KEYS if k != "speculative_model"] + TRT_KEYS["decoding_type"]["choices"]
    assert [n for n in names if f"`{n}`" not in text] == []


@pytest.mark.parametrize("method", METHODS)
def test_placeholders_are_listed_and_printed(method):
    """A checkpoint the tool cannot know is a placeholder that fails loudly, listed in the config and
    printed; a given id replaces it; a config names no placeholder it does not list."""
    res = _policy(method)
    text = res.to_text()
    for engine in ("vllm", "sglang", "tensorrt_llm"):
        c = res.configs[engine]
        listed = {p["value"] for p in c["placeholders"]}
        emitted = set(re.findall(r"<[^<>]+: set --draft-model-id>", json.dumps(
            [c.get("speculative_config"), c.get("flag"), c.get("flags"), (c.get("static") or {}).get("flag")])))
        assert emitted == listed, (engine, emitted, listed)
        for p in c["placeholders"]:
            assert PLACEHOLDER.match(p["value"]) and p["set_with"] == "--draft-model-id"
            assert p["message"] in c["notes"]  # the web page shows the notes
            assert any(ln.strip().startswith("!!") and p["value"] in ln for ln in text.splitlines()), engine
        if method in ("eagle", "eagle3", "medusa") and c.get("speculative_config", c.get("flags")) is not None:
            assert listed, engine  # the checkpoint is unknown without --draft-model-id
    given = _policy(method, "org/head-1")
    for engine in ("vllm", "sglang", "tensorrt_llm"):
        assert given.configs[engine]["placeholders"] == []
        assert "set --draft-model-id>" not in json.dumps(given.configs[engine])


def test_a_draft_named_by_crossover_name_is_written_as_its_hf_repository():
    """`--draft llama-3.2-1b` reaches the configs as the crossover name (the CLI passes it as the id):
    the engines need the checkpoint's repository."""
    for draft_id in (None, "llama-3.2-1b"):
        c = _policy("draft", draft_id).configs
        assert c["vllm"]["speculative_config"]["model"] == "meta-llama/Llama-3.2-1B"
        assert "--speculative-draft-model-path meta-llama/Llama-3.2-1B" in c["sglang"]["flags"]
        assert c["tensorrt_llm"]["speculative_config"]["speculative_model"] == "meta-llama/Llama-3.2-1B"


@pytest.mark.parametrize("method", ["draft", "eagle", "mtp"])
def test_a_priced_draft_tp_is_written_or_said(method):
    """A draft or head at TP 1 under a TP-8 target (vLLM's draft_tensor_parallel_size: 1 or the
    target's TP) reaches vLLM's config; SGLang and TensorRT-LLM take none, and say so."""
    kw = {"draft": dict(model="llama-3.1-70b", tp=8), "eagle": dict(model="llama-3.1-70b", tp=8)}.get(method, {})
    c = _policy(method, "org/head-1", draft_tp=1, **kw).configs
    assert c["vllm"]["speculative_config"]["draft_tensor_parallel_size"] == 1
    for v in _versions("vllm", c["vllm"]["versions"]):
        assert vllm_problems(c["vllm"]["flag"], FACTS["vllm"][v]) == []
    for engine in ("sglang", "tensorrt_llm"):
        if c[engine].get("flags", c[engine].get("speculative_config")) is not None:
            assert any("draft TP 1 that was priced" in n for n in c[engine]["notes"]), engine


def test_the_checker_catches_what_would_not_run():
    """A test that cannot fail is not a test: misspelt keys and flags, wrong types, unknown methods
    and missing checkpoints are all caught."""
    c = _policy("eagle3", "org/head").configs
    new, old = FACTS["vllm"]["0.33.0"], FACTS["vllm"]["0.14.1"]
    cfg = c["vllm"]["speculative_config"]

    def flag(d: dict[str, Any]) -> str:
        return "--speculative-config " + shlex.quote(json.dumps(d))

    assert vllm_problems(flag(cfg), new) == []
    bad = {k.replace("num_speculative_tokens", "num_speculatve_tokens", 1): v for k, v in cfg.items()}
    assert any("num_speculatve_tokens" in p for p in vllm_problems(flag(bad), new))
    assert any("not int" in p for p in vllm_problems(flag({**cfg, "num_speculative_tokens": "4"}), new))
    assert any("gt 0" in p for p in vllm_problems(flag({**cfg, "num_speculative_tokens": 0}), new))
    assert any("list[tuple" in p for p in vllm_problems(flag({**cfg, "num_speculative_tokens_per_batch_size": [[1, 8]]}), new))
    assert any("eagle4" in p for p in vllm_problems(flag({**cfg, "method": "eagle4"}), new))
    assert any("without `model`" in p for p in vllm_problems(flag({k: v for k, v in cfg.items() if k != "model"}), new))
    assert any("NotImplementedError" in p for p in vllm_problems(flag({**cfg, "method": "draft_model"}), old))
    assert any("medusa" in p for p in vllm_problems(flag({**cfg, "method": "medusa"}), new))
    assert vllm_problems("--speculative_config " + shlex.quote(json.dumps(cfg)), new)
    assert vllm_problems(flag(cfg), old)  # 0.14.1 has no per-batch schedule
    assert any("cannot be checked" in p for p in vllm_problems(flag({**cfg, "quantization": "fp8"}), new))

    sgl, latest = c["sglang"]["flags"], FACTS["sglang"]["0.5.23"]
    assert sglang_problems(sgl, latest) == []
    assert any("--speculative-num-step:" in p for p in sglang_problems(sgl.replace("num-steps", "num-step"), latest))
    assert any("parse as int" in p for p in sglang_problems(sgl.replace("--speculative-eagle-topk 1",
                                                                          "--speculative-eagle-topk 1.5"), latest))
    assert any("EAGLE4" in p for p in sglang_problems(sgl.replace("EAGLE3", "EAGLE4"), latest))
    no_path = re.sub(r"--speculative-draft-model-path \S+ ", "", sgl)
    assert any("without --speculative-draft-model-path" in p for p in sglang_problems(no_path, latest))
    assert any("NGRAM" in p for p in sglang_problems(_policy("ngram").configs["sglang"]["flags"], FACTS["sglang"]["0.5.2"]))
    assert any("needs a value" in p for p in sglang_problems(sgl + " --speculative-num-steps", latest))
    assert any("given twice" in p for p in sglang_problems(sgl + " --speculative-eagle-topk 1", latest))

    trt = c["tensorrt_llm"]["speculative_config"]
    assert trt_problems(trt) == []
    assert trt_problems({**trt, "max_draft_length": 3})
    assert trt_problems({**trt, "decoding_type": "Eagle"})
    assert trt_problems({**trt, "draft_len_schedule": {"8": 2}})
    assert trt_problems({k: v for k, v in trt.items() if k != "speculative_model"})


def test_the_data_file_is_what_the_extractor_writes():
    """Re-extract from the wheels when they are at hand (CROSSOVER_ENGINE_WHEELS=folder) and compare;
    otherwise check the file's shape: every entry cites its package, version and files."""
    import os

    for engine, versions in FACTS.items():
        for v, d in versions.items():
            assert d["source"].startswith(f"PyPI {engine}=={v} wheel: "), (engine, v)
            assert d["flags"], (engine, v)
    folder = os.environ.get("CROSSOVER_ENGINE_WHEELS")
    if not folder:
        pytest.skip("set CROSSOVER_ENGINE_WHEELS to the folder of the wheels to re-extract the facts")
    wheels = sorted(str(p) for p in Path(folder).glob("*.whl")
                    if p.name.split("-")[1] in FACTS.get(p.name.split("-")[0], {}))
    assert dump(extract(wheels)) == DATA.read_text(encoding="utf-8")


def dump(facts: dict[str, Any]) -> str:
    """The data file's text: one line per flag and per field (JSON flow mappings, valid YAML)."""
    def flow(d: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in d.items() if not (v is None or v is False or v == [])})

    lines = [ln.rstrip() for ln in HEADER.strip().splitlines()]
    for engine, versions in facts.items():
        lines.append(f"{engine}:")
        for v, d in versions.items():
            files = {f.get("file") for f in d["flags"].values()}
            lines += [f'  "{v}":', f"    source: {json.dumps(d['source'])}", "    flags:"]
            lines += [f"      {json.dumps(n)}: {flow({k: x for k, x in f.items() if k != 'file' or len(files) > 1})}"
                      for n, f in d["flags"].items()]
            if "speculative_config" in d:
                sc = d["speculative_config"]
                lines.append("    speculative_config:")
                lines += [f"      {k}: {json.dumps(sc[k])}" for k in sc if k != "fields"]
                lines.append("      fields:")
                lines += [f"        {n}: {flow(f)}" for n, f in sc["fields"].items()]
    return "\n".join(lines) + "\n"


HEADER = """
# Argument facts of the engines' released source, for tests/test_engine_configs_runnable.py (issue 23).
# Extracted, not vendored: read with `ast` from the wheels on PyPI, nothing imported or run:
#   for v in 0.11.0 0.14.1 0.15.0 0.16.0 0.17.0 0.23.0 0.24.0 0.32.0 0.33.0; do pip download --no-deps vllm==$v -d /tmp/wheels; done
#   for v in 0.5.1 0.5.2 0.5.3 0.5.9 0.5.10 0.5.11 0.5.12 0.5.19 0.5.20 0.5.23; do pip download --no-deps sglang==$v -d /tmp/wheels; done
#   python tests/test_engine_configs_runnable.py /tmp/wheels/*.whl > tests/data/engine_args.yaml
# Each version's `source` names the package, version and files read:
# - vLLM: vllm/engine/arg_utils.py (the --speculative-config flag, its json.loads type, and the methods
#   EngineArgs refuses with NotImplementedError), vllm/config/speculative.py (SpeculativeConfig's fields,
#   their annotations and pydantic Field bounds, SpeculativeMethod's values, and the methods whose
#   __post_init__ branch sets `model` itself when none is given), vllm/config/utils.py (whether unknown
#   keys are forbidden: `extra="forbid"`; without it a pydantic dataclass drops them silently).
# - SGLang: the --speculative-* and --cuda-graph-max-bs* flags of sglang/srt/server_args.py
#   (parser.add_argument calls, or `A[type, Arg(...)]` fields from 0.5.12) and, from 0.5.20,
#   sglang/srt/arg_groups/fields/*.py; where --speculative-algorithm takes a free name (0.5.12+), its
#   builtins from sglang/srt/speculative/spec_info.py and spec_registry.py.
# - TensorRT-LLM: PyPI's tensorrt-llm (1.2.1) is a 10 kB stub sdist whose build downloads the wheel
#   from NVIDIA's own index, which this machine cannot reach: its keys are checked against
#   /work/shared/docs/engine_facts.md section 4 instead (in the test), not listed here.
# Types: int, float, str, bool (a JSON boolean), bool_flag (an argparse store_true flag: no value),
# json (a JSON document), list[...] / tuple[...] (JSON arrays); `choices` lists the allowed values; other
# types are the source's annotation text and the test refuses to emit them (it cannot check them).
"""


if __name__ == "__main__":
    sys.stdout.write(dump(extract(sys.argv[1:])))
