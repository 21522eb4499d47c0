"""Shared fixtures and helpers: repository paths, a runner for the `crossover` command in a subprocess,
and the one-line error contract (assert_one_line_error, assert_one_line_message)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ERROR_PREFIX = "crossover: error: "


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


@dataclass
class CliResult:
    """What a run of the command gave: the fields of subprocess.CompletedProcess that tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


# --------------------------------------------------------------------------- the one-line error contract

def assert_one_line_error(result, *needles: str) -> str:
    """Bad input: exit status 2, exactly one line on stderr ("crossover: error: ..."), no traceback
    on stderr or stdout, and each of `needles` in that line. Returns the line."""
    shown = f"exit {result.returncode}; stdout={(result.stdout or '')[-300:]!r} stderr={result.stderr[-2000:]!r}"
    if getattr(result, "args", None):
        shown = f"argv: {result.args}; {shown}"
    assert result.returncode == 2, shown
    assert "Traceback" not in result.stderr and "Traceback" not in (result.stdout or ""), shown
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), f"stderr is not one line; {shown}"
    line = result.stderr[:-1]
    assert line.startswith(ERROR_PREFIX) and line[len(ERROR_PREFIX):].strip(), f"not an error line; {shown}"
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def assert_one_line_message(error, *needles: str) -> str:
    """A library error (an exception, pytest's ExceptionInfo or its text) is one line, stripped and
    not empty, with each of `needles` in it. Returns the message."""
    msg = str(getattr(error, "value", error))
    assert msg and "\n" not in msg and msg == msg.strip(), f"not one line: {msg!r}"
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return msg


# --------------------------------------------------------------------------- fixtures

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
