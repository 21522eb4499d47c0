"""Write the JSON each case in cases.txt prints (tests/test_golden.py compares against these files).

Run after a change that is meant to move numbers, and say in the commit which cases moved and why.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).parent


def cases() -> list[tuple[str, list[str]]]:
    """(file stem, argv) per line of cases.txt."""
    out = []
    for i, line in enumerate(ln for ln in (HERE / "cases.txt").read_text().splitlines()
                             if ln.strip() and not ln.startswith("#")):
        out.append((f"{i:03d}_{line.split()[0]}", shlex.split(line) + ["--json"]))
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
