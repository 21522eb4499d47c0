"""Shared fixtures: repository paths and a runner for the `crossover` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a child `crossover`: the repo importable, no user spec path, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("CROSSOVER_SPEC_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m crossover ARGS` from the repository root; text output captured."""
    return subprocess.run(
        [sys.executable, "-m", "crossover", *args],
        cwd=str(cwd or REPO), env=env or clean_env(), capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """tests/fixtures."""
    return FIXTURES


@pytest.fixture(scope="session")
def cli():
    """A function running `python -m crossover ...` in a subprocess (see run_cli)."""
    return run_cli


@pytest.fixture(scope="session")
def cli_env():
    """A function building the child environment (see clean_env)."""
    return clean_env


@pytest.fixture(scope="session")
def hardware_names() -> set[str]:
    """Stems of the shipped hardware/*.yaml files."""
    return {p.stem for p in (REPO / "hardware").glob("*.yaml")}


@pytest.fixture(scope="session")
def model_names() -> set[str]:
    """Stems of the shipped models/*.yaml files."""
    return {p.stem for p in (REPO / "models").glob("*.yaml")}


@pytest.fixture
def no_user_specs(monkeypatch):
    """Make sure CROSSOVER_SPEC_PATH from the caller's shell does not leak into a test."""
    monkeypatch.delenv("CROSSOVER_SPEC_PATH", raising=False)
