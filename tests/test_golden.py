"""Every number the CLI prints for a golden set of 55 scenarios (methods, MoE/MLA, TP, trees,
adaptive, what-if grids, simulator levels, plan) stays what it was, to 1e-9 relative (invariant 4,
docs/architecture.md)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "golden"))
from regenerate import HERE, cases, run  # noqa: E402

CASES = cases()


def _diff(a, b, path="") -> str | None:
    """The first place where two JSON values differ (numbers to 1e-9 relative), else None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(set(a) ^ set(b))}"
        for key in a:
            d = _diff(a[key], b[key], f"{path}.{key}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            return f"{path}: {a!r} != {b!r}"
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def test_diff_detects_a_change():
    assert _diff({"a": [1.0, 2.0]}, {"a": [1.0, 2.0 + 1e-6]}) == ".a[1]: 2.0 != 2.000001"
    assert _diff({"a": "x"}, {"a": "x"}) is None


@pytest.mark.parametrize("stem,argv", CASES, ids=[c[0] for c in CASES])
def test_golden(stem, argv):
    want = json.loads((HERE / f"{stem}.json").read_text())
    got = json.loads(json.dumps(run(argv)))
    assert _diff(got, want) is None, f"{' '.join(argv)}: {_diff(got, want)}"
