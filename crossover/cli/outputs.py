"""One policy for every file a verb writes (--plot, --csv, --out): checked before any work, never
one of the run's own inputs (with or without --force), never an existing file (or a symlink) unless
--force; written atomically by crossover.files.write_atomic once the run has succeeded."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import CrossoverError

OUTPUT_FLAGS = ("plot", "csv", "out")

# Every option (argparse dest) whose value names a file, or a folder of files, that the run reads: spec
# paths (model, hardware, draft, engine, workload), a calibration fit, plan's traffic CSV and price file,
# measured's engine metrics (one file or AFTER,BEFORE), models import's config.json, the result files of
# --on/--off/--files. One list for every verb: an output that is any of these is refused even with
# --force. tests/test_outputs.py checks that every option of every verb is in it, is an output, or is
# known to name no file, so a new input flag cannot be left out.
INPUT_FLAGS = ("model", "hardware", "draft", "engine", "workload", "calibration", "traffic", "price_file",
               "engine_metrics", "config", "on", "off", "files")


def _values(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, str)]
    return []


def _candidates(flag: str, v: str) -> list[Path]:
    """The paths one value may name: itself, and for --engine-metrics FILE,BEFORE each part."""
    out = [Path(v)]
    if flag == "engine_metrics" and "," in v:
        out += [Path(part) for part in v.split(",") if part]
    return out


def _workload_files(path: Path) -> list[Path]:
    """The empirical lengths files a workload YAML names (relative to its folder)."""
    try:
        from ..specs.loader import read_yaml

        data = read_yaml(path)
    except Exception:  # a broken workload is the verb's to report, in its own line
        return []
    out = []
    for key in ("prompt_len", "output_len"):
        d = data.get(key)
        f = d.get("file") if isinstance(d, dict) else None
        if isinstance(f, str) and f:
            p = Path(f).expanduser()
            out.append(p if p.is_absolute() else path.parent / p)
    return out


def _inputs(args: argparse.Namespace) -> list[Path]:
    """The files this run reads (spec names are not files and are skipped)."""
    out = []
    for flag in INPUT_FLAGS:
        for v in _values(getattr(args, flag, None)):
            for p in _candidates(flag, v):
                if p.is_dir():
                    out += [q for q in p.rglob("*") if q.is_file()]
                elif p.exists():
                    out.append(p)
                    if flag == "workload":
                        out += _workload_files(p)
    return out


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that is one of the inputs, or that exists (or is a
    symlink) without --force. `report --out` names a folder: its index.html is the file."""
    given = [(flag, getattr(args, flag)) for flag in OUTPUT_FLAGS if isinstance(getattr(args, flag, None), str)]
    if not given:
        return
    inputs = [p.resolve() for p in _inputs(args)]
    for flag, v in given:
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
