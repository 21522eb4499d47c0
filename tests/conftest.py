"""Shared fixtures and helpers: repository paths, the `crossover` command run in this process
(run_cli, what most CLI tests need) or in a fresh interpreter (run_process, for what only a real
process shows), and the one-line error contract (assert_one_line_error, assert_one_line_message)."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ERROR_PREFIX = "crossover: error: "


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a `crossover` run: the repo importable, no user spec path, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("CROSSOVER_SPEC_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


# --------------------------------------------------------------------------- the command in this process

@dataclass
class CliResult:
    """What a run of the command gave: the fields of subprocess.CompletedProcess that tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


class CliTimeout(Exception):
    pass


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning the command lets through, on its stderr, as the interpreter would print it."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _alarm(seconds: float, argv):
    """Raise CliTimeout in the main thread after `seconds` (a run that hangs fails its test, as the
    subprocess timeout did)."""
    def on_alarm(signum, frame):
        raise CliTimeout(f"crossover {' '.join(argv)}: no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None,
            timeout: float = 120) -> CliResult:
    """`crossover ARGS` in this process (crossover.cli.main), as `python -m crossover ARGS` would
    run from the repository root (or `cwd`) with `env` (default clean_env()): stdout and stderr
    captured, SystemExit's code as the exit status, an uncaught exception as exit 1 with its
    traceback on stderr.

    What a run could change in this process is put back after it: os.environ, the working
    directory, sys.stdout / sys.stderr, the warnings filters, numpy's error state and the garbage
    collector's thresholds. Warnings are filtered as in a fresh interpreter (DeprecationWarning and
    its kin ignored, UserWarning shown on stderr), except that any other warning (numpy's
    RuntimeWarning above all) is an error: a traceback, exit 1, never a line that passes unseen."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_cli swaps sys.stdout, os.environ and the working directory: main thread only")
    from crossover.cli.main import main

    argv = [str(a) for a in args]
    env = clean_env() if env is None else dict(env)
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_gc = dict(os.environ), os.getcwd(), gc.get_threshold()
    np = sys.modules.get("numpy")
    saved_np = np.geterr() if np is not None else None
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd or REPO)
        with warnings.catch_warnings():
            warnings.resetwarnings()
            warnings.simplefilter("error")
            warnings.simplefilter("default", UserWarning)
            for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", quiet)
            warnings.showwarning = _show_warning
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _alarm(timeout, argv):
                try:
                    code = main(argv)
                except SystemExit as exc:  # argparse: --help, usage errors
                    code = exc.code
                except CliTimeout:
                    raise
                except Exception:  # what the interpreter would print before exiting 1
                    traceback.print_exc()
                    code = 1
        if code is None:
            code = 0
        elif not isinstance(code, int):
            err.write(f"{code}\n")
            code = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        gc.set_threshold(*saved_gc)
        if saved_np is not None:
            np.seterr(**saved_np)
    return CliResult(argv, code, out.getvalue(), err.getvalue())


# --------------------------------------------------------------------------- the command in a fresh process

def run_process(*args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None,
                timeout: float = 120, python: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    """`python [PYTHON] -m crossover ARGS` in a fresh interpreter from the repository root (or
    `cwd`); text output captured unless `kwargs` say otherwise (stdout=..., stderr=...). For what
    only a real process shows: its exit status on a full disk or a signal, its environment at
    start, the modules it loads."""
    if not {"stdout", "stderr"} & set(kwargs):
        kwargs["capture_output"] = True
    return subprocess.run([sys.executable, *python, "-m", "crossover", *map(str, args)], cwd=str(cwd or REPO),
                          env=env or clean_env(), text=True, timeout=timeout, **kwargs)


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


# --------------------------------------------------------------------------- the wheel

# What a wheel is built from: copied to a scratch folder, so no build/ or *.egg-info lands in the repo.
WHEEL_SOURCES = ("pyproject.toml", "setup.py", "setup.cfg", "README.md", "LICENSE", "MANIFEST.in",
                 "crossover", "hardware", "models", "workloads", "engines", "docs")


def isolated_env() -> dict[str, str]:
    """This environment without what points a child at the checkout or another environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CROSSOVER_SPEC_PATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    env["PIP_NO_INPUT"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """crossover's wheel, built once per session (tests/test_wheel.py installs it, tests/test_web.py
    looks for the page in it) from a copy of WHEEL_SOURCES and of every folder pyproject maps a
    package from."""
    root = tmp_path_factory.mktemp("wheel-build")
    src = root / "src"
    src.mkdir()
    mapped = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"].get("package-dir", {})
    for name in dict.fromkeys([*WHEEL_SOURCES, *(d.split("/")[0] for d in mapped.values())]):
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
        elif p.is_file():
            shutil.copy2(p, src / name)
    dist = root / "dist"
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist)]

    def build(*flags: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([*base, *flags, str(src)], cwd=str(root), env=isolated_env(), capture_output=True,
                              text=True, timeout=timeout)

    # Fast path: the running interpreter's setuptools; fall back to an isolated build when it is too old
    # (pyproject asks setuptools>=68) or lacks the `wheel` package.
    made = build("--no-build-isolation", timeout=120)
    for _ in range(2):  # the isolated build downloads setuptools: once more after a truncated download
        if made.returncode == 0:
            break
        made = build(timeout=300)
    assert made.returncode == 0, f"wheel build failed:\n{made.stdout[-3000:]}\n{made.stderr[-3000:]}"
    wheels = sorted(dist.glob("crossover-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


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
    """A function running `crossover ...` in this process (see run_cli)."""
    return run_cli


@pytest.fixture(scope="session")
def cli_env():
    """A function building a run's environment (see clean_env)."""
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


def vllm_scrape(drafts, drafted, accepted, gen, stop, length) -> str:
    """A vLLM /metrics scrape with the speculative-decoding and serving counters measured needs."""
    return (f"# TYPE vllm:spec_decode_num_drafts_total counter\n"
            f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}.0\n'
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}.0\n'
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}.0\n'
            f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen}.0\n'
            f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} {stop}.0\n'
            f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {length}.0\n')
