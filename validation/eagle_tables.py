"""The EAGLE-3 paper's batch tables (rows E3-T3-*, E3-T5-*) as crossover scenarios.

Protocol (the same for every series): acceptance is not published per batch, so tau is calibrated
on the lowest-batch point of each series, then the rest of the series is predicted.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# MT-bench: prompts of ~100 tokens and answers of a few hundred; the mean KV length over a decode
# is about 512 tokens. An assumption (the paper does not state it), the same for both tables.
MT_BENCH_CONTEXT = 512.0
SETUPS = {"E3-T3": ("h100-sxm", 3), "E3-T5": ("rtx-3090", 2)}
# The engine each table was measured on (its "batch size (...)" column): SGLang v0.4.4 on the H100
# (the sglang-0.4 profile: EAGLE-3 needs the 0.4.4.post2 wheel or later),
# vLLM on the RTX 3090; each series runs with that engine's profile (engines/*.yaml).
ENGINES = {"E3-T3": "sglang-0.4", "E3-T5": "vllm"}


@dataclass(frozen=True)
class Series:
    """One method on one device: batches and published speedups."""

    name: str
    hardware: str
    method: str
    k: int
    batches: tuple[float, ...]
    speedups: tuple[float, ...]


def series(path: Path = HERE / "published_points.csv") -> list[Series]:
    """The four EAGLE/EAGLE-3 x H100/RTX 3090 series."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            prefix = r["id"][:5]
            if prefix not in SETUPS:
                continue
            method = "eagle3" if "EAGLE-3" in r["method"] else "eagle"
            groups.setdefault((prefix, method), []).append((float(r["load_value"]), float(r["speedup"])))
    out = []
    for (prefix, method), pts in sorted(groups.items()):
        pts.sort()
        hw, k = SETUPS[prefix]
        out.append(Series(f"{prefix} {method}", hw, method, k, tuple(p[0] for p in pts), tuple(p[1] for p in pts)))
    return out


def scenario(s: Series, tau: float, efficiency=None):
    """The crossover scenario of a series at a given tau."""
    from crossover.model.scenario import Scenario
    from crossover.specs import Deployment, Efficiency, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation

    from crossover.specs.loader import load_engine

    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware(s.hardware), tp=1,
                     efficiency=efficiency or Efficiency(), engine=load_engine(ENGINES[s.name.split()[0]]))
    return Scenario(dep, Speculation(s.method, s.k, Acceptance.mean_length(tau)), MT_BENCH_CONTEXT)


def calibrate_tau(s: Series, efficiency=None) -> float:
    """The tau that reproduces the lowest-batch speedup of the series (bisection on [1, k+1])."""
    from crossover.analysis.curves import speedup
    from fit import bisect

    return bisect(lambda t: float(speedup(scenario(s, t, efficiency), [s.batches[0]])[0]), 1.0, float(s.k + 1),
                  s.speedups[0], iters=50, clamp=False)


def predict_series(s: Series, efficiency=None) -> tuple[float, list[float]]:
    """(calibrated tau, predicted speedups at the series' batches)."""
    from crossover.analysis.curves import speedup

    tau = calibrate_tau(s, efficiency)
    return tau, [float(x) for x in speedup(scenario(s, tau, efficiency), list(s.batches))]


# ------------------------------------------------------------------ EAGLE-1 Table 7 (rows E1-T7-*)
# EAGLE-1's default draft tree (crossover.speculation.EAGLE1_TREE_PATHS, mc_sim_7b_63 in the EAGLE
# repository): 25 nodes over 5 depths; one verify pass scores the root plus all 25 nodes.
E1_SETUPS = {"Vicuna-7B": ("vicuna-7b", "rtx-3090", 1), "LLaMA2-Chat-70B": ("llama-2-70b", "a100-40gb-sxm", 4)}


@dataclass(frozen=True)
class TreeRow:
    """One EAGLE-1 Table 7 row: a batch, the published speedup and the published tree tau."""

    id: str
    model: str
    hardware: str
    tp: int
    batch: int
    tau: float
    speedup: float


def e1_rows(path: Path = HERE / "published_points.csv") -> list[TreeRow]:
    """Table 7's speedup-by-batch rows (tree attention, tau published); the two memory-limited
    max-throughput rows compare different batches with an unpublished chain tau and are left out."""
    import re

    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if not r["id"].startswith("E1-T7") or "tree" not in r["k"]:
                continue
            model, hw, tp = E1_SETUPS[r["target_model"]]
            tau = float(re.search(r"tau=([\d.]+)", r["acceptance"]).group(1))  # type: ignore[union-attr]
            out.append(TreeRow(r["id"], model, hw, tp, int(float(r["load_value"])), tau, float(r["speedup"])))
    return out


def predict_tree_row(row: TreeRow) -> float:
    """Predicted speedup of one Table 7 row: the chain rate is set so the tree's tau is the
    published one (no calibration on the measured speedup)."""
    from crossover.model.scenario import Scenario
    from crossover.analysis.curves import speedup
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.speculation import EAGLE1_TREE_PATHS, Speculation
    from crossover.model.acceptance import Acceptance

    dep = Deployment(model=load_model(row.model), hardware=load_hardware(row.hardware), tp=row.tp)
    k = max(len(p) for p in EAGLE1_TREE_PATHS)

    def spec(a: float) -> Speculation:
        return Speculation("eagle", k, Acceptance.rate(a), tree_paths=EAGLE1_TREE_PATHS)

    from fit import bisect

    alpha = bisect(lambda a: spec(a).tau, 0.0, 0.999, row.tau, iters=50, clamp=False)  # tree tau rises with a
    return float(speedup(Scenario(dep, spec(alpha), MT_BENCH_CONTEXT), [row.batch])[0])
