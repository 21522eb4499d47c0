"""Write the JSON each case in cases.txt prints (tests/test_golden.py compares against these files).

Run after a change that is meant to move numbers, and say in the commit which cases moved and why.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).parent


def stem(line: str) -> str:
    """A case's file stem, named by its content (inserting a case renames no other file): the command
    line as a slug, e.g. `predict-model-llama-3.1-8b-k-5`, shortened with a digest of the line when
    longer than 100 characters."""
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", line.strip()).strip("-")
    if len(slug) <= 100:
        return slug
    return slug[:90] + "-" + hashlib.sha1(line.strip().encode()).hexdigest()[:9]


def cases() -> list[tuple[str, list[str]]]:
    """(file stem, argv) per line of cases.txt."""
    out = []
    for line in (HERE / "cases.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            out.append((stem(line), shlex.split(line) + ["--json"]))
    stems = [s for s, _ in out]
    assert len(set(stems)) == len(stems), "two golden cases share a stem"
    return out


def run(argv: list[str]) -> dict:
    """The parsed JSON of one in-process CLI run."""
    from crossover.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    if rc not in (0, None):
        raise RuntimeError(f"{argv}: exit {rc}")
    return json.loads(buf.getvalue())


if __name__ == "__main__":
    only = set(sys.argv[1:])
    for stem, argv in cases():
        if only and stem not in only:
            continue
        (HERE / f"{stem}.json").write_text(json.dumps(run(argv), indent=1, sort_keys=True) + "\n")
        print(stem)
