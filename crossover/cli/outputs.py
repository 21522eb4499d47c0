"""One policy for every file a verb writes (--plot, --csv, --out): every one checked before any work
(a writable folder, a --plot suffix matplotlib writes), never one of the run's own inputs (with or
without --force), never an existing file (or a symlink) unless --force; each written atomically by
crossover.files.write_atomic, and all of them only once the run has succeeded (deferred_writes: a run
that fails on its second output leaves the first unwritten)."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

from ..errors import CrossoverError
from ..files import deferred_writes
from .common import engine_metrics_files

OUTPUT_FLAGS = ("plot", "csv", "out")

# Every option (argparse dest) whose value names a file, or a folder of files, that the run reads: spec
# paths (model, hardware, draft, engine, workload), a calibration fit, plan's traffic CSV and price file,
# measured's engine metrics (one file or AFTER,BEFORE), models import's config.json, the result files of
# --on/--off/--files. One list for every verb: an output that is any of these is refused even with
# --force. tests/test_outputs.py checks that every option of every verb is in it, is an output, or is
# known to name no file, so a new input flag cannot be left out.
INPUT_FLAGS = ("model", "hardware", "draft", "engine", "workload", "calibration", "traffic", "price_file",
               "engine_metrics", "config", "on", "off", "files", "server_args")

# Values that may hold any character (cli.common.check_values): paths, and names that are free text
FREE_TEXT = (*INPUT_FLAGS, *OUTPUT_FLAGS, "name", "draft_model_id")


def _values(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, str)]
    return []


def _candidates(flag: str, v: str) -> list[Path]:
    """The paths one value may name: itself, and for --engine-metrics FILE,BEFORE each part it may be
    read as."""
    out = [Path(v)]
    if flag == "engine_metrics" and "," in v:
        out += [Path(part) for part in {*v.split(","), *engine_metrics_files(v)} if part]
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
                try:
                    if p.is_dir():
                        out += [q for q in p.rglob("*") if q.is_file()]
                    elif p.exists():
                        out.append(p)
                        if flag == "workload":
                            out += _workload_files(p)
                except OSError:  # a folder listed but not entered: its reader says so in one line
                    continue
    return out


# "wrote PATH" lines of the running verb, said once its outputs are in place (None: at once)
_notes: ContextVar[list[str] | None] = ContextVar("crossover_wrote_notes", default=None)


@contextmanager
def writing_outputs(args: argparse.Namespace) -> Iterator[None]:
    """A verb's run: every output checked first (check_outputs), all of them written together at the
    end (files.deferred_writes), and each one's "wrote PATH" line said once they are: a run that fails
    writes nothing and says it wrote nothing."""
    targets = check_outputs(args)
    notes: list[str] = []
    token = _notes.set(notes)
    try:
        with deferred_writes(targets):
            yield
    finally:
        _notes.reset(token)
    for line in notes:
        print(line, file=sys.stderr)


def wrote(path) -> None:
    """Say on stderr that `path` was written (at the end of the run, inside writing_outputs)."""
    notes = _notes.get()
    if notes is None:
        print(f"wrote {path}", file=sys.stderr)
    else:
        notes.append(f"wrote {path}")


def check_outputs(args: argparse.Namespace) -> list[Path]:
    """Refuse, before any work, an output that is one of the inputs, that two output flags share, that
    cannot be written (a --plot suffix matplotlib does not write, a folder that does not exist or is
    not writable, a directory where a file goes), or that exists (or is a symlink) without --force.
    `report --out` names a folder (created if missing): its index.html is the file. Returns the files
    the run will write, for crossover.files.deferred_writes."""
    given = [(flag, getattr(args, flag)) for flag in OUTPUT_FLAGS if isinstance(getattr(args, flag, None), str)]
    if not given:
        return []
    inputs = [p.resolve() for p in _inputs(args)]
    targets: list[Path] = []
    for flag, v in given:
        folder = args.verb == "report" and flag == "out"
        target = Path(v) / "index.html" if folder else Path(v)
        if target.resolve() in inputs or (target.exists() and any(_same(target, p) for p in inputs)):
            raise CrossoverError(f"--{flag} {v} is one of this run's inputs; write the output elsewhere")
        for other, t in zip(given, targets):
            if t.resolve() == target.resolve() or _same(t, target):
                raise CrossoverError(f"--{other[0]} and --{flag} both name {v}; give each output its own file")
        if flag == "plot":
            from ..reporting.plots import check_plot_name  # light: matplotlib loads with the first figure

            check_plot_name(v)
        _check_writable(flag, v, Path(v) if folder else target.parent, folder)
        if target.is_dir() and not target.is_symlink():
            raise CrossoverError(f"cannot write --{flag} {v}: it is a directory; give a file name")
        if (target.exists() or target.is_symlink()) and not getattr(args, "force", False):
            what = "a symlink" if target.is_symlink() else "exists"
            raise CrossoverError(f"--{flag} {v}: {target} {what}; choose another path or pass --force to replace it")
        targets.append(target)
    return targets


def _check_writable(flag: str, v: str, folder: Path, create: bool) -> None:
    """The folder an output goes into exists, is a directory and is writable; `create`: it may be made
    (report's folder), so its nearest existing parent is what must be a writable directory."""
    where = folder
    if create:
        while not where.exists() and where != where.parent and not where.is_symlink():
            where = where.parent
    if not where.exists():
        raise CrossoverError(f"cannot write --{flag} {v}: no folder {where}; create it first or write elsewhere")
    if not where.is_dir():
        raise CrossoverError(f"cannot write --{flag} {v}: {where} is no folder; write elsewhere")
    if not os.access(where, os.W_OK | os.X_OK):
        raise CrossoverError(f"cannot write --{flag} {v}: {where} is not writable (permission denied)")


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
