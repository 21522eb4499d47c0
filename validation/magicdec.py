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


def _deployment(model: str, hardware: str, tp: int, efficiency=None):
    """The row's deployment. MagicDec's gpt-fast-style backend (sources.md, section 5: FlashInfer and
    CUDA graphs) runs static batches, each step captured whole at its own shape: no capture limit at
    the sizes it ran (graphs to 8192 tokens here) and no verify batch that misses its graph and runs
    attention outside it (no ragged host time), and no scheduler walking its requests each step (no host
    time per sequence); the rest of the host time is the default profile's."""
    from crossover.specs import Deployment, Efficiency, load_hardware, load_model
    from crossover.specs.loader import load_engine

    eff = (efficiency or Efficiency()).model_copy(update={"ragged_per_seq_s": 0.0, "host_per_seq_s": 0.0})
    return Deployment(model=load_model(model), hardware=load_hardware(hardware), tp=tp,
                      engine=load_engine("vllm").configured(cuda_graph_max=8192), efficiency=eff)


def _step_ms(dep, batch: int, context: int) -> float:
    """T_AR (ms): one decode step of the batch."""
    import numpy as np

    from crossover.model.step import step_time

    return float(step_time(dep, np.array([batch]), 1, context).total[0]) * 1e3


def _spec_ms_per_token(dep, draft: str | None, k: int, acceptance, batch: int, context: int) -> float:
    """T_SD (ms per token): one speculative step of the batch over its tau; the draft is the target
    itself (self-speculation) when `draft` is None, attending to the StreamingLLM budget."""
    import numpy as np

    from crossover.specs import load_model
    from crossover.model.speculation import Speculation
    from crossover.model.step import StepModel

    spec = Speculation("draft", k, acceptance, draft=load_model(draft) if draft else dep.model,
                       draft_kv_budget=STREAMING_BUDGET)
    model = StepModel.of(dep, spec)
    return float(model.price(model.decode(np.array([batch], float), context, spec)).total[0]) / spec.tau * 1e3


def predict_off(row: Row, efficiency=None) -> float:
    """Predicted T_AR (ms): one decode step of the batch at the row's context."""
    return _step_ms(_deployment(row.model, row.hardware, row.tp, efficiency), row.batch, row.context)


def predict_row(row: Row, efficiency=None) -> tuple[float, float]:
    """(predicted T_AR ms, predicted T_SD ms per token) for one row."""
    from crossover.model.acceptance import Acceptance

    dep = _deployment(row.model, row.hardware, row.tp, efficiency)
    return (_step_ms(dep, row.batch, row.context),
            _spec_ms_per_token(dep, row.draft, row.k, Acceptance.mean_length(row.tau), row.batch, row.context))


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
    from crossover.model.acceptance import Acceptance
    from fit import bisect

    def speedup(r: V1Row, alpha: float) -> float:
        dep = _deployment(r.model, r.hardware, r.tp, efficiency)
        return (_step_ms(dep, r.batch, r.context)
                / _spec_ms_per_token(dep, r.draft, r.k, Acceptance.rate(alpha), r.batch, r.context))

    alpha = bisect(lambda a: speedup(group[0], a), 0.0, 0.99, group[0].speedup, clamp=False)
    return alpha, [speedup(r, alpha) for r in group]
