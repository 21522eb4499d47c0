"""Build a wheel, install it into a fresh venv and use it from outside the repository.

The shipped spec libraries live at the top of the repository (hardware/, models/, workloads/) and
are mapped into the wheel as crossover/_data/<kind>; this checks an installed copy finds them. The
docs/*.md files that messages point users to ship as crossover/_data/docs.
The build runs on a copy of the sources in tmp_path so no build/ or *.egg-info lands in the repo.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, isolated_env

pytestmark = pytest.mark.slow  # builds a wheel and installs it into a fresh venv


def _run(cmd, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=isolated_env(), capture_output=True, text=True,
                          timeout=timeout)


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / (name + (".exe" if os.name == "nt" else ""))


@pytest.fixture(scope="module")
def installed(tmp_path_factory, built_wheel):
    """(venv dir, wheel path, scratch cwd): crossover built from the repo (tests/conftest.py
    built_wheel) and installed into a new venv."""
    root = tmp_path_factory.mktemp("wheel")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", venv], root)
    assert made.returncode == 0, made.stderr
    py = _bin(venv, "python")
    if sys.prefix != sys.base_prefix:
        # Running inside a venv: --system-site-packages reaches the base interpreter only, so expose
        # this interpreter's site-packages (numpy, pydantic, pyyaml) after the new venv's own.
        purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root).stdout.strip()
        import site
        paths = [p for p in site.getsitepackages() if Path(p).resolve() != REPO]
        Path(purelib, "_outer_site.pth").write_text("\n".join(paths) + "\n")
    inst = _run([py, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", built_wheel], root)
    assert inst.returncode == 0, f"{inst.stdout[-2000:]}\n{inst.stderr[-2000:]}"
    cwd = root / "elsewhere"
    cwd.mkdir()
    return venv, built_wheel, cwd


def test_wheel_ships_the_spec_libraries(installed):
    _, wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    for kind in ("hardware", "models", "workloads"):
        shipped = {Path(n).stem for n in names if n.startswith(f"crossover/_data/{kind}/") and n.endswith(".yaml")}
        assert shipped == {p.stem for p in (REPO / kind).glob("*.yaml")}, kind
    # every module of the package is in the wheel (pyproject lists the subpackages explicitly)
    modules = {str(p.relative_to(REPO)) for p in (REPO / "crossover").rglob("*.py") if "_data" not in p.parts}
    assert modules <= set(names), sorted(modules - set(names))


def test_wheel_ships_the_docs_that_messages_cite(installed):
    _, wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    cited = {m for p in (REPO / "crossover").rglob("*.py") if "_data" not in p.parts
             for m in re.findall(r"\bdocs/([\w.-]+\.md)\b", p.read_text(encoding="utf-8"))}
    assert "measured_csv.md" in cited  # the measured-CSV reader's errors say "see docs/measured_csv.md"
    for name in cited:
        assert (REPO / "docs" / name).is_file(), f"crossover/ cites docs/{name}, which does not exist"
    shipped = {Path(n).name for n in names if n.startswith("crossover/_data/docs/")}
    assert shipped == {p.name for p in (REPO / "docs").glob("*.md")}
    assert cited <= shipped


def test_installed_package_is_used_and_finds_all_specs(installed):
    venv, _, cwd = installed
    code = ("import crossover, crossover.specs.loader as L; print(crossover.__file__); "
            "print(len(L.available('hardware')), len(L.available('models'))); print(L.shipped_dir('models'))")
    proc = _run([_bin(venv, "python"), "-c", code], cwd)
    assert proc.returncode == 0, proc.stderr
    file, counts, shipped = proc.stdout.strip().splitlines()
    assert Path(file).resolve().is_relative_to(venv.resolve()), f"imported {file}, not the installed copy"
    assert not Path(file).resolve().is_relative_to(REPO)
    assert Path(shipped).resolve().is_relative_to(venv.resolve())
    n_hw = len(list((REPO / "hardware").glob("*.yaml")))
    n_models = len(list((REPO / "models").glob("*.yaml")))
    assert counts.split() == [str(n_hw), str(n_models)]


def test_installed_console_script_predicts(installed):
    venv, _, cwd = installed
    proc = _run([_bin(venv, "crossover"), "predict", "--json"], cwd)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["inputs"]["model"] == "llama-3.1-70b" and d["inputs"]["hardware"] == "h100-sxm"
    assert d["regime"] in {"crosses", "always_faster", "never_faster"} and d["points"]
    show = _run([_bin(venv, "crossover"), "hardware", "show", "h100-sxm", "--json"], cwd)
    assert show.returncode == 0 and json.loads(show.stdout)["memory_bandwidth_gb_s"] == 3350
