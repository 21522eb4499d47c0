"""Reading input files with one-line errors that name the file and what was expected, and writing
outputs atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

from .errors import CrossoverError


def read_text(path: Path, expected: str, errors: str = "strict") -> str:
    """A UTF-8 text file's contents (input files are only ever read)."""
    try:
        return path.read_text(encoding="utf-8", errors=errors)
    except FileNotFoundError:
        raise CrossoverError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CrossoverError(f"{path}: is a directory; expected {expected}") from None
    except OSError as exc:
        raise CrossoverError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise CrossoverError(f"{path}: not a UTF-8 text file; expected {expected}") from None


def write_atomic(path: str | Path, write: Callable[[str], None]) -> None:
    """Call `write(temporary path)` (same folder and suffix), then rename it over `path`: a run that
    fails leaves nothing behind and a reader never sees half a file; a symlink is replaced, not followed."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise CrossoverError(f"cannot write {path}: {exc.strerror}") from None
    try:
        write(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise CrossoverError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | Path, text: str) -> None:
    """Text to `path`, atomically."""
    write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
