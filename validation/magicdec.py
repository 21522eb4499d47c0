"""The MagicDec per-step tables (published_points.csv rows MD-*) as crossover scenarios.

MagicDec publishes, per batch and context, the measured per-step decode time T_AR and the
per-token time with speculation T_SD, with gamma (k) and the measured tokens per step Omega (tau).
That makes them the sharpest public test of a step-time model: absolute times and the speedup.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARDWARE = {"NVIDIA A100 (8x)": "a100-80gb-pcie", "NVIDIA L40 (8x)": "l40", "NVIDIA H100 (8x)": "h100-sxm",
            "NVIDIA H100 (4x)": "h100-sxm"}
MODELS = {"llama-2-7b-32k": "llama-2-7b-32k", "llama2-7b-32k": "llama-2-7b-32k", "llama-3.1-8b": "llama-3.1-8b",
          "llama3.1-8b": "llama-3.1-8b", "mistral-7b-v0.3": "mistral-7b", "qwen-2.5-32b": "qwen2.5-32b"}
DRAFTS = {"TinyLlama-1.1B": "tinyllama-1.1b", "Llama-3.2-1B": "llama-3.2-1b"}
# StreamingLLM drafts keep 512 cached tokens (table captions). SnapKV budgets are "optimal" and not
# published per row; those rows are left out of the sharp test rather than guessed.
STREAMING_BUDGET = 512


@dataclass(frozen=True)
class Row:
    """One MagicDec row with per-step times."""

    id: str
    hardware: str
    tp: int
    model: str
    draft: str | None  # None = self-speculation (the target with a KV budget)
    k: int
    tau: float
    context: int
    batch: int
    t_sd_ms: float  # per token with speculation
    t_ar_ms: float  # per decode step without
    speedup: float


def rows(path: Path = HERE / "published_points.csv") -> list[Row]:
    """MagicDec rows that carry per-step times and a StreamingLLM draft budget."""
    return _rows(path, sharp=True)


def step_rows(path: Path = HERE / "published_points.csv") -> list[Row]:
    """The other MagicDec rows with a measured decode step (SnapKV drafts, whose KV budget is not
    published per row, and the MLC-LLM table): a check of the decode step time alone."""
    return _rows(path, sharp=False)


def _rows(path: Path, sharp: bool) -> list[Row]:
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if not r["id"].startswith("MD-") or not r["value_on"] or not r["value_off"]:
                continue
            unbudgeted = "SnapKV" in r["method"] + r["draft_model"] or r["id"].startswith("MD-T5")
            if unbudgeted == sharp:
                continue
            omega = re.search(r"Omega=([\d.]+)", r["acceptance"])
            if sharp and not omega:
                continue
            model = MODELS.get(r["target_model"].lower())
            hw = HARDWARE.get(r["hardware"])
            if model is None or hw is None:
                continue
            self_spec = r["draft_model"] in ("StreamingLLM", "Self-spec (StreamingLLM)", "SnapKV")
            draft = None if self_spec else DRAFTS[r["draft_model"]]
            batch = int(float(r["load_value"]))
            t_on, t_off = float(r["value_on"]), float(r["value_off"])
            if r["id"].startswith("MD-T5"):  # MLC-LLM publishes tokens/s: per-step time of the batch
                t_on, t_off = batch / t_on * 1e3, batch / t_off * 1e3
            out.append(Row(r["id"], hw, int(r["tp"]), model, draft, int(r["k"]),
                           float(omega.group(1)) if omega else float("nan"), int(r["input_len"]), batch, t_on,
                           t_off, float(r["speedup"])))
    return out


def predict_off(row: Row, efficiency=None) -> float:
    """Predicted T_AR (ms): one decode step of the batch at the row's context."""
    import numpy as np

    from crossover.roofline import step_time
    from crossover.specs import Deployment, Efficiency, load_hardware, load_model

    dep = Deployment(model=load_model(row.model), hardware=load_hardware(row.hardware), tp=row.tp,
                     efficiency=efficiency or Efficiency())
    return float(step_time(dep, np.array([row.batch]), 1, row.context).total[0]) * 1e3


def predict_row(row: Row, efficiency=None) -> tuple[float, float]:
    """(predicted T_AR ms, predicted T_SD ms per token) for one row."""
    import numpy as np

    from crossover.roofline import step_time
    from crossover.specs import Deployment, Efficiency, load_hardware, load_model
    from crossover.speculation import Acceptance, Speculation, spec_step_time

    eff = efficiency or Efficiency()
    target = load_model(row.model)
    dep = Deployment(model=target, hardware=load_hardware(row.hardware), tp=row.tp, efficiency=eff)
    draft = load_model(row.draft) if row.draft else target
    spec = Speculation("draft", row.k, Acceptance.mean_length(row.tau), draft=draft, draft_kv_budget=STREAMING_BUDGET)
    off = float(step_time(dep, np.array([row.batch]), 1, row.context).total[0])
    on = float(spec_step_time(dep, spec, np.array([row.batch]), row.context).total[0]) / row.tau
    return off * 1e3, on * 1e3


# --------------------------------------------------------------- MagicDec v1 blog table (MD-V1-*)
@dataclass(frozen=True)
class V1Row:
    """One v1-table row: speedup only, gamma 'optimal per row', acceptance not published."""

    id: str
    hardware: str
    tp: int
    model: str
    draft: str | None
    k: int
    context: int
    batch: int
    speedup: float


def v1_groups(path: Path = HERE / "published_points.csv") -> list[list[V1Row]]:
    """v1 rows grouped by (target, draft, context), batches ascending; groups of one are dropped
    (nothing is left to predict once acceptance is calibrated on the lowest batch)."""
    groups: dict[tuple, list[V1Row]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if not r["id"].startswith("MD-V1"):
                continue
            self_spec = r["draft_model"].startswith("Self-spec") or r["draft_model"] == "StreamingLLM"
            row = V1Row(r["id"], HARDWARE[r["hardware"]], int(r["tp"]), MODELS[r["target_model"].lower()],
                        None if self_spec else DRAFTS[r["draft_model"]], int(r["k"].split()[0]),
                        int(r["input_len"]), int(float(r["load_value"])), float(r["speedup"]))
            groups.setdefault((row.model, row.draft, row.context), []).append(row)
    return [sorted(g, key=lambda x: x.batch) for g in groups.values() if len(g) > 1]


def predict_v1_group(group: list[V1Row], efficiency=None) -> tuple[float, list[float]]:
    """(acceptance rate calibrated on the lowest batch, predicted speedups): the rate is a property
    of the draft/target pair, so rows at another gamma reuse it."""
    import numpy as np

    from crossover.roofline import step_time
    from crossover.specs import Deployment, Efficiency, load_hardware, load_model
    from crossover.speculation import Acceptance, Speculation, spec_step_time

    eff = efficiency or Efficiency()

    def speedup(r: V1Row, alpha: float) -> float:
        target = load_model(r.model)
        dep = Deployment(model=target, hardware=load_hardware(r.hardware), tp=r.tp, efficiency=eff)
        spec = Speculation("draft", r.k, Acceptance.rate(alpha), draft=load_model(r.draft) if r.draft else target,
                           draft_kv_budget=STREAMING_BUDGET)
        off = float(step_time(dep, np.array([r.batch]), 1, r.context).total[0])
        on = float(spec_step_time(dep, spec, np.array([r.batch]), r.context).total[0]) / spec.tau
        return off / on

    lo, hi = 0.0, 0.99
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if speedup(group[0], mid) < group[0].speedup else (lo, mid)
    alpha = 0.5 * (lo + hi)
    return alpha, [speedup(r, alpha) for r in group]
