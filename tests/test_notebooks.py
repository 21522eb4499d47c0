"""The notebooks are committed without outputs and run top to bottom (code cells in one namespace)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_three_notebooks():
    assert len(NOTEBOOKS) == 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_clean_and_runs_top_to_bottom(path, monkeypatch):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        "commit notebooks without outputs"
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(path.parent)
    namespace: dict = {"__name__": "__main__"}
    for i, cell in enumerate(code):
        src = "".join(cell["source"])
        exec(compile(src, f"{path.name}[cell {i}]", "exec"), namespace)  # noqa: S102 - our own notebooks
    import matplotlib.pyplot as plt

    plt.close("all")
    assert os.getcwd() == str(path.parent)
