"""The README's examples are real: re-run them and compare with what the README shows."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO, run_cli

README = (REPO / "README.md").read_text()


def blocks() -> list[tuple[str, str]]:
    """(command, shown output) of every ```text block that starts with `$ crossover ...`."""
    out = []
    for body in re.findall(r"```text\n(.*?)```", README, flags=re.S):
        lines = body.splitlines()
        if lines and lines[0].startswith("$ crossover ") and not lines[0].endswith("\\"):
            out.append((lines[0][2:], "\n".join(lines[1:]).rstrip()))
    return out


FAST = [b for b in blocks() if b[0].split()[1] in ("predict", "measured")]


def test_the_readme_has_runnable_examples():
    assert len(FAST) >= 2
    assert "<!-- ci: test command -->" in README


@pytest.mark.parametrize("command,shown", FAST, ids=[c for c, _ in FAST])
def test_readme_example_output_is_what_the_command_prints(command, shown):
    r = run_cli(*shlex.split(command)[1:])
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip() == shown


PYTHON = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readme_python_api_examples_run(capsys):
    assert PYTHON and "crossover.predict(" in PYTHON[0] and len(PYTHON[0].strip().splitlines()) == 3
    scope: dict = {}
    for block in PYTHON:
        exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - the README's own examples
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[1] == "always_faster"  # the default scenario: no crossover before memory runs out
    assert out[1].startswith("[")
