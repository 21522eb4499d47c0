"""Reading input files with one-line errors that name the file and what was expected, and writing
outputs atomically (each file whole or not at all; inside `deferred_writes`, all of a run's or none).

Inputs are read only from regular files (a FIFO would block forever, /dev/zero never ends, a
directory is no file) and only up to a size limit: 512 MB by default, raised with the environment
variable CROSSOVER_MAX_INPUT_MB (or `set_max_input_mb`, which the CLI's --max-input-mb calls)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .errors import FileError, InputError

MAX_INPUT_MB_DEFAULT = 512.0
MAX_INPUT_ENV = "CROSSOVER_MAX_INPUT_MB"
# The limit a caller set, per context (thread, task): None: the environment or the default. A CLI run
# sets it inside `input_limit` only, so an in-process caller never inherits another run's limit.
_max_input_mb: ContextVar[float | None] = ContextVar("crossover_max_input_mb", default=None)


def set_max_input_mb(mb: float | None) -> None:
    """Raise (or lower) the size limit of every input file read after this call in this context
    (thread or task); None: back to CROSSOVER_MAX_INPUT_MB or the default."""
    _max_input_mb.set(_limit(mb))


@contextmanager
def input_limit(mb: float | None) -> Iterator[None]:
    """The size limit of input files read inside the block (None: the environment or the default);
    the limit before it is restored after."""
    token = _max_input_mb.set(_limit(mb))
    try:
        yield
    finally:
        _max_input_mb.reset(token)


def _limit(mb: float | None) -> float | None:
    """A limit a caller gives (--max-input-mb), checked; None stays None (the environment or the default)."""
    return None if mb is None else _check_limit(mb, "--max-input-mb")


def _check_limit(mb, where: str) -> float:
    try:
        v = float(mb)
    except (TypeError, ValueError):
        raise InputError(f"{where} must be a number of megabytes > 0, got {mb!r}", parameter="max_input_mb") from None
    if not (v > 0 and v != float("inf")):
        raise InputError(f"{where} must be a finite number of megabytes > 0, got {mb!r}", parameter="max_input_mb")
    return v


def max_input_bytes() -> int:
    """The size limit of one input file, in bytes."""
    mb = _max_input_mb.get()
    if mb is None:
        env = os.environ.get(MAX_INPUT_ENV, "").strip()
        mb = _check_limit(env, f"environment variable {MAX_INPUT_ENV}") if env else MAX_INPUT_MB_DEFAULT
    return int(min(mb * 1e6, 2.0**62))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | Path, expected: str) -> bytes:
    """A regular file's bytes, at most max_input_bytes() of them; one line otherwise."""
    return b"".join(read_chunks(path, expected))


def read_chunks(path: str | Path, expected: str, size: int = 1 << 24) -> Iterator[bytes]:
    """A regular file's bytes in pieces of at most `size` (a large file is never held whole), with
    read_bytes' checks: a regular file, at most max_input_bytes() of it; one line otherwise."""
    path = Path(path)
    limit = max_input_bytes()
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of blocking; fstat
        # then refuses it. A regular file reads as usual.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FileError(f"{path}: is a directory; expected {expected}") from None
    except OSError as exc:
        raise FileError(f"{path}: cannot read ({exc.strerror or exc}); expected {expected}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{path}: is {_kind(st.st_mode)}, not a regular file; expected {expected}")
        if st.st_size > limit:
            raise FileError(_too_big(path, st.st_size, limit))
        try:
            os.set_blocking(fd, True)
        except OSError:
            pass
        total = 0
        while True:  # read to the end, never past the limit (a file may grow while it is read)
            chunk = os.read(fd, min(size, limit + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise FileError(_too_big(path, total, limit))
            yield chunk
    except OSError as exc:
        raise FileError(f"{path}: cannot read ({exc.strerror or exc}); expected {expected}") from None
    finally:
        os.close(fd)


def _too_big(path: Path, size: int, limit: int) -> str:
    return (f"{path}: {'at least ' if size == limit + 1 else ''}{size / 1e6:.1f} MB is over the input size limit of "
            f"{limit / 1e6:g} MB; raise it with --max-input-mb or {MAX_INPUT_ENV}")


def read_text(path: Path, expected: str, errors: str = "strict") -> str:
    """A UTF-8 text file's contents (input files are only ever read); a leading BOM is kept for
    the caller to strip (readers that detect formats by content skip it)."""
    return _decode(path, read_bytes(path, expected), expected, errors)


def read_text_chunks(path: Path, expected: str, size: int = 1 << 20) -> Iterator[str]:
    """read_text's text in pieces of whole lines, about `size` bytes each (a large file is never
    held whole, as bytes or as text); the same one-line errors."""
    carry = b""
    for chunk in read_chunks(path, expected, size):
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1  # a line ends at a newline, never inside a UTF-8 sequence
        carry = data[cut:]
        if cut:
            yield _decode(path, data[:cut], expected)
    if carry:
        yield _decode(path, carry, expected)


def _decode(path: Path, data: bytes, expected: str, errors: str = "strict") -> str:
    try:
        text = data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise FileError(f"{path}: not a UTF-8 text file; expected {expected}") from None
    del data
    # Universal newlines, as text-mode reading gives: \r\n and a lone \r end a line.
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


# What `deferred_writes` holds back, per context: the targets, and (temporary file, target) as written.
_staged: ContextVar[tuple[frozenset[str], list[tuple[str, Path]]] | None] = ContextVar("crossover_staged_writes",
                                                                                    default=None)


def _key(path: str | Path) -> str:
    return os.path.abspath(path)


@contextmanager
def deferred_writes(targets: Iterable[str | Path]) -> Iterator[None]:
    """Inside the block, write_atomic writes each of `targets` to its temporary file only (any other
    path as usual); when the block ends without an error every one is renamed over its target, in the
    order written, and when it raises every one is removed: a run that fails on its second output (a
    figure it cannot draw, a folder it cannot write) leaves its first unwritten too. The CLI runs each
    verb inside one, over the outputs its flags name."""
    staged: list[tuple[str, Path]] = []
    token = _staged.set((frozenset(map(_key, targets)), staged))
    try:
        yield
    except BaseException:
        _discard(staged)
        raise
    finally:
        _staged.reset(token)
    for i, (tmp, target) in enumerate(staged):
        try:
            os.replace(tmp, target)
        except OSError as exc:
            _discard(staged[i:])
            raise FileError(f"cannot write {target}: {exc.strerror}") from None


def _discard(staged: list[tuple[str, Path]]) -> None:
    for tmp, _ in staged:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def write_atomic(path: str | Path, write: Callable[[str], None]) -> None:
    """Call `write(temporary path)` (same folder and suffix), then rename it over `path`: a run that
    fails leaves nothing behind and a reader never sees half a file; a symlink is replaced, not followed.
    Inside `deferred_writes` the rename waits for the end of the block."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise FileError(f"cannot write {path}: {exc.strerror}") from None
    held = _staged.get()
    kept = False
    try:
        write(tmp)
        if held is not None and _key(target) in held[0]:
            held[1].append((tmp, target))
            kept = True
        else:
            os.replace(tmp, target)
    except OSError as exc:
        raise FileError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        if not kept and os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | Path, text: str) -> None:
    """Text to `path`, atomically."""
    write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def too_deep(path: str | Path, expected: str) -> FileError:
    """The one line for a JSON or YAML input nested deeper than the parser's recursion allows
    (RecursionError): no real result file, spec or calibration nests more than a few levels."""
    return FileError(f"{path}: nested too deeply to read (hundreds of levels of lists or mappings); "
                          f"expected {expected}")


def malformed_yaml(path: str | Path, exc: Exception) -> FileError:
    """The one-line error of a YAML parse that failed: the file, the line and what the parser said."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or "syntax error"
    return FileError(f"{path}: malformed YAML{where}: {problem}")
