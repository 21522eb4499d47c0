"""Entry point of the `crossover` command. A leaf: nothing in the library imports the CLI."""

from __future__ import annotations

import errno
import gc
import importlib
import os
import sys
from typing import Sequence

from ..errors import CrossoverError, from_validation
from ..files import input_limit
from .common import check_values, warnings_as_lines
from .outputs import FREE_TEXT, writing_outputs
from .parser import build_parser

# verb -> (module of crossover.cli, function): imported when that verb runs, so a command loads only
# what it needs (`measured` never imports the serving simulator, the planner or the web server)
VERBS = {"predict": ("model_verbs", "cmd_predict"), "simulate": ("model_verbs", "cmd_simulate"),
         "policy": ("model_verbs", "cmd_policy"), "whatif": ("model_verbs", "cmd_whatif"),
         "plan": ("model_verbs", "cmd_plan"), "report": ("model_verbs", "cmd_report"),
         "measured": ("measured_verbs", "cmd_measured"), "calibrate": ("measured_verbs", "cmd_calibrate"),
         "hardware": ("spec_verbs", "cmd_hardware"), "models": ("spec_verbs", "cmd_models"),
         "serve": ("serve_verb", "cmd_serve"), "sweep-plan": ("sweep_plan_verb", "cmd_sweep_plan")}


def _verb(name: str):
    module, function = VERBS[name]
    return getattr(importlib.import_module(f".{module}", __package__), function)


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


# A command builds its result out of many objects that are never garbage (the modules it imports, a
# report's rows: 10,000 measured levels make 30,000 dicts); Python's default scans the youngest ones
# every 700 allocations and all of them every ~70,000, ~0.1 s of such a command. Every 50,000 still
# bounds the cyclic garbage a long run (simulate, serve) can hold. Restored when the command returns.
GC_THRESHOLD = 50_000


# The command's linear algebra is elementwise or a least-squares fit of a few parameters: OpenBLAS's
# thread pool (started when numpy is first imported, one spinning thread per core) buys it nothing and
# costs ~0.15 s of CPU at every start. One thread unless the user's environment asks for more.
BLAS_THREADS = "1"

# pydantic looks up every installed distribution's entry points for validation plugins when the first
# spec class is built (importlib.metadata, ~40 ms of every start); a command's specs have no observer.
# Off for the command's own process unless the user's environment names plugins.
PYDANTIC_PLUGINS = "__all__"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a verb; bad input gives one line on stderr and exit status 2."""
    if "numpy" not in sys.modules:  # too late once numpy is loaded (the library, or a test process)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", BLAS_THREADS)
    if "pydantic" not in sys.modules:
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", PYDANTIC_PLUGINS)
    threshold = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *threshold[1:])
    try:
        return _main(argv)
    finally:
        gc.set_threshold(*threshold)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.verb is None:
            parser.print_help()
            return 2
        check_values(args, FREE_TEXT)  # no empty value, no digits but ASCII ones
        verb = _verb(args.verb)
        with input_limit(getattr(args, "max_input_mb", None)):  # None: CROSSOVER_MAX_INPUT_MB or 512
            # every output checked before any work (writable, never an input, never an existing file without
            # --force) and written only once the verb has succeeded, all together
            with writing_outputs(args), warnings_as_lines():  # the library's warnings, one stderr line each
                return verb(args)
    except CrossoverError as exc:
        print(f"crossover: error: {exc}", file=sys.stderr)
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
    except Exception as exc:  # pydantic's ValidationError (a spec was read, so pydantic is loaded)
        pydantic = sys.modules.get("pydantic")
        if pydantic is None or not isinstance(exc, pydantic.ValidationError):
            raise
        print(f"crossover: error: {from_validation(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
