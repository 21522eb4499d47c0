"""Progress lines on stderr for the long-running verbs (issue 14 part 3): simulate's sweep, calibrate's
bootstrap, plan's screening and simulations. Shown on a terminal only, once the work has run
PROGRESS_AFTER_S, never with --quiet, never on stdout (text or --json)."""

from __future__ import annotations

import io
import json
import sys

import pytest
from conftest import FIXTURES

from crossover.cli import progress
from crossover.cli.main import main

MEASURED = FIXTURES / "measured"
CALIBRATE = ["calibrate", "--on", str(MEASURED / "vllm_on"), "--off", str(MEASURED / "vllm_off"), "--model",
             "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--method", "eagle3", "--bootstrap", "20", "--json"]
PLAN = ["plan", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--slo-tpot-ms", "20", "--peak-rps", "10",
        "--hardware", "h100-sxm,l4", "--tp", "1", "--verify", "1", "--num-prompts", "100", "--jobs", "1", "--json"]
SIMULATE = ["simulate", "--model", "llama-3.1-8b", "--workload", "gsm8k", "--concurrency", "1,4", "--num-prompts",
            "20", "--json"]


class FakeTTY(io.StringIO):
    """stderr as a terminal."""

    def isatty(self) -> bool:
        return True


def _run(argv, monkeypatch, capsys, *, tty=True, after_s=0.0):
    """Run the CLI in-process with stderr a (fake) terminal; (exit status, stdout, stderr)."""
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", after_s)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    capsys.readouterr()
    err = FakeTTY() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    rc = main(argv)
    return rc, capsys.readouterr().out, err.getvalue()


def test_calibrate_shows_its_bootstrap_on_a_terminal_and_keeps_stdout_json(monkeypatch, capsys):
    rc, out, err = _run(CALIBRATE, monkeypatch, capsys)
    assert rc == 0, err
    json.loads(out)  # stdout is the JSON object alone
    assert "\rcalibrate: bootstrap " in err and "calibrate" not in out
    assert err.rstrip(" ").endswith("calibrate: bootstrap 100% of 20 refits\n")  # one line, finished with a newline
    assert err.count("\n") == 1


def test_plan_shows_its_screening_and_simulations_on_a_terminal(monkeypatch, capsys):
    rc, out, err = _run(PLAN, monkeypatch, capsys)
    assert rc == 0, err
    assert json.loads(out)["verified"] == 1
    assert "\rplan: 4/4 deployments screened\n" in err  # 2 GPUs x (bf16, and fp8 on their fp8 tensor cores)
    assert "\rplan: 1/1 finalists simulated\n" in err
    assert "plan:" not in out


def test_simulate_shows_its_levels_on_a_terminal(monkeypatch, capsys):
    rc, out, err = _run(SIMULATE, monkeypatch, capsys)
    assert rc == 0, err
    json.loads(out)
    assert "\rsimulate: 2/2 levels (concurrency 4 done)\n" in err


@pytest.mark.parametrize("argv", [CALIBRATE, PLAN, SIMULATE], ids=["calibrate", "plan", "simulate"])
def test_quiet_or_no_terminal_or_a_short_run_shows_nothing(argv, monkeypatch, capsys):
    verb = argv[0]
    rc, _, err = _run([*argv, "--quiet"], monkeypatch, capsys)
    assert rc == 0 and f"{verb}:" not in err  # --quiet
    if verb != "calibrate":  # one calibrate run is enough for the rest (2 s of bootstrap on 2 cores)
        return
    rc, _, err = _run(argv, monkeypatch, capsys, tty=False)
    assert rc == 0 and f"{verb}:" not in err  # a pipe or a file: nothing to overwrite
    rc, _, err = _run(argv, monkeypatch, capsys, after_s=1e9)
    assert rc == 0 and f"{verb}:" not in err  # shorter than PROGRESS_AFTER_S


def test_a_shorter_line_covers_the_longer_one_before_it(monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    err = FakeTTY()
    monkeypatch.setattr(sys, "stderr", err)
    report = progress.progress_line("x", lambda done, total, what: f"{done}/{total} {what}")
    report(1, 3, "long words")
    report(2, 3, "w")
    report(3, 3, "w")
    assert err.getvalue() == "\rx: 1/3 long words\rx: 2/3 w         \rx: 3/3 w\n"
    assert progress.progress_line("x", str, quiet=True) is None


def test_the_line_is_rewritten_when_it_changes_at_most_every_so_often(monkeypatch):
    assert progress.PROGRESS_EVERY_S == 0.1
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 60.0)
    err = FakeTTY()
    monkeypatch.setattr(sys, "stderr", err)
    report = progress.progress_line("x", lambda done, total: f"{100 * done // total}%")
    for i in range(1, 1001):  # a thousand reports within a minute: the first and the last shown
        report(i, 1000)
    assert err.getvalue() == "\rx: 0%\rx: 100%\n"
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    err.truncate(0), err.seek(0)
    report = progress.progress_line("x", lambda done, total: f"{100 * done // total}%")
    for i in range(1, 1001):
        report(i, 1000)
    assert err.getvalue().count("\r") == 101  # once per change of the text: 0% ... 100%
