"""The servers' launch configurations as measured's inputs (issue 22, item 2): `--server-args FILE
[FILE]` (a vLLM or SGLang command line, a --speculative-config JSON or a startup log; one per server,
the speculating one known by its method) become crossover.scenario keywords. What the files say beats
the tool's defaults; a value the user gave as well must agree with them, and two files must agree on
what both servers share. Each value is said with where it came from, and what the files leave to the
engine is said too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError
from .diagnostics import Diagnostic

# what the two servers of a sweep share (the seed's method: identical but for speculation)
SHARED = ("model", "engine", "tp", "weight_dtype", "kv_dtype", "chunked_prefill", "gpu_memory_utilization",
          "expert_parallel", "data_parallel", "cuda_graph_max")
SPECULATIVE = ("method", "k", "draft", "draft_tp")
# the scheduler limits the files may give: no scenario keyword, but measured sizes each server's
# CUDA-graph limit from them where the engine does (specs/capture.py for_servers); the speculating
# server's own, where two files differ, as max_num_seqs_speculating
SAID_ONLY = ("max_num_seqs", "max_num_batched_tokens")


def _library_model(name: Any) -> bool:
    from ..specs import load_model

    try:
        load_model(str(name))
    except Exception:  # noqa: BLE001 - an HF id no spec declares: not a library model
        return False
    return True


def _keeps_async(r, given: dict[str, Any]) -> bool:
    """Whether the speculating server's method keeps the engine's async scheduling (EngineProfile.overlaps:
    then its setting is both servers'); the engine the user gave, else the file's, else the default."""
    from ..defaults import DEFAULT_ENGINE
    from ..specs.loader import load_engine

    engine = given.get("engine") or r.values.get("engine", (DEFAULT_ENGINE,))[0]
    return load_engine(engine).speculating.overlaps(r.values.get("method", (None,))[0])


def launch_keywords(paths: Sequence[str | Path] | str | Path, given: dict[str, Any]
                    ) -> tuple[dict[str, Any], Diagnostic]:
    """(the scenario keywords the launch files give, beyond what the user gave, and one note saying each
    value with its source). `given`: the keywords the user passed (None: not given)."""
    from ..measurements.server_args import ENGINE_DEFAULT, read_server_args

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not 1 <= len(paths) <= 2:
        raise InputError("--server-args takes one launch configuration, or one per server (two files)",
                         parameter="server_args")
    read = [read_server_args(p) for p in paths]
    given = {**given, "expert_parallel": given.get("expert_parallel") or None}  # a switch: off is not given
    on = [r for r in read if r.values.get("method", (None,))[0] not in (None, "")]
    off = [r for r in read if r not in on]
    if len(on) > 1 or len(off) > 1:
        both = "speculate" if len(on) > 1 else "run without speculation"
        raise InputError(f"--server-args: {paths[0]} and {paths[1]} both {both}; give one file per server",
                         parameter="server_args")
    out: dict[str, Any] = {}
    where: dict[str, str] = {}
    said: dict[str, list[str]] = {}  # per file: what it gave, with where it says it

    def put(name: str, value: Any, source: str, path: str, flag: str) -> None:
        if value is None:
            return
        if given.get(name) is not None and given[name] != value:
            raise InputError(f"--server-args {source} says {name.replace('_', ' ')} {value}, which contradicts the "
                             f"{given[name]} given: give the one the sweep ran", parameter=name)
        if name in out and out[name] != value:
            raise InputError(f"--server-args: {where[name]} says {name.replace('_', ' ')} {out[name]}, {source} says "
                             f"{value}: the two servers must share it", parameter=name)
        if given.get(name) is None:
            out[name] = value
        where.setdefault(name, source)
        said.setdefault(path, []).append(f"{name.replace('_', ' ')} {value} ({flag})")

    for r in [*off, *on]:
        kw = r.scenario_keywords()
        for name in (*SHARED, *SPECULATIVE, "cuda_graphs", "async_scheduling", *SAID_ONLY):
            if name not in kw:
                continue
            value, flag = kw[name], r.values[name][1]
            src = f"{r.path}: {flag}"
            if name in SPECULATIVE and r not in on:
                continue
            if name in ("model", "draft") and not _library_model(value):
                said.setdefault(r.path, []).append(f"{name} {value} ({flag}: no library model; give --{name})")
                continue
            if name == "async_scheduling" and r in on and (off or not (value or _keeps_async(r, given))):
                said.setdefault(r.path, []).append(f"async scheduling {value} ({flag}: the speculating server's, "
                                                   "which vLLM sets by the method; the other server's decides)")
            elif name == "cuda_graphs":  # each server's own mode; one file alone: both servers ran it
                target = "cuda_graphs_speculating" if r in on and off else "cuda_graphs"
                put(target, value, src, r.path, flag)
            elif name in SAID_ONLY:
                key = f"{name}_speculating" if r in on and off else name
                out.setdefault(key, value)
                said.setdefault(r.path, []).append(f"{name.replace('_', ' ')} {value} ({flag}; sizes the CUDA-graph "
                                                   "limit where the engine does, not the batch)")
            else:
                put(name, value, src, r.path, flag)
    provenance = [p for r in read for p in r.provenance()]
    runs_a_draft = bool(on) and on[0].values.get("method", (None,))[0] == "draft"
    graphs_said = {"cuda_graphs"} if {"cuda_graphs", "cuda_graphs_speculating"} & set(where) else set()
    modes = [out.get(k, given.get(k)) for k in ("cuda_graphs", "cuda_graphs_speculating")
             if k in where or k == "cuda_graphs"]
    eager = {"cuda_graph_max"} if modes and all(m == "none" for m in modes) else set()  # no graphs to limit
    beside = {*SAID_ONLY, *graphs_said, *eager, *(() if runs_a_draft else ("draft",))}  # said apart, or irrelevant
    left = sorted({p["input"] for p in provenance if p["source"].startswith(ENGINE_DEFAULT)} - set(where) - beside)
    unmapped = [f"{k}: {w}" for r in read for k, t, w in r.unmapped]
    message = "launch configuration: " + ("; ".join(f"{path}: {', '.join(items)}" for path, items in said.items())
                                          if said else "nothing the scenario takes")
    if left:
        message += f"; left to the engine's defaults: {', '.join(left)}"
    if unmapped:
        message += f"; not mapped: {'; '.join(unmapped)}"
    evidence = {"files": [str(p) for p in paths], "values": {k: out.get(k, given.get(k)) for k in where},
                "sources": where, "engine_defaults": left, "provenance": provenance}
    return out, Diagnostic("server_args", message, evidence=evidence)
