"""Shared pieces of the CLI: value parsing with one-line errors, output helpers."""

from __future__ import annotations

import argparse
import json

from ..errors import CrossoverError

MAX_LIST = 100_000  # values one list flag may expand to (1..N ranges)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CrossoverError(f"{message} (see `{self.prog} --help`)")


# ------------------------------------------------------------------------------ value parsing

def _number(text: str, what: str, *, integer: bool = False, positive: bool = True) -> float:
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise CrossoverError(f"{what} must be {kind} (got {text!r})") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise CrossoverError(f"{what} must be finite (got {text!r})")
    if positive and v <= 0:
        raise CrossoverError(f"{what} must be > 0 (got {text})")
    return v


def parse_list(text: str, what: str, *, integer: bool = False) -> list[float]:
    """'1,2,4' or '1..64' (every integer) or a mix; each > 0."""
    items: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if ".." in part:
            a, b = part.split("..", 1)
            lo = int(_number(a, what, integer=True))
            hi = int(_number(b, what, integer=True))
            if hi < lo:
                raise CrossoverError(f"{what} range {part!r} runs backwards; write LOW..HIGH")
            if hi - lo >= MAX_LIST:
                raise CrossoverError(f"{what} range {part!r} holds {hi - lo + 1} values; at most {MAX_LIST}")
            items += list(range(lo, hi + 1))
        else:
            items.append(_number(part, what, integer=integer))
    if not items:
        raise CrossoverError(f"{what} list is empty; give e.g. 1,8,64 or 1..64")
    return items


def _lengths(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """--prompt-len and --output-len (mean tokens per request), both or neither."""
    if (args.prompt_len is None) != (args.output_len is None):
        raise CrossoverError("give --prompt-len and --output-len together (mean tokens per request)")
    if args.prompt_len is None:
        return None, None
    return _number(args.prompt_len, "--prompt-len"), _number(args.output_len, "--output-len")


def print_result(args: argparse.Namespace, result) -> None:
    """A verb's result as one JSON object (--json: exactly `result.to_dict()`) or as its text."""
    print(json.dumps(result.to_dict(), indent=2) if getattr(args, "json", False) else result.to_text())
