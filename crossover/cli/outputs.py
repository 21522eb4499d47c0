"""One policy for every file a verb writes (--plot, --csv, --out): checked before any work, never
one of the run's own inputs, never an existing file (or a symlink) unless --force; written
atomically by crossover.files.write_atomic once the run has succeeded."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import CrossoverError

OUTPUT_FLAGS = ("plot", "csv", "out")
INPUT_FLAGS = ("model", "hardware", "workload", "calibration", "config")
INPUT_LISTS = ("on", "off", "files")


def _inputs(args: argparse.Namespace) -> list[Path]:
    """The files this run reads (spec names are not files and are skipped)."""
    out = []
    for flag in INPUT_FLAGS:
        v = getattr(args, flag, None)
        if isinstance(v, str) and Path(v).exists():
            out.append(Path(v))
    for flag in INPUT_LISTS:
        for v in getattr(args, flag, None) or []:
            p = Path(v)
            out += [q for q in p.rglob("*") if q.is_file()] if p.is_dir() else [p]
    return out


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that is one of the inputs, or that exists (or is a
    symlink) without --force. `report --out` names a folder: its index.html is the file."""
    inputs = [p.resolve() for p in _inputs(args)]
    for flag in OUTPUT_FLAGS:
        v = getattr(args, flag, None)
        if not isinstance(v, str):
            continue
        target = Path(v) / "index.html" if args.verb == "report" and flag == "out" else Path(v)
        if target.resolve() in inputs or (target.exists() and any(_same(target, p) for p in inputs)):
            raise CrossoverError(f"--{flag} {v} is one of this run's inputs; write the output elsewhere")
        if (target.exists() or target.is_symlink()) and not getattr(args, "force", False):
            what = "a symlink" if target.is_symlink() else "exists"
            raise CrossoverError(f"--{flag} {v}: {target} {what}; choose another path or pass --force to replace it")


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
