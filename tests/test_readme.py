"""The documentation's examples are real: re-run them and compare with what the pages show.

Pages: README.md, docs/guide/*.md and docs/reference/*.md. The conventions a page follows:

- A ```text block whose first line is `$ crossover VERB ...` is an EXECUTED example. The command
  (continued onto the next lines while a line ends with ` \\`) is run and its stdout must equal the
  rest of the block exactly. VERB must be one of FAST (a second or less each). A page's blocks run in
  order in one temporary directory per page, where each top-level entry of the repository is
  linked (so `tests/fixtures/...` resolves, and a file that one example writes, e.g.
  `calibrate --out fit.yaml`, is there for the next one and never lands in the checkout).
- A ```console block whose first line is `$ crossover VERB ...` is a SHOWN example of a slow verb
  (simulate, plan): real output pasted from a run, not re-run by the suite. CROSSOVER_DOCS_SLOW=1
  runs those too (it adds tests; without it none are collected, so nothing shows as skipped).
- ```python blocks are exec'd in order, one namespace per page.
- Every relative link or image in a page resolves to an existing file (and a `#anchor` to a
  heading of that file).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from conftest import REPO, run_cli

README_PATH = REPO / "README.md"
README = README_PATH.read_text()
GUIDE = sorted((REPO / "docs" / "guide").glob("*.md"))
REFERENCE = sorted((REPO / "docs" / "reference").glob("*.md"))
PAGES = [README_PATH, *GUIDE, *REFERENCE]
FAST = ("predict", "measured", "calibrate", "policy", "whatif", "hardware", "models")


def rel(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def examples(page: Path, language: str) -> list[tuple[str, str]]:
    """(command, shown output) of every ```LANGUAGE block of the page that starts with `$ crossover`."""
    out = []
    for lang, body in fenced(page.read_text()):
        lines = body.splitlines()
        if lang != language or not lines or not lines[0].startswith("$ crossover "):
            continue
        command, i = lines[0][2:], 0
        while command.endswith("\\"):
            i += 1
            command = command[:-1].rstrip() + " " + lines[i].strip()
        out.append((command, "\n".join(lines[i + 1:]).rstrip()))
    return out


RUN = [(rel(p), i, c, s) for p in PAGES for i, (c, s) in enumerate(examples(p, "text"))]
SLOW = [(rel(p), i, c, s) for p in PAGES for i, (c, s) in enumerate(examples(p, "console"))]

_dirs: dict[str, Path] = {}
_done: dict[tuple[str, str, int], object] = {}


def _workdir(page: str, factory) -> Path:
    """The page's temporary working directory: the repository's top-level entries linked into it."""
    if page not in _dirs:
        d = factory.mktemp(re.sub(r"\W", "_", page))
        for entry in REPO.iterdir():
            if not entry.name.startswith("."):
                (d / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        _dirs[page] = d
    return _dirs[page]


def _run_in_order(page: str, index: int, kind: str, factory):
    """Run the page's examples of this kind up to `index` (each once), in order; the result of `index`."""
    listed = [(c, s) for p, _, c, s in (RUN if kind == "text" else SLOW) if p == page]
    for i in range(index + 1):
        if (kind, page, i) not in _done:
            _done[(kind, page, i)] = run_cli(*shlex.split(listed[i][0])[1:], cwd=_workdir(page, factory))
    return _done[(kind, page, index)]


def test_the_pages_have_runnable_examples():
    assert len([r for r in RUN if r[0] == "README.md"]) >= 2
    assert {"predict-and-policy.md", "measured-and-calibrate.md", "simulate.md", "plan.md"} <= {p.name for p in GUIDE}
    assert {"cli.md", "formats.md", "validation.md", "speed.md"} <= {p.name for p in REFERENCE}


@pytest.mark.parametrize("page,index,command,shown", RUN, ids=[f"{p}:{c}" for p, _, c, _ in RUN])
def test_example_output_is_what_the_command_prints(page, index, command, shown, tmp_path_factory):
    verb = command.split()[1]
    assert verb in FAST, (f"{page}: `{command}` is slow ({verb}); show it in a ```console block, which the "
                          "suite does not run")
    r = _run_in_order(page, index, "text", tmp_path_factory)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip() == shown


def test_console_blocks_show_slow_verbs_only():
    for page, _, command, _ in SLOW:
        assert command.split()[1] not in FAST, f"{page}: `{command}` is fast: make it a ```text block, which is run"


if os.environ.get("CROSSOVER_DOCS_SLOW") == "1":
    @pytest.mark.parametrize("page,index,command,shown", SLOW, ids=[f"{p}:{c}" for p, _, c, _ in SLOW])
    def test_shown_slow_example_is_what_the_command_prints(page, index, command, shown, tmp_path_factory):
        r = _run_in_order(page, index, "console", tmp_path_factory)
        assert r.returncode == 0, r.stderr
        assert r.stdout.rstrip() == shown


def test_the_readme_is_a_front_door():
    assert len(README.encode()) <= 17_000 and len(README.splitlines()) <= 200
    # .ci/run runs the first fenced block after the marker: it must be the test command
    after = README.split("<!-- ci: test command -->", 1)[1]
    assert fenced(after)[0] == ("bash", 'pip install ".[test]" && python -m pytest\n')
    assert "pip install . && crossover predict" in README


PYTHON = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readme_python_api_example_runs(capsys):
    assert PYTHON and "crossover.predict(" in PYTHON[0] and len(PYTHON[0].strip().splitlines()) == 3
    scope: dict = {}
    for block in PYTHON:
        exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - the README's own examples
    out = capsys.readouterr().out.splitlines()
    # the default scenario: no crossover before memory runs out (it crosses beyond the memory limit)
    cross, regime, limit = out[0].split()
    assert regime in ("always_faster", "crosses") and (cross == "None" or float(cross) > float(limit))


DOC_PYTHON = [p for p in [*GUIDE, *REFERENCE] if "```python\n" in p.read_text()]


@pytest.mark.parametrize("page", DOC_PYTHON, ids=[rel(p) for p in DOC_PYTHON])
def test_the_pages_python_examples_run(page, capsys):
    scope: dict = {}
    for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
        exec(compile(block, rel(page), "exec"), scope)  # noqa: S102 - the page's own examples
    if page.name == "python-api.md":
        out = capsys.readouterr().out.splitlines()
        cross, regime, limit = out[0].split()  # predict (no crossover within memory), then the what-if
        assert regime in ("always_faster", "crosses") and (cross == "None" or float(cross) > float(limit))
        assert out[1].startswith("[")
        assert out[2].startswith(("rent ", "buy "))  # the plan's recommendation


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def links(page: Path) -> list[str]:
    """Targets of the page's markdown links and images, outside code."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)


@pytest.mark.parametrize("page", PAGES, ids=[rel(p) for p in PAGES])
def test_every_relative_link_resolves(page):
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{rel(page)}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{rel(page)}: link to {target}: no such heading"


def test_the_guide_and_reference_are_linked_from_the_readme():
    targets = {(README_PATH.parent / t.partition("#")[0]).resolve() for t in links(README_PATH)}
    assert (REPO / "docs" / "guide" / "index.md").resolve() in targets
    for p in REFERENCE:
        assert p.resolve() in targets, f"README.md does not link {rel(p)}"
