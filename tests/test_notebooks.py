"""The notebooks are committed without outputs and run top to bottom through a real Jupyter kernel.

Each notebook is executed in memory by nbclient (the committed file is never written; the executed
copy goes to tmp_path for inspection) in the notebooks/ folder, as Jupyter runs it, with the
repository's package importable and matplotlib's default inline backend, under a time limit per
notebook. Needs the `test` extra (nbclient, ipykernel); skipped with a reason where they are missing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest
from conftest import REPO, clean_env

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
NOTEBOOK_TIMEOUT_S = 300  # per notebook (and per cell); each takes a few seconds here
# A raw float printed for people would show many digits after the point (0.7312345678, 9.898e-18).
RAW_FLOAT = re.compile(r"\d\.\d{6,}|\de-\d\d")


def _kernel_tools():
    """(nbformat, NotebookClient, CellExecutionError), or skip with the reason."""
    for mod in ("nbclient", "nbformat", "ipykernel"):
        try:
            __import__(mod)
        except ImportError:
            pytest.skip(f"{mod} is not installed: the notebooks run through a Jupyter kernel "
                        "(pip install \".[test]\" brings nbclient and ipykernel)")
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    return nbformat, NotebookClient, CellExecutionError


def _execute(nb, cwd: Path, timeout: float = NOTEBOOK_TIMEOUT_S) -> float:
    """Run every cell of `nb` (in place) in a fresh python3 kernel started in `cwd`; seconds taken."""
    _, NotebookClient, _ = _kernel_tools()
    env = clean_env()  # PYTHONPATH = the repository: the kernel imports this checkout's crossover
    env.pop("MPLBACKEND", None)  # ipykernel's default, the inline backend, as in Jupyter
    client = NotebookClient(nb, timeout=int(timeout), startup_timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    start = time.monotonic()

    async def run():
        # nbclient's timeout is per cell; this bounds the whole notebook (the kernel is shut down on expiry)
        await asyncio.wait_for(client.async_execute(env=env), timeout)

    try:
        asyncio.run(run())
    except (asyncio.TimeoutError, TimeoutError):
        pytest.fail(f"notebook did not finish within {timeout:g} s")
    return time.monotonic() - start


def _outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == kind]


def test_there_are_three_notebooks():
    assert len(NOTEBOOKS) == 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        "commit notebooks without outputs"
    src = "\n".join("".join(c["source"]) for c in code)
    assert "matplotlib.use(" not in src and "%matplotlib" not in src, "leave the backend to Jupyter (inline)"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.slow  # a Jupyter kernel per notebook: seconds each
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_a_jupyter_kernel(path, tmp_path):
    nbformat, _, _ = _kernel_tools()
    committed = path.read_bytes()
    nb = nbformat.read(path, as_version=4)
    seconds = _execute(nb, path.parent)
    nbformat.write(nb, tmp_path / path.name)  # the executed copy, for a look when this fails
    assert path.read_bytes() == committed, "executing must not touch the committed notebook"

    assert not _outputs(nb, "error")
    stderr = [o["text"] for o in _outputs(nb, "stream") if o["name"] == "stderr"]
    assert not stderr, f"a cell wrote to stderr (a warning?): {stderr}"
    text = "".join(o["text"] for o in _outputs(nb, "stream") if o["name"] == "stdout")
    assert text.strip(), "the notebook printed nothing"
    raw = RAW_FLOAT.findall(text)
    assert not raw, f"numbers printed for people should be rounded: {raw}"
    # every figure shows inline (a PNG in the cell's output), as in Jupyter
    plotting = sum("plt.show()" in c.source for c in nb.cells if c.cell_type == "code")
    images = sum("image/png" in o.get("data", {}) for o in _outputs(nb, "display_data"))
    assert images >= plotting
    assert seconds < NOTEBOOK_TIMEOUT_S
    if path.stem.startswith("01"):
        # 24 GB on an RTX 4090: the KV cache fills long before the curves cross, and the notebook says so
        line = next(x for x in text.splitlines() if x.strip().startswith("rtx-4090"))
        assert "past the memory limit" in line, line


@pytest.mark.slow
def test_notebook_03_outside_the_repository_stops_with_a_clear_error(tmp_path):
    # The fixture search is bounded (the notebook's folder and its parent): from a folder outside the
    # repository it fails at once with the fix, instead of walking up the tree forever.
    nbformat, _, CellExecutionError = _kernel_tools()
    nb = nbformat.read(REPO / "notebooks" / "03_calibrating_a_measured_sweep.ipynb", as_version=4)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(CellExecutionError, match=r"FileNotFoundError") as err:
        _execute(nb, elsewhere, timeout=120)
    assert "open this notebook from the repository's notebooks/ folder" in str(err.value)
