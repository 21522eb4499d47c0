"""The error types users see: a single line that says what is wrong and what would be right.

`CrossoverError` is what every caller catches; its subclasses say which kind of problem it is, and
`parameter` names the offending input where one does (the API's keyword, or a spec field's path):
- `InputError`: a value is invalid (out of range, an unknown name, the wrong type);
- `DoesNotFitError`: the request is valid but impossible on the hardware (memory);
- `FileError`: a file cannot be read, parsed or written.
"""

from __future__ import annotations

from typing import Any


class CrossoverError(ValueError):
    """Bad input or an impossible request; the CLI prints its message as one line and exits 2."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        # Collapse to one line: the message is the whole interface.
        super().__init__(" ".join(str(message).split()))
        self.parameter = parameter


class InputError(CrossoverError):
    """A value given is invalid: out of range, an unknown name, the wrong type."""


class DoesNotFitError(CrossoverError):
    """A valid request that the hardware cannot hold: the weights or one sequence exceed memory."""


class FileError(CrossoverError):
    """A file cannot be read, parsed or written."""


def from_validation(exc: Any) -> InputError:
    """A pydantic ValidationError as one `InputError` line naming the first offending field (duck-typed:
    this module never imports pydantic)."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    return InputError(f"{field}: {msg}" if field else msg, parameter=field or None)


def api_boundary(fn):
    """Decorate a public API function: a pydantic ValidationError from inside it (a bad dtype or
    transition value reaching a spec) leaves as one `InputError`, as the CLI prints it."""
    import functools
    import sys

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as exc:
            pydantic = sys.modules.get("pydantic")  # loaded whenever a spec was built
            if pydantic is not None and isinstance(exc, pydantic.ValidationError):
                raise from_validation(exc) from None
            raise

    return call
