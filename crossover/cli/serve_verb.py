"""`crossover serve`: the interactive what-if page on a local web server."""

from __future__ import annotations

import argparse

from ..errors import CrossoverError
from .common import parse_number


SERVE_HELP = "an interactive what-if page in the browser (a local web server)"


def add_serve_flags(sv: argparse.ArgumentParser) -> None:
    """The `serve` verb's flags."""
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", default="0", help="port (default 0: a free one; the URL is printed)")
    sv.add_argument("--open", action="store_true", help="open the page in the default browser")
    sv.add_argument("--verbose", action="store_true", help="log every request on stderr")


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the page until Ctrl-C."""
    from ..web import serve  # the web layer loads only for this verb

    port = int(parse_number(args.port, "--port", integer=True, positive=False))
    if not 0 <= port <= 65535:
        raise CrossoverError(f"--port must lie in 0..65535 (got {port}; 0 picks a free port)")
    return serve(args.host, port, open_browser=args.open, verbose=args.verbose)
