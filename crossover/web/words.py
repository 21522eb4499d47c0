"""The library's messages in the page's words: its errors and notes name the CLI's flags (--on,
--hardware, --prompt-len ...), which a web user has no way to pass; here they name the page's
controls instead. Only crossover's own flags are rewritten: an engine's (vLLM's
--speculative-config, SGLang's --max-running-requests) is what a user sets on their server, and stays."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import CrossoverError

# Whole phrases first (they read better than a flag-by-flag rewrite), then single flags.
PHRASES: tuple[tuple[str, str], ...] = (
    (r"pass it under --on or --off", "set its arm to on or off in the file list"),
    (r"passed under --(on|off) but (.*?), so speculation was (on|off); pass this file under --(?:on|off)",
     r"marked \1 in the file list but \2, so speculation was \3: set its arm to \3 (or auto)"),
    (r"give --on FILES and --off FILES \(or --files whose own fields name the arm\)",
     "mark the uploads as speculation on and off (or auto, where the files say it themselves)"),
    (r"give --on and --off files of the same sweep", "upload the on and off files of the same sweep and set their arms"),
    (r"the --on / --off it was passed under", "the arm set in the file list"),
    (r"give --hardware \(and --tp\)", "pick the Hardware (and TP)"),
    (r"give --model \(a spec name or YAML\) and --hardware", "pick the Model and Hardware"),
    (r"give --model and --hardware", "pick the Model and Hardware"),
    (r"give --model", "pick the Model"),
    (r"give --draft NAME", "pick a Draft"),
    (r"give the k of that run with --k", "set the k slider to that run's k"),
    (r"\(--prompt-len / --output-len\)", "(the prefill share's prompt and output tokens under Load)"),
    (r"--prompt-len ?/ ?--output-len", "the prefill share's prompt and output tokens (under Load)"),
    (r" \(--engine sets another\)", ""),  # the page's Engine picker prices the what-if, not the files
    (r"force one axis with load_axis", "pick one under Load axis (Measured results)"),
    (r"--engine vllm-v0", "the Engine vllm-v0"),
    (r"--engine vllm-0\.10", "the Engine vllm-0.10"),
)
FLAGS = {
    "on": "arm on (the file list)", "off": "arm off (the file list)", "files": "arm auto (the file list)",
    "model": "the Model", "hardware": "the Hardware", "tp": "TP", "method": "the Method", "k": "the k slider",
    "draft": "the Draft", "engine": "the Engine", "cost": "the Cost mode", "prompt-len": "the prompt tokens (Load)",
    "output-len": "the output tokens (Load)", "context": "the context slider", "acceptance": "the acceptance slider",
    "tau": "the tau slider", "load-axis": "the files' load axis", "bootstrap": "the fit's resamples",
}
_PHRASES = [(re.compile(p), r) for p, r in PHRASES]
_FLAG = re.compile(r"(?<![\w-])--(" + "|".join(sorted(map(re.escape, FLAGS), key=len, reverse=True)) + r")(?![\w-])")


def page_words(text: str) -> str:
    """`text` with crossover's CLI flags replaced by the page's controls."""
    for pattern, repl in _PHRASES:
        text = pattern.sub(repl, text)
    return _FLAG.sub(lambda m: FLAGS[m.group(1)], text)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def in_page_words() -> Iterator[None]:
    """A CrossoverError raised inside, as one line in the page's words (still a CrossoverError: a 400)."""
    try:
        yield
    except CrossoverError as exc:
        raise CrossoverError(page_words(first_line(exc))) from None


def reword(obj: Any, keys: tuple[str, ...] = ("message", "setting", "why", "check", "report", "notes", "warnings",
                                              "effect", "reason")) -> Any:
    """The texts under `keys` of a result (at any depth) in the page's words."""
    if isinstance(obj, dict):
        return {k: (_texts(v) if k in keys else reword(v, keys)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [reword(v, keys) for v in obj]
    return obj


def _texts(v: Any) -> Any:
    if isinstance(v, str):
        return page_words(v)
    if isinstance(v, list):
        return [_texts(x) for x in v]
    return reword(v)
