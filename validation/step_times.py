"""Measured step times (CSVs from benchmarks/measure_steps.py) against the roofline's forward time.

Drop a CSV measured on a GPU into validation/step_times/ (its name should say the GPU); run.py then
adds a section comparing every row with the predicted forward (same layers, TP 1, no engine step
overhead: the script times bare forwards) and the verify/decode ratio, which is what the speedup
of speculation rests on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from crossover.measurements import StepTime, read_step_times  # noqa: E402

STEP_DIR = HERE / "step_times"


@dataclass(frozen=True)
class StepPoint:
    """One measured forward with its prediction (ms)."""

    row: StepTime
    predicted_ms: float

    @property
    def ln_error(self) -> float:
        return float(np.log(self.predicted_ms / self.row.step_ms))


def predict_forward_ms(row: StepTime) -> float:
    """The roofline's time of the forward the row timed: its model at its layer count, TP 1."""
    from crossover.model.roofline import compiled_target
    from crossover.specs import Deployment, load_hardware, load_model

    model = load_model(row.model)
    if row.layers is not None and row.layers != model.num_hidden_layers:
        model = model.model_copy(update={"num_hidden_layers": row.layers})
    dep = Deployment(model=model, hardware=load_hardware(row.hardware), tp=1)
    return float(np.asarray(compiled_target(dep).cost(row.batch, row.q, row.context).total).ravel()[0]) * 1e3


def step_points(paths=None) -> list[StepPoint]:
    """Every full-width row of the CSVs in validation/step_times/ (tiny CPU smoke rows are skipped)."""
    files = sorted(STEP_DIR.glob("*.csv")) if paths is None else [Path(p) for p in paths]
    out = []
    for f in files:
        for row in read_step_times(f):
            if not row.tiny and row.hardware != "cpu":
                out.append(StepPoint(row, predict_forward_ms(row)))
    return out


def ratio_errors(points: list[StepPoint]) -> list[tuple[StepPoint, StepPoint, float]]:
    """(decode, verify, ln error of the verify/decode ratio) for every (file, batch, context) timed at both."""
    by: dict[tuple, dict[int, StepPoint]] = {}
    for p in points:
        key = (p.row.source.rsplit(":", 1)[0], p.row.model, p.row.layers, p.row.batch, p.row.context)
        by.setdefault(key, {})[p.row.q] = p
    out = []
    for qs in by.values():
        if 1 in qs:
            for q, v in qs.items():
                if q > 1:
                    d = qs[1]
                    err = np.log((v.predicted_ms / d.predicted_ms) / (v.row.step_ms / d.row.step_ms))
                    out.append((d, v, float(err)))
    return out


def report_lines(points: list[StepPoint]) -> list[str]:
    """The Markdown section of report.md (empty without measured files)."""
    if not points:
        return []
    dec = [abs(p.ln_error) for p in points if p.row.q == 1]
    ver = [abs(p.ln_error) for p in points if p.row.q > 1]
    rat = ratio_errors(points)
    med = lambda v: f"{np.median(v):.3f}" if v else "-"  # noqa: E731
    lines = ["", "## Measured step times (benchmarks/measure_steps.py)", "",
             "Bare forwards timed on a GPU against the roofline's forward (the same layers, TP 1, no engine step "
             f"overhead). Median |ln error|: decode {med(dec)}, verify {med(ver)}, verify/decode ratio "
             f"{med([abs(e) for *_, e in rat])} (the ratio is what the speedup rests on).", "",
             "| hardware | model | layers | batch | q | context | measured ms | predicted ms | ln error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        r = p.row
        lines.append(f"| {r.hardware} | {r.model} | {r.layers or ''} | {r.batch} | {r.q} | {r.context} | "
                     f"{r.step_ms:.3f} | {p.predicted_ms:.3f} | {p.ln_error:+.3f} |")
    return lines
