"""Progress lines on stderr for the long-running verbs (simulate's sweep, calibrate's bootstrap, plan's
screening and simulations): only on a terminal, only once the work has run PROGRESS_AFTER_S, never
with --quiet; stdout (text or --json) is never touched."""

from __future__ import annotations

import sys
import time
from typing import Callable

PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 0.1  # at most ten rewrites a second (a bootstrap reports after every draw)


def progress_line(verb: str, text: Callable[..., str], quiet: bool = False) -> Callable[..., None] | None:
    """A callback `report(done, total, *detail)` that rewrites one stderr line `verb: text(done, total,
    *detail)` in place (a newline when done == total), or None with `quiet` or when stderr is no
    terminal (pipes, files, CI logs: nothing to overwrite). Nothing is shown before PROGRESS_AFTER_S,
    so short runs stay silent; after that the line is rewritten when its text changes, at most every
    PROGRESS_EVERY_S, and always at the end."""
    if quiet or not sys.stderr.isatty():
        return None
    start = time.perf_counter()
    state = {"shown": False, "width": 0, "line": "", "at": 0.0}

    def report(done: int, total: int, *detail) -> None:
        now = time.perf_counter()
        if not state["shown"] and now - start < PROGRESS_AFTER_S:
            return
        line = f"{verb}: {text(done, total, *detail)}"
        last = done >= total
        if not last and state["shown"] and (line == state["line"] or now - state["at"] < PROGRESS_EVERY_S):
            return
        state.update(shown=True, line=line, at=now)
        pad = " " * max(0, state["width"] - len(line))  # a shorter line covers the longer one before it
        state["width"] = 0 if last else len(line)
        print("\r" + line + pad, end="\n" if last else "", file=sys.stderr, flush=True)

    return report
