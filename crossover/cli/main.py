"""Entry point of the `crossover` command. A leaf: nothing in the library imports the CLI."""

from __future__ import annotations

import errno
import os
import sys
from typing import Sequence

from pydantic import ValidationError

from ..errors import CrossoverError
from ..files import set_max_input_mb
from .measured_verbs import cmd_calibrate, cmd_measured
from .model_verbs import (
    cmd_plan,
    cmd_policy,
    cmd_predict,
    cmd_report,
    cmd_simulate,
    cmd_whatif,
)
from .outputs import check_outputs
from .parser import build_parser
from .scenario import warnings_as_lines
from .serve_verb import cmd_serve
from .spec_verbs import cmd_hardware, cmd_models


def _validation_line(exc) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{field}: {msg}" if field else msg


# errno of a failed write to stdout that is the system's, not the command's: one line, exit 2
_WRITE_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ELOOP}


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what could not be
    written raises nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured in-process)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a verb; bad input gives one line on stderr and exit status 2."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.verb is None:
            parser.print_help()
            return 2
        verb = {"predict": cmd_predict, "simulate": cmd_simulate, "policy": cmd_policy, "whatif": cmd_whatif,
                "plan": cmd_plan, "report": cmd_report,
                "measured": cmd_measured,
                "calibrate": cmd_calibrate, "hardware": cmd_hardware, "models": cmd_models,
                "serve": cmd_serve}[args.verb]
        set_max_input_mb(getattr(args, "max_input_mb", None))  # None: CROSSOVER_MAX_INPUT_MB or 512
        check_outputs(args)  # before any work: never an input, never an existing file without --force
        with warnings_as_lines():  # the library's warnings, one stderr line each
            return verb(args)
    except CrossoverError as exc:
        print(f"crossover: error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"crossover: error: {_validation_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if exc.errno in _PATH_ERRNOS:  # a path the user gave that no file system takes, wherever it is touched
            name = str(exc.filename or "")
            print(f"crossover: error: {name[:80] + '...' if len(name) > 80 else name}: {exc.strerror}", file=sys.stderr)
            return 2
        if exc.errno not in _WRITE_ERRNOS:
            raise
        _drop_stdout()  # stdout on a full disk or over a quota: not a traceback
        print(f"crossover: error: cannot write the output: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
