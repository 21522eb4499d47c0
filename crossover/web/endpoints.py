"""What each JSON endpoint computes, as calls of the library API (crossover.scenario, predict,
policy, simulate and their `.to_dict()`; the measured panel's are in sweeps.py); nothing here
models anything.

Every function takes the request's query (a mapping of strings) and returns a JSON-ready dict;
bad input raises CrossoverError (or pydantic's ValidationError), which the server answers with
HTTP 400 and one line.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import crossover

from .. import defaults
from ..model.scenario import memory_limits
from ..errors import CrossoverError
from ..model.memory import batch_ceiling
from ..model.ops import total_params
from ..serving.sweep import check_fits
from ..specs.loader import available, resolve
from ..model.speculation import METHODS
from ..specs.workload import load_workload
from . import params
from .params import Query

POLICY_KEYS = ("schedule", "speculate_below_batch", "engine_configs", "rule", "gains")


def options() -> dict[str, Any]:
    """What the page's pickers offer: the spec libraries, methods, engines, cost modes, defaults."""
    models = []
    for name, path in available("models").items():
        m = resolve(str(path), "models")
        models.append({"name": name, "display_name": m.display_name, "params_b": round(total_params(m) / 1e9, 2),
                       "vocab_size": m.vocab_size, "moe": bool(m.moe)})
    hardware = []
    for name, path in available("hardware").items():
        h = resolve(str(path), "hardware")
        hardware.append({"name": name, "display_name": h.display_name, "memory_gb": h.memory_gb,
                         "bandwidth_gb_s": h.memory_bandwidth_gb_s, "gpus_per_node": h.gpus_per_node})
    return {
        "version": crossover.__version__,
        "models": models, "hardware": hardware, "workloads": sorted(available("workloads")),
        "methods": list(METHODS), "engines": list(params.engines()), "cost_modes": list(params.cost_modes()),
        "takes": {key: params.scenario_takes(key) for key in ("engine", "cost")},
        "defaults": {"model": defaults.DEFAULT_MODEL, "hardware": defaults.DEFAULT_HARDWARE, "method": defaults.DEFAULT_METHOD,
                     "k": defaults.DEFAULT_K, "acceptance": defaults.DEFAULT_ACCEPTANCE, "context": defaults.DEFAULT_CONTEXT},
        "limits": {"max_k": params.MAX_K, "max_levels": params.MAX_LEVELS, "max_num_prompts": params.MAX_NUM_PROMPTS},
    }


def _batches(sc, q: Query) -> tuple[list[float], list[str]]:
    """A log-spaced grid over the page's batch range, capped at what the KV cache could ever hold."""
    lo, hi, n = params.batch_range(q)
    notes = []
    ceiling = float(batch_ceiling(sc.deployment))
    if hi > ceiling:
        notes.append(f"batch range capped at {ceiling:g}, the most sequences this deployment's KV cache could hold")
        hi = ceiling
    if lo >= hi:
        raise CrossoverError(f"bmin {lo:g} is beyond the most sequences this deployment could hold ({ceiling:g})")
    return [float(x) for x in np.geomspace(lo, hi, n)], notes


def whatif(q: Query) -> dict[str, Any]:
    """The what-if charts: predict over the batch range, with the per-op breakdown at one batch."""
    t0 = time.perf_counter()
    sc = crossover.scenario(**params.scenario_kwargs(q))
    batches, notes = _batches(sc, q)
    at = min(float(params.number(q, "at", 32, lo=1, hi=1 << 20)), batches[-1])  # type: ignore[arg-type]
    pred = crossover.predict(sc, batches=batches, breakdown=at).to_dict()
    return {"predict": pred, "breakdown": pred.pop("breakdown"), "inputs": pred.pop("inputs"), "notes": notes,
            "server_ms": round((time.perf_counter() - t0) * 1e3, 2)}


def policy(q: Query) -> dict[str, Any]:
    """The best k at every batch of the page's range (up to the memory limit) and the engine configs
    that apply it (a second request: the library's k sweep costs more than the curves)."""
    t0 = time.perf_counter()
    sc = crossover.scenario(**params.scenario_kwargs(q))
    batches, _ = _batches(sc, q)
    kmax = int(params.number(q, "kmax", 8, lo=1, hi=params.MAX_K, integer=True))  # type: ignore[arg-type]
    top = max(1, min(int(batches[-1]), int(memory_limits(sc)[0])))
    pol = crossover.policy(sc, k_max=max(kmax, sc.speculation.k), batch_max=top).to_dict()
    return {**{k: pol[k] for k in POLICY_KEYS}, "batch_max": top,
            "server_ms": round((time.perf_counter() - t0) * 1e3, 2)}


def simulation_kwargs(q: Query) -> dict[str, Any]:
    """crossover.simulate's keywords from the simulation tab (checked before a job starts)."""
    sk = params.scenario_kwargs(q, lengths=False)
    run = {"num_prompts": params.number(q, "num_prompts", 200, lo=10, hi=params.MAX_NUM_PROMPTS, integer=True),
           "seed": params.number(q, "seed", 0, lo=0, hi=2**31, integer=True)}
    return {"workload": params.spec_name(q, "workload", "workloads", "sharegpt"), "concurrency": params.levels(q),
            "run": run, **sk}


def check_simulation(kw: dict[str, Any]) -> None:
    """Build the scenario the simulation will run (as crossover.simulate does: the workload's mean
    lengths) and check the top concurrency fits its KV cache, so bad input is a 400 before any job starts."""
    args = {k: v for k, v in kw.items() if k not in ("workload", "concurrency", "run")}
    wl, base = load_workload(kw["workload"])
    p_mean, o_mean = wl.means(base=base)
    sc = crossover.scenario(workload=wl, prompt_len=p_mean, output_len=o_mean, **args)
    check_fits(sc, wl, max(kw["concurrency"]), base)


def simulate(kw: dict[str, Any], progress: Callable[[int, int, float], None]) -> dict[str, Any]:
    """One serving simulation sweep, speculation off and on (run in a job thread)."""
    return crossover.simulate(progress=progress, **kw).to_dict()
