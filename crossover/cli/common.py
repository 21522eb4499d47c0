"""Shared pieces of the CLI: defaults, value parsing with one-line errors, output helpers."""

from __future__ import annotations

import argparse
import json

from ..errors import CrossoverError

DEFAULT_MODEL = "llama-3.1-70b"
DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_METHOD = "eagle"
DEFAULT_K = 3
DEFAULT_ACCEPTANCE = 0.7
DEFAULT_CONTEXT = 2048
MIN_SEQUENCES_FOR_AUTO_TP = 16


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
            items += list(range(lo, hi + 1))
        else:
            items.append(_number(part, what, integer=integer))
    if not items:
        raise CrossoverError(f"{what} list is empty; give e.g. 1,8,64 or 1..64")
    return items


def parse_tree(text: str) -> tuple[tuple[int, ...] | None, tuple[tuple[int, ...], ...] | None]:
    """(nodes per depth, node paths) from '3x4' (depth 3, 4 nodes per depth), '4,4,2' (nodes per
    depth), a preset name ('eagle1') or node paths as JSON ('[[0],[1],[0,0]]')."""
    import json

    from ..speculation import TREE_PRESETS, _check_paths

    t = text.strip().lower()
    if t in TREE_PRESETS:
        return None, TREE_PRESETS[t]
    if t.startswith("["):
        try:
            raw = json.loads(t)
            paths = tuple(tuple(int(r) for r in node) for node in raw)
            if any(not isinstance(node, list) or any(isinstance(r, bool) or not isinstance(r, int) for r in node)
                   for node in raw):
                raise ValueError
        except (ValueError, TypeError):
            raise CrossoverError(
                f"--tree {text!r}: node paths are a JSON list of rank lists, e.g. [[0],[1],[0,0]]") from None
        widths = _check_paths(paths)
        if len(widths) > 32:
            raise CrossoverError(f"--tree {text!r}: depth 1..32")
        return None, paths
    try:
        if "x" in t:
            depth, branch = (int(x) for x in t.split("x", 1))
            widths = (branch,) * depth
        else:
            widths = tuple(int(x) for x in t.split(",") if x.strip())
    except ValueError:
        raise CrossoverError(f"--tree {text!r}: write DEPTHxBRANCHING (e.g. 3x4), nodes per depth (e.g. 4,4,2), "
                             f"node paths (e.g. [[0],[1],[0,0]]) or a preset ({', '.join(TREE_PRESETS)})") from None
    if not widths or any(w < 1 for w in widths) or len(widths) > 32:
        raise CrossoverError(f"--tree {text!r}: depth 1..32 and at least one node per depth")
    return widths, None


def _fraction(text: str, what: str) -> float:
    v = _number(text, what)
    if v > 1:
        raise CrossoverError(f"{what} must lie in (0, 1] (got {text})")
    return v


def _lengths(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """--prompt-len and --output-len (mean tokens per request), both or neither."""
    if (args.prompt_len is None) != (args.output_len is None):
        raise CrossoverError("give --prompt-len and --output-len together (mean tokens per request)")
    if args.prompt_len is None:
        return None, None
    return _number(args.prompt_len, "--prompt-len"), _number(args.output_len, "--output-len")


def _emit(args: argparse.Namespace, as_dict, as_text, inputs: dict | None = None) -> None:
    """Print one JSON object (--json, with the resolved inputs) or the readable text."""
    if getattr(args, "json", False):
        out = as_dict()
        if inputs is not None:
            out["inputs"] = inputs
        print(json.dumps(out, indent=2))
    else:
        print(as_text())
