"""The interactive what-if page (`crossover serve`): a standard-library HTTP server, the page's own
static files and JSON endpoints over the library API. A leaf like the CLI: nothing imports it."""

from __future__ import annotations

import sys
import threading
import webbrowser
from typing import TextIO

from .server import CrossoverServer, make_server

__all__ = ["CrossoverServer", "make_server", "serve"]


def serve(host: str = "127.0.0.1", port: int = 0, *, open_browser: bool = False, verbose: bool = False,
          out: TextIO = sys.stdout) -> int:
    """Serve the page until interrupted; prints the URL first (and opens it with `open_browser`)."""
    server = make_server(host, port, verbose=verbose)
    print(f"crossover: serving the what-if page at {server.url} (Ctrl-C stops it)", file=out, flush=True)
    if open_browser:
        threading.Timer(0.3, webbrowser.open, args=(server.url,)).start()
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
