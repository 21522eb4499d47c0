"""Shared pieces of the CLI: value parsing with one-line errors, output helpers."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from contextlib import contextmanager
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable, Iterator, Sequence

from ..errors import CrossoverError

MAX_LIST = 100_000  # values one list flag may expand to (1..N ranges)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2. `flags`: functions that add the parser's
    arguments, run when it first parses or formats its help (a verb's flags are built only when that
    verb runs: the other verbs' flags import what their defaults and choices need)."""

    def __init__(self, *args, flags: Sequence[Callable[[argparse.ArgumentParser], None]] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pending_flags = list(flags)

    def _add_pending_flags(self) -> None:
        pending, self._pending_flags = self._pending_flags, []
        for add in pending:
            add(self)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._add_pending_flags()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._add_pending_flags()
        return super().format_usage()

    def format_help(self) -> str:
        self._add_pending_flags()
        return super().format_help()

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CrossoverError(f"{message} (see `{self.prog} --help`)")


# ------------------------------------------------------------------------------ value parsing

# A number as the command line writes it: ASCII digits only. Python's int() and float() also take other
# scripts' digits (`--port ８０` is 80, '١٢' is 12), underscores (1_0) and Unicode spaces; none is meant.
_ASCII_SPACE = " \t\n\r\f\v"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def parse_number(text: str, what: str, *, integer: bool = False, positive: bool = True) -> float:
    """`text` as a number (an integer with `integer`), written in ASCII digits (12, -3, 2.5, 1e-3), finite,
    and > 0 unless `positive` is False; one line naming `what` otherwise."""
    kind = "an integer" if integer else "a number"
    t = text.strip(_ASCII_SPACE) if isinstance(text, str) else ""
    if not (_INTEGER if integer else _REAL).fullmatch(t):
        digits = " in ASCII digits 0-9" if isinstance(text, str) and any(c.isdigit() and not c.isascii() for c in text) else ""
        raise CrossoverError(f"{what} must be {kind}{digits} (got {text!r})")
    try:
        v = int(t) if integer else float(t)
    except ValueError:  # more digits than int() converts (4300)
        raise CrossoverError(f"{what} must be {kind} of at most a few hundred digits (got {len(t)} characters)") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise CrossoverError(f"{what} must be finite (got {text!r})")
    if positive and v <= 0:
        raise CrossoverError(f"{what} must be > 0 (got {text})")
    return v


def check_values(args: argparse.Namespace, free: Sequence[str] = ()) -> None:
    """Every value given on the command line, before any is used: none empty (`--out=` wrote ./index.html,
    `--concurrency=` simulated nothing, `--host=` listens on every interface), and none with digits other
    than ASCII 0-9 (Python reads `--port ８０` as 80), except in the options of `free`: file paths and
    free-text names, which may hold any character."""
    for dest, value in vars(args).items():
        if dest in ("verb", "action"):
            continue
        for v in value if isinstance(value, list) else [value]:
            if not isinstance(v, str):
                continue
            flag = dest.upper() if dest == "config" or (dest == "name" and getattr(args, "action", None) == "show") \
                else "--" + dest.replace("_", "-")
            if not v.strip(_ASCII_SPACE):
                raise CrossoverError(f"{flag} is empty; give it a value")
            odd = next((c for c in v if c.isdigit() and not c.isascii()), None) if dest not in free else None
            if odd is not None:
                raise CrossoverError(f"{flag} {v!r} holds the digit {odd!r} (U+{ord(odd):04X}); write numbers in "
                                     f"ASCII digits 0-9")


def parse_list(text: str, what: str, *, integer: bool = False) -> list[float]:
    """'1,2,4' or '1..64' (every integer) or a mix; each > 0."""
    items: list[float] = []
    parts = [p.strip() for p in text.split(",")]
    if parts and not parts[-1]:  # a trailing comma ends the list
        parts.pop()
    for part in parts:
        if not part:
            raise CrossoverError(f"{what} {text!r} has an empty value between commas; give e.g. 1,8,64 or 1..64")
        if ".." in part:
            a, b = part.split("..", 1)
            lo = int(parse_number(a, what, integer=True))
            hi = int(parse_number(b, what, integer=True))
            if hi < lo:
                raise CrossoverError(f"{what} range {part!r} runs backwards; write LOW..HIGH")
            if hi - lo >= MAX_LIST:
                raise CrossoverError(f"{what} range {part!r} holds {hi - lo + 1} values; at most {MAX_LIST}")
            items += list(range(lo, hi + 1))
        else:
            items.append(parse_number(part, what, integer=integer))
    if not items:
        raise CrossoverError(f"{what} list is empty; give e.g. 1,8,64 or 1..64")
    return items


def engine_metrics_files(values: Sequence[str] | str | None) -> list[str] | None:
    """measured's --engine-metrics as its files: one (a log or a scrape after the run) or two (AFTER
    BEFORE: a scrape before it as well), given as two values or, as before, one value AFTER,BEFORE. A
    value that names an existing file is that file, commas and all; else it is split at the comma that
    leaves two existing files, or at every comma (the reader then names what is missing)."""
    if values is None:
        return None
    values = [values] if isinstance(values, str) else list(values)
    if len(values) != 1:
        return values
    v = values[0]
    if "," not in v or os.path.exists(v):
        return [v]
    cuts = [i for i, c in enumerate(v) if c == "," and os.path.exists(v[:i]) and os.path.exists(v[i + 1:])]
    if len(cuts) == 1:
        return [v[:cuts[0]], v[cuts[0] + 1:]]
    return v.split(",")


def parse_lengths(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """--prompt-len and --output-len (mean tokens per request), both or neither."""
    if (args.prompt_len is None) != (args.output_len is None):
        raise CrossoverError("give --prompt-len and --output-len together (mean tokens per request)")
    if args.prompt_len is None:
        return None, None
    return parse_number(args.prompt_len, "--prompt-len"), parse_number(args.output_len, "--output-len")


def print_result(args: argparse.Namespace, result) -> None:
    """A verb's result as one JSON object (--json: exactly `result.to_dict()`) or as its text."""
    print(dumps_indented(result.to_dict()) if getattr(args, "json", False) else result.to_text())


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_ENCODERS: dict[str, object] = {}


def _flat_encoder(separator: str):
    """obj -> its compact JSON with `separator` between items: the C encoder made once per separator."""
    enc = _ENCODERS.get(separator)
    if enc is None:
        from json import encoder

        if encoder.c_make_encoder is None:
            enc = json.JSONEncoder(separators=(separator, ": ")).encode
        else:
            def default(o):
                raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")

            c_enc = encoder.c_make_encoder(None, default, encoder.encode_basestring_ascii, None, ": ", separator,
                                           False, False, True)
            enc = lambda o: "".join(c_enc(o, 0))  # noqa: E731
        enc = _ENCODERS.setdefault(separator, enc)
    return enc


def _scalars(values) -> bool:
    """Whether every value is a JSON scalar of an exact type (a subclass takes the long way)."""
    return all(map(_SCALAR_TYPES.__contains__, map(type, values)))


def _table(rows, indent: str, inner: str, pad: str) -> str | None:
    """A list of dicts that all have the same keys in the same order, every value a scalar (measured
    levels, physics checks), as json.dumps(indent) writes it: each column's values in one call of the
    C encoder (NUL-separated: JSON text never holds a raw NUL, strings escape it), its keys written
    once; None for any other list."""
    if not rows or not all(type(r) is dict for r in rows):
        return None
    keys = tuple(rows[0])
    if not keys or not all(tuple(r) == keys for r in rows):
        return None
    columns = [list(map(itemgetter(k), rows)) for k in keys]
    if not all(map(_scalars, columns)):
        return None
    encode = _flat_encoder("\0")
    inner2 = inner + indent
    lead = [f",\n{inner2}{json.dumps({k: 0})[1:-4]}: " for k in keys]  # a key as json writes it, str or not
    lead[0] = f",\n{inner}{{" + lead[0][1:]
    parts = [piece for key, column in zip(lead, columns) for piece in (repeat(key), encode(column)[1:-1].split("\0"))]
    text = "".join(chain.from_iterable(zip(*parts, repeat(f"\n{inner}}}"))))
    return f"[{text[1:]}\n{pad}]"


def dumps_indented(obj, indent: str = "  ", _pad: str = "") -> str:
    """Exactly `json.dumps(obj, indent=2)`, several times faster on large results: a list or dict
    of scalars (e.g. one measured level) goes through the C encoder in one call, its item separator
    carrying the newline and indentation (scalars never contain a raw newline); a list of dicts of
    scalars with the same keys (every measured level) a column at a time, see `_table`."""
    if isinstance(obj, dict):
        values = obj.values()
    elif isinstance(obj, (list, tuple)):
        values = obj
    else:
        return json.dumps(obj)
    if not obj:
        return "{}" if isinstance(obj, dict) else "[]"
    inner = _pad + indent
    if _scalars(values):
        body = _flat_encoder(",\n" + inner)(obj)
    elif not isinstance(obj, dict) and (table := _table(obj, indent, inner, _pad)) is not None:
        return table
    elif isinstance(obj, dict):
        body = "{" + (",\n" + inner).join(f"{json.dumps(k) if isinstance(k, str) else json.dumps({k: 0})[1:-4]}: "
                                          f"{dumps_indented(v, indent, inner)}" for k, v in obj.items()) + "}"
    else:
        body = "[" + (",\n" + inner).join(dumps_indented(v, indent, inner) for v in obj) + "]"
    return f"{body[0]}\n{inner}{body[1:-1]}\n{_pad}{body[-1]}"


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """The library's warnings (e.g. a draft larger than its target) as one stderr line each; other
    warnings are shown as Python shows them, once the recording has ended (shown inside it, each
    would be recorded again into the list being walked: a loop that never ends)."""
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            yield
    finally:
        for w in caught:
            if issubclass(w.category, UserWarning):
                print("crossover: warning: " + " ".join(str(w.message).split()), file=sys.stderr)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def number_flag(args: argparse.Namespace, name: str, flag: str, **kw: Any) -> float | None:
    """A numeric flag as a number (None when not given)."""
    text = getattr(args, name, None)
    return None if text is None else parse_number(text, flag, **kw)


def sampling_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The requests' sampling flags that were given (api.options.SAMPLING_OPTIONS: --temperature,
    --top-p, --top-k, the penalties); a top-p is > 0, a top-k a whole number."""
    from ..api.options import SAMPLING_OPTIONS

    kw = {name: number_flag(args, name, "--" + name.replace("_", "-"), integer=name == "top_k",
                            positive=name == "top_p") for name in SAMPLING_OPTIONS}
    if kw["top_k"] is not None:
        kw["top_k"] = int(kw["top_k"])
    return {k: v for k, v in kw.items() if v is not None}
