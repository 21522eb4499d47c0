"""Step-time CSVs written by benchmarks/measure_steps.py (format: docs/measured_csv.md, second part)."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import CrossoverError
from ..files import read_text

REQUIRED = ("hardware", "model", "batch", "q", "context", "step_ms")


@dataclass(frozen=True)
class StepTime:
    """One timed forward: `batch` sequences, `q` new positions each, `context` cached tokens."""

    source: str
    hardware: str
    device: str
    model: str
    layers: int | None
    tiny: bool
    dtype: str
    batch: int
    q: int
    context: int
    step_ms: float


def read_step_times(path: str | Path) -> list[StepTime]:
    """The rows of a step-time CSV; one-line errors naming the file, the row and the column."""
    p = Path(path)
    text = read_text(p, "a step-time CSV")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise CrossoverError(f"{p}: missing column {missing[0]!r}; a step-time CSV needs {', '.join(REQUIRED)}")
    out = []
    for i, row in enumerate(reader, start=2):
        def num(key: str, integer: bool = False):
            raw = (row.get(key) or "").strip()
            try:
                v = int(raw) if integer else float(raw)
            except ValueError:
                raise CrossoverError(f"{p}:{i}: column {key!r} must be a number (got {raw!r})") from None
            if isinstance(v, float) and (math.isnan(v) or v <= 0) or v <= 0:
                raise CrossoverError(f"{p}:{i}: column {key!r} must be > 0 (got {raw!r})")
            return v

        layers = (row.get("layers") or "").strip()
        out.append(StepTime(f"{p}:{i}", row["hardware"].strip(), (row.get("device") or "").strip(),
                            row["model"].strip(), int(layers) if layers else None,
                            (row.get("tiny") or "0").strip() in ("1", "true", "True"),
                            (row.get("dtype") or "bf16").strip(), num("batch", True), num("q", True),
                            int(float(row["context"])) if row["context"].strip() else 0, num("step_ms")))
    if not out:
        raise CrossoverError(f"{p}: no data rows")
    return out
