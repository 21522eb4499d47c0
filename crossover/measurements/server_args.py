"""How the server was launched, as scenario keywords with where each came from (issue 22, item 2).

    args = read_server_args("launch.sh")  # .engine "vllm"|"sglang", .engine_version where a log or image tag says
    args.scenario_keywords()              # {"method": "eagle3", "k": 3, "tp": 4, "cuda_graphs": "none", ...}
    args.provenance()                     # [{"input": "k", "value": 3, "source": "--speculative-config ..."}, ...]
    crossover_model_name("meta-llama/Llama-3.2-1B-Instruct")  # "llama-3.2-1b"; the id itself when no spec has it

Read, by content: vLLM command lines (`vllm serve`, `-m vllm.entrypoints.openai.api_server`, the vllm/vllm-openai image;
`-tp -sc -O3`, `_` for `-`, `--compilation-config.cudagraph_mode=FULL`, V0's --speculative-model), SGLang's (`-m
sglang.launch_server`; --disable-overlap-schedule as async scheduling off), a bare --speculative-config JSON, startup logs (vLLM's `non-default args:` and `Initializing a
V1 LLM engine (vX) with config:`, `Asynchronous scheduling is`, SGLang's `server_args=ServerArgs(...)`). Only
unambiguous mappings (cuda_graphs: decode's mode): what does not map (a quantization of the checkpoint's width, an
`auto` dtype, -O1/-O2, an SGLang tree) is in `unmapped` with why, provenance says "engine default" for it and for what
the file leaves out; flags not read are `ignored`. No such format, or two values of a keyword: one FileError line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..errors import FileError
from ..files import read_text
from .server_flags import (ALIASES, ASYNC_LOG, BOOL_FLAGS, DATA_PARALLEL, DTYPES, EXPECTED, GRAPH_MODES, HEAD_METHODS, KEYWORDS, KV_DTYPES,
                           O_LEVEL, QUANTIZATION, SGLANG_BACKENDS, SGLANG_DIRECT, SGLANG_FLAGS, SGLANG_METHODS, SGLANG_UNMAPPED,
                           VLLM_DIRECT, VLLM_FLAGS, VLLM_METHODS)

ENGINE_DEFAULT = "engine default"
_VERSION = re.compile(r"vLLM API server version (\S+)|Initializing (?:a V(\d) |an )LLM engine \(v([^)\s]+)\)")
_CONFIG = re.compile(r"LLM engine \(v[^)]*\) with config: (.*)$")
_LOG = re.compile(r"non-default args: \{|LLM engine \(v[^)]*\) with config: |server_args=ServerArgs\(|"
                  r"vLLM API server version")
_MARKERS = (("non-default args: {", "listed", "non-default args"), ("server_args=ServerArgs(", "resolved", "server_args"))
_RENAME = {"num_spec_tokens": "num_speculative_tokens", "draft_model": "model"}  # SpeculativeConfig's repr (V0's)
_ENUM = re.compile(r"<[A-Za-z_][\w.]*\.(\w+): [^<>]*>")
_WORDS = {"True": "true", "False": "false", "None": "null", "inf": "Infinity", "nan": "NaN"}
_SHELL = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|(\s+)|([^\s'"\\]+)""", re.S)
_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[()\[\]{},]|[^'\"()\[\]{},]+")
_NUMBER = re.compile(r"-\d+(\.\d*)?")
_STOPS, _TRUE = {"&&", "||", ";", "|", "&"}, ("true", "1", "yes")
_CAST = {None: lambda v: v, bool: lambda v: str(v).lower() in _TRUE, float: float, int: lambda v: int(str(v)), str: str}


@dataclass
class ServerArgs:
    """A launch configuration read: `values[keyword] = (value, where the file says it)`."""

    path: str
    engine: str = ""  # "vllm" or "sglang"
    form: str = ""  # "command line", "speculative config", "startup log"
    engine_version: str | None = None
    values: dict[str, tuple[Any, str]] = field(default_factory=dict)
    unmapped: list[tuple[str, str, str]] = field(default_factory=list)  # (keyword, what the file says, why not)
    ignored: list[str] = field(default_factory=list)  # flags and fields not read, as written

    def scenario_keywords(self, names: bool = True) -> dict[str, Any]:
        """The values by keyword (`draft` where the method runs a draft model; with `names`, crossover's names)."""
        out = {k: v for k, (v, _) in self.values.items()}
        if out.get("method") in HEAD_METHODS:
            out.pop("draft", None)
        return {k: crossover_model_name(v) if names and k in ("model", "draft") else v for k, v in out.items()}

    def provenance(self) -> list[dict[str, Any]]:
        """Every keyword with its value and source ("engine default" and what did not map where unset)."""
        notes = {k: "; ".join(f"{t}: {w}" for kk, t, w in self.unmapped if kk == k) for k, _, _ in self.unmapped}
        return [{"input": k, "value": self.values[k][0], "source": self.values[k][1]} if k in self.values else
                {"input": k, "value": None, "source": ENGINE_DEFAULT + (f" (not mapped: {notes[k]})" if k in notes else "")}
                for k in KEYWORDS]

    def _fail(self, what: str) -> FileError:
        return FileError(f"{self.path}: {what}", parameter="server_args")

    def _put(self, key: str, value: Any, source: str, kind: type | None = None) -> None:
        try:
            value = _CAST[kind](value)
        except (TypeError, ValueError):
            raise self._fail(f"{source}: {key} must be {'a number' if kind is float else 'an integer'}") from None
        if key in self.values and self.values[key][0] != value:
            old, where = self.values[key]
            raise self._fail(f"contradicts itself: {key} is {old!r} ({where}) and {value!r} ({source})")
        self.values.setdefault(key, (value, source))

    def _skip(self, key: str, text: str, why: str) -> None:
        self.unmapped.append((key, text, why))


def _literal(text: str) -> Any:
    """A Python or JSON literal as logged, rewritten as JSON ('x' -> "x", True/None -> true/null, tuples -> lists,
    an enum repr -> its member's name); a dict holding reprs that are no literals item by item; else None."""
    out: list[str] = []
    for m in _TOKEN.finditer(_ENUM.sub(lambda e: repr(e.group(1)), text.strip())):
        t = m.group()
        if t[0] == "'":
            t = json.dumps(re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), t[1:-1]))
        elif t in ")]}":
            while out and out[-1].strip() in (",", ""):
                out.pop()  # Python's trailing comma: (1,)
        elif t[0] != '"':
            t = re.sub(r"\b(True|False|None|inf|nan)\b", lambda e: _WORDS[e.group(1)], t.replace("(", "["))
        out.append({")": "]"}.get(t, t))
    try:
        return json.loads("".join(out))
    except (ValueError, RecursionError):
        return _fields(text.strip()[1:-1], ":") if text.strip()[:1] + text.strip()[-1:] == "{}" else None


def _words(found: ServerArgs, text: str) -> list[str]:
    """A shell command's words: quotes ('...' as is, "..." with \\ escapes) and backslashes as sh reads them."""
    if not re.fullmatch(r"""(?:'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[^'"\\])*""", text, re.S):
        raise found._fail(f"not a command line (a quote is not closed); expected {EXPECTED}")
    words: list[list[str]] = [[]]
    for m in _SHELL.finditer(text):
        single, double, escaped, space, plain = m.groups()
        if space is not None:
            words.append([]) if words[-1] else None
        else:  # an empty quoted word ('') is a word
            words[-1].append(single if single is not None else escaped if escaped is not None else plain
                             if plain is not None else re.sub(r'\\([\\"$`])', r"\1", double))
    return ["".join(w) for w in words if w]


def _scan(s: str, start: int = 0):  # (index, token, depth) of `s`'s tokens (a quoted string is one) from `start`
    depth = 0
    for m in _TOKEN.finditer(s, start):
        depth += (m.group() in "([{") - (m.group() in ")]}")
        yield m.start(), m.group(), depth


def _fields(text: str, sep: str = "=") -> dict[str, Any]:
    """`a=1, b=X(...)` (a repr's arguments) or `'a': 1` (a dict's, sep ":"): literals, else the text as is."""
    cuts = [-1] + [i for i, c, depth in _scan(text) if c == "," and depth == 0] + [len(text)]
    return {k.strip().strip("'\""): v.strip() if (lit := _literal(v)) is None and v.strip() not in ("None", "null") else lit
            for k, _, v in (text[a + 1:b].partition(sep) for a, b in zip(cuts, cuts[1:]) if text[a + 1:b].strip())}


def _json(found: ServerArgs, value: Any, source: str) -> Any:
    if isinstance(value, str) and (value := _literal(value)) is None:
        raise found._fail(f"{source}: not JSON")
    return value


def _head(src: str) -> str:  # where a nested value is: the flag (`--speculative-config`) or `line N ...: name`
    return src.partition("=")[0] if src.startswith("line") else src.partition("=")[0].partition(" ")[0]


def _method_from_draft(found: ServerArgs, model: str, source: str) -> None:
    """vLLM's rules without a method (speculative.py: "eagle-"/"eagle3" in the name), V0's "[ngram]", a library model."""
    low = model.lower()
    method = ("ngram" if low in ("[ngram]", "ngram") else "eagle" if "eagle-" in low else "eagle3" if "eagle3" in low
              else "draft" if crossover_model_name(model) != model else None)
    (found._put("method", method, f"{source} (from the draft's name)") if method else found._skip(
        "method", source, "vLLM takes it from the draft's config.json (medusa, mlp_speculator, MTP, a draft)"))
    if method != "ngram":
        found._put("draft", model, source)


def _vllm_spec(found: ServerArgs, cfg: Any, head: str) -> None:
    if not isinstance(cfg, dict):
        raise found._fail(f"{head}: the speculative config is no JSON object")
    for key, value in ((k, v) for k, v in cfg.items() if v is not None):
        src = f"{head} {key}={value!r}"
        if key == "method":
            mapped = VLLM_METHODS.get(value) or ("mtp" if str(value).endswith("_mtp") else None)
            (found._put("method", mapped, src) if mapped else
             found._skip("method", src, "crossover models draft, eagle, eagle3, medusa, ngram and mtp"))
        elif key == "model":  # no method: vLLM's own rules
            _method_from_draft(found, str(value), src) if cfg.get("method") is None else found._put("draft", str(value), src)
        elif key in ("num_speculative_tokens", "draft_tensor_parallel_size"):
            found._put("k" if key == "num_speculative_tokens" else "draft_tp", value, src, int)
        elif key == "speculative_token_tree":
            found._skip("k", src, "a draft tree: give crossover's --tree")
        else:
            found.ignored.append(src)


def _graphs(found: ServerArgs, mode: Any, src: str) -> None:
    mapped = GRAPH_MODES.get(mode[0] if isinstance(mode, (list, tuple)) and mode else
                             mode if isinstance(mode, int) else str(mode).split(".")[-1].upper())
    found._put("cuda_graphs", mapped, src) if mapped else found._skip("cuda_graphs", src, "an unknown CUDA-graph mode")


def _dtypes(found: ServerArgs, name: str, value: Any, src: str, ctx: dict[str, Any], resolved: bool) -> None:
    v, dtype = str(value).removeprefix("torch."), str(ctx.get("dtype")).removeprefix("torch.")
    if name == "quantization":
        (found._put("weight_dtype", QUANTIZATION[v], src) if v in QUANTIZATION else
         found._skip("weight_dtype", src, "its weight width is the checkpoint's"))
    elif name == "dtype" and v in DTYPES and resolved and ctx.get("quantization") in (None, "None"):
        found._put("weight_dtype", DTYPES[v], f"{src} (the resolved config: no quantization)")
    elif name == "dtype":
        found._skip("weight_dtype", src, "the activation dtype; a quantized checkpoint's weights are narrower")
    elif v in KV_DTYPES or (v == "auto" and dtype in DTYPES):
        found._put("kv_dtype", KV_DTYPES.get(v) or DTYPES[dtype], src + (f" (the model's {dtype})" if v == "auto" else ""))
    else:
        found._skip("kv_dtype", src, "auto: the model's dtype, not given" if v == "auto" else "no crossover KV dtype")


def _parallel(found: ServerArgs, name: str, value: Any, src: str, ctx: dict[str, Any]) -> None:
    """Expert parallelism (vLLM --enable-expert-parallel; SGLang --ep-size above 1) as crossover's
    --expert-parallel; data-parallel attention (vLLM -dp; SGLang --dp-size with --enable-dp-attention) as
    --dp; SGLang's --dp-size alone (replicas behind its router) said as not modelled."""
    if name == "enable_expert_parallel":
        found._put("expert_parallel", value, src, bool)
    elif name == "enable_dp_attention":
        return  # read with --dp-size
    elif not str(value).isdigit():
        raise found._fail(f"{src}: {name} must be an integer")
    elif name == "ep_size":
        found._put("expert_parallel", int(value) > 1, src)
    elif int(value) > 1 and name == "dp_size" and not _CAST[bool](ctx.get("enable_dp_attention", False)):
        found._skip("tp", src, DATA_PARALLEL.format(n=int(value)))
    elif int(value) > 1:
        found._put("data_parallel", int(value), src)


def _vllm(found: ServerArgs, items: list[tuple[str, Any, str]], resolved: bool = False) -> None:
    ctx = {n: v for n, v, _ in items}
    eager = str(ctx.get("enforce_eager", False)).lower() in _TRUE
    for name, value, src in ((n, v, s) for n, v, s in items if v is not None and v != "None"):
        if name == "compilation_config":
            value = _json(found, value, src)
            name = "O" if isinstance(value, int) else name  # -O N up to 0.11: a compilation level
        cfg = value if isinstance(value, dict) else {}
        if not eager and int(cfg.get("max_cudagraph_capture_size") or 0) > 0:  # 0: vLLM's value with graphs off
            found._put("cuda_graph_max", int(cfg["max_cudagraph_capture_size"]),
                       f"{_head(src)} max_cudagraph_capture_size={cfg['max_cudagraph_capture_size']}")
        if name in ("compilation_config", "O", "optimization_level", "max_cudagraph_capture_size") and eager:
            found.ignored.append(f"{src} (--enforce-eager: no CUDA graphs)")  # vLLM then captures none (size 0)
        elif name in VLLM_DIRECT:
            found._put(VLLM_DIRECT[name][0], value, src, VLLM_DIRECT[name][1])
        elif name == "speculative_config":
            _vllm_spec(found, _json(found, value, src), _head(src))
        elif name == "speculative_model":
            _method_from_draft(found, str(value), src)
        elif name == "enforce_eager":
            found._put("cuda_graphs", "none", src) if str(value).lower() in _TRUE else None
        elif name == "compilation_config" and cfg.get("cudagraph_mode") is not None:
            _graphs(found, cfg["cudagraph_mode"], f"{_head(src)} cudagraph_mode={cfg['cudagraph_mode']!r}")
        elif name in ("O", "optimization_level"):  # -O: the same at 0 and 3 before and after 0.12
            levels = {"0": 0, "3": 2} if name == "O" else {"0": 0, "1": 1, "2": 2, "3": 2}
            _graphs(found, levels[str(value)], src) if str(value) in levels else found._skip("cuda_graphs", src, O_LEVEL)
        elif name in ("kv_cache_dtype", "quantization", "dtype"):
            _dtypes(found, name, value, src, ctx, resolved)
        elif name in ("enable_expert_parallel", "data_parallel_size"):
            _parallel(found, name, value, src, ctx)
        elif name == "cudagraph_capture_sizes":
            found._skip("cuda_graph_max", src, SGLANG_UNMAPPED["cuda_graph_bs"][1])
        elif not resolved and name != "compilation_config":
            found.ignored.append(src)


def _sglang(found: ServerArgs, items: list[tuple[str, Any, str]], resolved: bool = False) -> None:
    ctx = {n: v for n, v, _ in items}
    algo, topk = str(ctx.get("speculative_algorithm")).upper(), int(ctx.get("speculative_eagle_topk") or 1)
    eager = str(ctx.get("disable_cuda_graph", False)).lower() in _TRUE
    for name, value, src in ((n, v, s) for n, v, s in items if v is not None and v != "None"):
        if name in ("cuda_graph_max_bs", "cuda_graph_bs") and eager:
            if not resolved:
                found.ignored.append(f"{src} (--disable-cuda-graph: no CUDA graphs)")
        elif name in SGLANG_DIRECT:
            found._put(SGLANG_DIRECT[name][0], value, src, SGLANG_DIRECT[name][1])
        elif name == "speculative_algorithm":
            (found._put("method", SGLANG_METHODS[algo], src) if algo in SGLANG_METHODS else
             found._skip("method", src, "no crossover method"))
        elif name == "speculative_draft_model_path" and SGLANG_METHODS.get(algo) not in ("mtp", "ngram"):
            found._put("draft", str(value), src)
        elif name == "speculative_num_steps" and algo != "NGRAM":
            found._put("k", value, src, int)
            if topk > 1:
                found._skip("k", f"speculative_eagle_topk={topk}", "a tree of depth k: give crossover's --tree")
        elif name == "speculative_num_draft_tokens" and algo == "NGRAM":
            found._skip("k", src, "SGLang's n-gram drafts a tree of this many tokens")
        elif name in ("disable_cuda_graph", "disable_decode_cuda_graph") and (
                str(value).lower() in _TRUE or resolved and "cuda_graph_backend_decode" not in ctx):
            found._put("cuda_graphs", "none" if str(value).lower() in _TRUE else "full", src)
        elif name == "cuda_graph_backend_decode" and str(value) in SGLANG_BACKENDS:
            found._put("cuda_graphs", SGLANG_BACKENDS[str(value)], src)
        elif name == "chunked_prefill_size":
            found._put("chunked_prefill", float(value) > 0, src)
        elif name == "disable_overlap_schedule" and not resolved:  # not the log's, which speculation may set
            found._put("async_scheduling", str(value).lower() not in _TRUE, src)
        elif name in SGLANG_UNMAPPED and not (resolved and name == "cuda_graph_bs"):  # the log's max_bs is its largest
            found._skip(SGLANG_UNMAPPED[name][0], src, SGLANG_UNMAPPED[name][1])
        elif name in ("kv_cache_dtype", "quantization", "dtype"):
            _dtypes(found, name, value, src, ctx, resolved)
        elif name in ("ep_size", "dp_size", "enable_dp_attention"):
            _parallel(found, name, value, src, ctx)
        elif name not in SGLANG_FLAGS and not resolved:
            found.ignored.append(src)
    n = found.values.get("data_parallel", (1, ""))[0]
    if n > 1 and "tp" in found.values:  # SGLang's tp_size counts every attention rank's GPUs: crossover's --tp per rank
        tp, where = found.values["tp"]
        if tp % n:
            raise found._fail(f"{where}: tp_size {tp} does not divide by dp_size {n} (SGLang asserts it)")
        found.values["tp"] = (tp // n, f"{where}, over {n} data-parallel attention ranks")


def _command(found: ServerArgs, text: str) -> ServerArgs:
    text = "\n".join(line for line in re.sub(r"\\\r?\n", " ", text).splitlines() if not line.lstrip().startswith("#"))
    tokens = _words(found, text)
    starts = [("sglang" if "sglang" in (tokens[i - 1] if t == "serve" else t) else "vllm", i + 1, t == "serve")
              for i, t in enumerate(tokens) if t.startswith("vllm/vllm-openai") or t in (
                  "vllm.entrypoints.openai.api_server", "sglang.launch_server") or (  # and `sglang serve` (0.5.5+)
                  t == "serve" and i and Path(tokens[i - 1]).name in ("vllm", "sglang"))]
    if len(starts) != 1:
        raise found._fail("more than one server launch; give one server's command per file" if starts else
                          f"not {EXPECTED} (no `vllm serve`, `vllm.entrypoints.openai.api_server`, "
                          "`sglang.launch_server` or startup log line)")
    found.engine, i, positional = starts[0]
    found.engine_version = (re.findall(r"^vllm/vllm-openai:v?(\d+\.\d+[\w.]*)$", tokens[i - 1]) or [None])[0]
    items: list[tuple[str, Any, str]] = []
    dotted: dict[str, tuple[dict[str, Any], list[str]]] = {}
    toks = tokens[i:]
    while toks and toks[0] not in _STOPS and not re.match(r"\d*[<>]", toks[0]):  # to `&&`, `;`, `> log`, `2>&1`
        t = toks.pop(0)
        if not t.startswith("-") or _NUMBER.fullmatch(t):
            model = ALIASES[found.engine].get("model", "model")  # `vllm serve MODEL`, `sglang serve MODEL` (0.5.23)
            items.append((model, t, t)) if positional and not any(n == model for n, _, _ in items) else found.ignored.append(t)
            continue
        flag, eq, value = t.partition("=")
        if found.engine == "vllm" and re.fullmatch(r"-O\d", flag):
            flag, eq, value = "-O", "=", flag[2:]
        name, dot, sub = flag.lstrip("-").partition(".")
        name = ALIASES[found.engine].get(name.replace("-", "_"), name.replace("-", "_"))
        if name.startswith("no_") and name[3:] in BOOL_FLAGS:
            name, eq, value = name[3:], "=", "false"
        takes = name not in BOOL_FLAGS or (toks and toks[0].lower() in ("true", "false"))
        if not eq and takes and toks and toks[0] not in _STOPS and (toks[0][:1] not in "-<>" or _NUMBER.fullmatch(toks[0])):
            value, eq = toks.pop(0), " "
        quoted = value if re.fullmatch(r"[\w@%+=:,./-]+", value) else "'" + value.replace("'", "'\\''") + "'"
        src, value = (f"{t} {quoted}" if eq == " " else t), (value if eq else "true")
        if found.engine == "vllm" and name == "O":
            name = "O" if value.isdigit() and not dot else "compilation_config"
        if dot:
            d, srcs = dotted.setdefault(name, ({}, []))
            d[sub] = _literal(value) if value[:1] in "[{" or value.isdigit() else value
            srcs.append(src)
        else:
            items.append((name, value, src))
    items += [(name, d, " ".join(srcs)) for name, (d, srcs) in dotted.items()]
    (_vllm if found.engine == "vllm" else _sglang)(found, items)
    found.form = "command line"
    return found


def _log(found: ServerArgs, text: str) -> ServerArgs:
    lists: dict[str, list[tuple[str, Any, str]]] = {"listed": [], "resolved": []}
    for n, line in enumerate(text.splitlines(), 1):
        if m := _VERSION.search(line):
            v, found.engine = m.group(1) or m.group(3), "vllm"
            if found.engine_version not in (None, v):
                raise found._fail(f"contradicts itself: vLLM {found.engine_version} and {v} (line {n})")
            found.engine_version, nums, where = v, tuple(int(x) for x in re.findall(r"\d+", v)[:2]), f"line {n}"
            if m.group(3):  # the profiles of engines/*.yaml
                profile = ("vllm-v0" if m.group(2) in (None, "0") else "vllm-0.10" if nums == (0, 10) else
                           "vllm" if nums >= (0, 11) else None)
                (found._put("engine", profile, f"{where}: {m.group(0)}") if profile else
                 found._skip("engine", f"{where}: {m.group(0)}", "no crossover profile for this version"))
        for marker, into, label in _MARKERS:
            if (at := line.find(marker)) >= 0:
                at += len(marker) - 1  # the bracketed text opening there (to the line's end when it never closes)
                body = next((line[at:i + 1] for i, c, depth in _scan(line, at) if depth == 0), line[at:])
                fields = _literal(body) if body.startswith("{") else _fields(body[1:-1])
                lists[into] += [(k, v, f"line {n} {label}: {k}={v!r}") for k, v in (fields or {}).items() if v is not None]
                found.engine = found.engine or ("sglang" if into == "resolved" else "vllm")
        if m := re.search(ASYNC_LOG, line):  # the resolved setting, logged
            lists["resolved"].append(("async_scheduling", m.group(1) == "enabled", f"line {n}: {m.group(0)}"))
        if m := _CONFIG.search(line):
            for k, v in _fields(m.group(1)).items():
                if k == "speculative_config" and isinstance(v, str) and "(" in v:  # SpeculativeConfig(method=, model=,
                    v = {_RENAME.get(a, a): b for a, b in _fields(v[v.index("(") + 1:-1]).items()}  # num_spec_tokens=)
                lists["resolved"].append((k, v, f"line {n} engine config: {k}={v!r}"))
            found.engine = "vllm"
    if found.engine == "sglang":
        found._put("engine", "sglang", "an SGLang server (server_args=ServerArgs)")
        _sglang(found, lists["resolved"], resolved=True)
    else:
        _vllm(found, lists["listed"])
        _vllm(found, lists["resolved"], resolved=True)
    found.form = "startup log"
    return found


def read_server_args(path: str | Path) -> ServerArgs:
    """A server's launch configuration from `path` (a command line, a --speculative-config JSON object or
    a startup log, told apart by content); one FileError line when it is none or contradicts itself."""
    found = ServerArgs(str(path))
    try:
        text = read_text(Path(path), EXPECTED).lstrip("\ufeff")
        if not text.strip().startswith("{"):
            return _log(found, text) if _LOG.search(text) else _command(found, text)
        if not isinstance(cfg := json.loads(text), dict) or not {"method", "model", "num_speculative_tokens"} & set(cfg):
            raise found._fail("a JSON object without method, model or num_speculative_tokens: no --speculative-config")
        _vllm_spec(found, cfg, "--speculative-config")
    except FileError as e:  # read_text's too (missing, unreadable, too large), naming the input
        raise FileError(str(e), parameter="server_args") from None
    except json.JSONDecodeError as e:
        raise found._fail(f"starts as a JSON object but is no JSON ({e.msg}, line {e.lineno})") from None
    except (ValueError, TypeError, RecursionError) as e:  # a value of the wrong kind; nesting past Python's limit
        raise found._fail(f"a value cannot be read ({type(e).__name__}: {e})") from None
    found.engine, found.form = "vllm", "speculative config"
    return found


def crossover_model_name(hf_id: str, dirs: Sequence[str | Path] | None = None) -> str:
    """The crossover model whose spec (in `dirs`; None: the shipped models/*.yaml, for a user's folders pass
    crossover.specs.loader.search_dirs("models")) has `hf_id` as its `hf_repo` or in `aliases` (case-insensitive);
    `hf_id` itself when none does (a local path, an EAGLE head: the caller decides)."""
    package = Path(__file__).resolve().parent.parent
    dirs = [package / "_data" / "models", package.parent / "models"] if dirs is None else dirs
    want = str(hf_id).strip().lower()
    for p in (p for d in dirs for p in sorted(Path(d).glob("*.yaml"))):
        head = p.read_text(encoding="utf-8", errors="replace")[:4096] if p.is_file() else ""
        ids = re.findall(r"^hf_repo:\s*['\"]?([^'\"\s#]+)", head, re.M)
        ids += [x.strip(" '\"") for a in re.findall(r"^aliases:\s*\[([^\]]*)\]", head, re.M) for x in a.split(",")]
        if (name := re.search(r"^name:\s*['\"]?([^'\"\s#]+)", head, re.M)) and want in {i.lower() for i in ids if i}:
            return name.group(1)
    return hf_id
