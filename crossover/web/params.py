"""The page's query string as keyword arguments of the library API, with one-line errors.

The page keeps its whole state in the URL (`#model=...&k=4`) and sends the same keys to the server,
so a link reproduces a what-if exactly. Names of specs must be names in the spec libraries (never
paths): the server reads no file the user did not upload.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .. import defaults
from ..api import build
from ..errors import CrossoverError
from ..specs.loader import available
from ..model.speculation import MAX_K, METHODS
from ..model.step import COST_MODES

Query = Mapping[str, str]

# Bounds of the page's own inputs (the library checks the physics; these only keep a request small).
MAX_BATCH_POINTS = 96
MAX_LEVELS = 16
MAX_NUM_PROMPTS = 5000


def engines() -> tuple[str, ...]:
    """Engines the scenario builder knows (build.ENGINES where the library has it)."""
    return tuple(getattr(build, "ENGINES", ("vllm",)))


def cost_modes() -> tuple[str, ...]:
    return tuple(COST_MODES)


def scenario_takes(name: str) -> bool:
    """Whether `crossover.scenario` takes the option `name` (engine=, cost= arrive in newer versions)."""
    from dataclasses import fields

    from ..api.records import ScenarioOptions

    return name in {f.name for f in fields(ScenarioOptions)}


def shown(text: str, limit: int = 60) -> str:
    """A value of the request as an error line echoes it: quoted, one line, at most ~`limit` characters."""
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def spec_name(q: Query, key: str, kind: str, default: str | None) -> str | None:
    """A spec by its library name; paths and unknown names are refused."""
    value = q.get(key) or default
    if value is None:
        return None
    names = available(kind)  # type: ignore[arg-type]
    if value not in names:
        what = {"models": "model", "hardware": "hardware", "workloads": "workload"}[kind]
        raise CrossoverError(f"unknown {what} {shown(value)} ({key}=): choose a name from the spec library")
    return value


def number(q: Query, key: str, default: float | None = None, *, lo: float | None = None,
           hi: float | None = None, integer: bool = False) -> float | None:
    """A finite number from the query (None or `default` when absent or empty)."""
    text = q.get(key, "").strip()
    if text == "":
        return default
    try:
        v = float(text)
    except ValueError:
        raise CrossoverError(f"{key} must be a number (got {shown(text)})") from None
    if not math.isfinite(v):
        raise CrossoverError(f"{key} must be a finite number (got {shown(text)})")
    if integer and v != int(v):
        raise CrossoverError(f"{key} must be a whole number (got {shown(text)})")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bounds = (f"lie in [{lo:g}, {hi:g}]" if lo is not None and hi is not None
                  else f"be >= {lo:g}" if lo is not None else f"be <= {hi:g}")
        raise CrossoverError(f"{key} must {bounds} (got {shown(text)})")
    return int(v) if integer else v


def choice(q: Query, key: str, options: tuple[str, ...], default: str) -> str:
    value = q.get(key) or default
    if value not in options:
        raise CrossoverError(f"{key} must be one of {', '.join(options)} (got {shown(value)})")
    return value


def flag(q: Query, key: str) -> bool:
    return q.get(key, "") in ("1", "true", "on", "yes")


def speculation_kwargs(q: Query) -> dict[str, Any]:
    """method, k, draft and the acceptance (rate or tau) for crossover.scenario / simulate."""
    kw: dict[str, Any] = {"method": choice(q, "method", METHODS, defaults.DEFAULT_METHOD),
                          "k": number(q, "k", defaults.DEFAULT_K, lo=1, hi=MAX_K, integer=True)}
    if kw["method"] == "draft":
        draft = q.get("draft") or "self"
        kw["draft"] = draft if draft == "self" else spec_name(q, "draft", "models", None)
    if choice(q, "acc", ("rate", "tau"), "rate") == "tau":
        kw["tau"] = number(q, "tau", None)  # the library checks it against k + 1
    else:
        kw["acceptance"] = number(q, "acceptance", None)  # checked (and 70 -> 0.70 suggested) there
    for key in ("engine", "cost"):  # passed only where the library takes them
        options = engines() if key == "engine" else cost_modes()
        value = q.get(key)
        if value:
            choice(q, key, options, options[0])
            if scenario_takes(key):
                kw[key] = value
    return kw


def scenario_kwargs(q: Query, *, lengths: bool = True) -> dict[str, Any]:
    """Every keyword of crossover.scenario the page sets."""
    tp = q.get("tp", "auto")
    kw: dict[str, Any] = {
        "model": spec_name(q, "model", "models", defaults.DEFAULT_MODEL),
        "hardware": spec_name(q, "hardware", "hardware", defaults.DEFAULT_HARDWARE),
        "tp": None if tp in ("", "auto") else number(q, "tp", None, lo=1, hi=1024, integer=True),
        **speculation_kwargs(q),
    }
    if lengths:  # as the CLI: --context a whole number of tokens, the mean lengths > 0 (here >= 1)
        kw["context"] = number(q, "context", defaults.DEFAULT_CONTEXT, lo=0, integer=True)
        if flag(q, "mix"):
            kw["prompt_len"] = number(q, "prompt", 1024, lo=1)
            kw["output_len"] = number(q, "output", 256, lo=1)
            kw.pop("context")  # prompt + output / 2, as the library defines it
    return kw


def batch_range(q: Query) -> tuple[float, float, int]:
    """(smallest batch, largest batch, points) of the curves."""
    lo = number(q, "bmin", 1, lo=1, hi=1 << 20)
    hi = number(q, "bmax", 512, lo=1, hi=1 << 20)
    if hi <= lo:  # type: ignore[operator]
        raise CrossoverError(f"bmax must exceed bmin (got {lo:g}..{hi:g})")
    points = number(q, "points", 64, lo=2, hi=MAX_BATCH_POINTS, integer=True)
    return float(lo), float(hi), int(points)  # type: ignore[arg-type]


def levels(q: Query, key: str = "levels") -> list[int]:
    """Concurrency levels of a simulation: 1,8,32 (whole numbers >= 1, at most MAX_LEVELS)."""
    text = q.get(key) or "1,8,32,64,128"
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            try:
                v = int(part)
            except ValueError:
                raise CrossoverError(f"{key}: {shown(part)} is no whole number; write e.g. 1,8,32,128") from None
            if v < 1:
                raise CrossoverError(f"{key}: concurrency {v} must be >= 1")
            out.append(v)
    if not out or len(out) > MAX_LEVELS:
        raise CrossoverError(f"{key}: give 1 to {MAX_LEVELS} concurrency levels, e.g. 1,8,32,128")
    return sorted(set(out))
