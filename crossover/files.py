"""Reading input files with one-line errors that name the file and what was expected."""

from __future__ import annotations

from pathlib import Path

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
