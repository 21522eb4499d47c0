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
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if not r["id"].startswith("MD-") or not r["value_on"] or not r["value_off"]:
                continue
            if "SnapKV" in r["method"] + r["draft_model"] or r["id"].startswith("MD-T5"):
                continue
            omega = re.search(r"Omega=([\d.]+)", r["acceptance"])
            if not omega:
                continue
            model = MODELS.get(r["target_model"].lower())
            hw = HARDWARE.get(r["hardware"])
            if model is None or hw is None:
                continue
            draft = None if r["draft_model"] in ("StreamingLLM", "Self-spec (StreamingLLM)") else DRAFTS[r["draft_model"]]
            out.append(Row(r["id"], hw, int(r["tp"]), model, draft, int(r["k"]), float(omega.group(1)),
                           int(r["input_len"]), int(float(r["load_value"])), float(r["value_on"]),
                           float(r["value_off"]), float(r["speedup"])))
    return out


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
