"""`crossover serve`: a local HTTP server (the standard library's ThreadingHTTPServer) for the
what-if page. It serves the page's own static files (no CDN: it works offline) and JSON endpoints
that call the library API (endpoints.py). It reads no file but the spec libraries and uploads.

    GET  /                      the page (static/index.html); /static/<file> its scripts and styles
    GET  /api/options           spec libraries, methods, engines, cost modes, defaults
    GET  /api/whatif?QUERY      predict + the per-op breakdown for the page's state
    GET  /api/policy?QUERY      the best-k schedule and engine configs for the same state
    POST /api/upload?name=FILE  a measured result file as the body (10 MB at most) -> {id}
    GET  /api/measured?QUERY&files=ID:ARM,...   the uploads as one sweep with the physics check
    POST /api/simulate?QUERY    start a serving simulation sweep -> {id}
    GET  /api/job?id=ID         its progress and, when done, its result

Bad input is HTTP 400 with {"error": one line}; POSTs need the header X-Crossover: 1 (a cross-site
form cannot set it), and requests naming another host than this server's are refused.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import warnings
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit

from pydantic import ValidationError

from ..errors import CrossoverError
from . import endpoints
from .store import MAX_UPLOAD_BYTES, Jobs, TooLarge, Uploads

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon"}
LOCAL_NAMES = {"127.0.0.1", "localhost", "::1"}
_LIBRARY = threading.Lock()  # library calls run one at a time, so each captures its own warnings


def static_files() -> dict[str, Path]:
    """URL path -> file, for the files shipped in static/ only (nothing else is ever served)."""
    files = {"/static/" + p.relative_to(STATIC).as_posix(): p for p in STATIC.rglob("*")
             if p.is_file() and p.suffix in TYPES}
    files["/"] = files["/index.html"] = STATIC / "index.html"
    files["/favicon.ico"] = STATIC / "favicon.svg"
    return files


def one_line(exc: BaseException) -> str:
    """An error as one line (pydantic: the first problem, with its field)."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def library_call(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run one library call, its warnings returned under "warnings" as one line each."""
    with _LIBRARY, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    lines = list(dict.fromkeys(str(w.message).splitlines()[0] for w in caught if str(w.message)))
    if lines:
        out["warnings"] = out.get("warnings", []) + lines
    return out


class Handler(BaseHTTPRequestHandler):
    server: "CrossoverServer"
    protocol_version = "HTTP/1.1"
    server_version = "crossover"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.server.verbose:
            super().log_message(format, *args)

    # ------------------------------------------------------------------ responses

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        text = json.dumps(_finite(obj), allow_nan=False, default=_jsonable)
        self._send(status, self.server.uploads.scrub(text).encode(), "application/json")  # uploads by name only

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    # ------------------------------------------------------------------ routing

    def _host_ok(self) -> bool:
        """The Host header names this server (a DNS-rebinding page cannot reach the API)."""
        if self.server.any_host:
            return True
        try:
            host = urlsplit("//" + (self.headers.get("Host") or "")).hostname or ""
        except ValueError:
            return False
        return host in LOCAL_NAMES or host == self.server.bound_host.strip("[]")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        q = dict(parse_qsl(url.query, keep_blank_values=True))
        try:
            if not self._host_ok():
                return self._error(HTTPStatus.FORBIDDEN, "this server answers requests for its own address only")
            if method == "GET" and url.path in self.server.static:
                return self._static(url.path)
            route = self.server.routes.get((method, url.path))
            if route is None:
                if method == "POST" or url.path.startswith("/api/"):
                    self._drain()
                    return self._error(HTTPStatus.NOT_FOUND, f"no endpoint {method} {url.path}")
                return self._error(HTTPStatus.NOT_FOUND, f"not found: {url.path}")
            if method == "POST" and self.headers.get("X-Crossover") != "1":
                self._drain()
                return self._error(HTTPStatus.FORBIDDEN, "POST requests need the header X-Crossover: 1")
            self._json(HTTPStatus.OK, route(self, q))
        except (BrokenPipeError, ConnectionResetError):  # the page dropped a request it no longer needs
            self.close_connection = True
        except TooLarge as exc:
            self.close_connection = True
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, one_line(exc))
        except (CrossoverError, ValidationError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, one_line(exc))
        except Exception as exc:  # a bug: still one line, and the server keeps serving
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {type(exc).__name__}: {one_line(exc)}")

    def _static(self, path: str) -> None:
        file = self.server.static[path]
        self._send(HTTPStatus.OK, file.read_bytes(), TYPES[file.suffix])

    def _drain(self) -> None:
        """Read (and drop) a small request body so the connection stays in step; close on a large one."""
        n = int(self.headers.get("Content-Length") or 0)
        if 0 < n <= 65536:
            self.rfile.read(n)
        elif n:
            self.close_connection = True

    def body(self, limit: int) -> bytes:
        try:
            n = int(self.headers.get("Content-Length") or "")
        except ValueError:
            self.close_connection = True
            raise CrossoverError("the request needs a Content-Length") from None
        if n > limit:
            self.close_connection = True
            raise TooLarge(f"upload of {n} bytes exceeds the limit of {limit} bytes ({limit // (1024 * 1024)} MB)")
        return self.rfile.read(n) if n > 0 else b""

    # ------------------------------------------------------------------ endpoints

    def api_options(self, q: dict[str, str]) -> dict[str, Any]:
        return library_call(endpoints.options)

    def api_whatif(self, q: dict[str, str]) -> dict[str, Any]:
        return library_call(endpoints.whatif, q)

    def api_policy(self, q: dict[str, str]) -> dict[str, Any]:
        return library_call(endpoints.policy, q)

    def api_upload(self, q: dict[str, str]) -> dict[str, Any]:
        data = self.body(self.server.uploads.limit)
        return self.server.uploads.add(q.get("name") or "upload", data)

    def api_measured(self, q: dict[str, str]) -> dict[str, Any]:
        files = []
        for item in filter(None, (q.get("files") or "").split(",")):
            uid, _, arm = item.partition(":")
            files.append((self.server.uploads.path(uid), arm or "auto"))
        return library_call(endpoints.measured, q, files)

    def api_simulate(self, q: dict[str, str]) -> dict[str, Any]:
        self._drain()
        kw = endpoints.simulation_kwargs(q)
        library_call(lambda: endpoints.check_simulation(kw) or {})
        job = self.server.jobs.start(len(kw["concurrency"]), lambda progress: endpoints.simulate(kw, progress))
        return job.to_dict()

    def api_job(self, q: dict[str, str]) -> dict[str, Any]:
        return self.server.jobs.get(q.get("id", "")).to_dict()


def _finite(x: Any) -> Any:
    """NaN and infinities as null (JSON has no such numbers; the browser's parser refuses them)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _jsonable(x: Any) -> Any:
    """numpy scalars and paths in results, as JSON values."""
    if hasattr(x, "item"):
        return x.item()
    return str(x)


class CrossoverServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False,
                 upload_limit: int = MAX_UPLOAD_BYTES) -> None:
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.verbose = verbose
        self.bound_host = host
        self.any_host = host in ("0.0.0.0", "::", "")
        self.static = static_files()
        self.uploads = Uploads(upload_limit)
        self.jobs = Jobs(self.uploads.scrub)
        super().__init__((host, port), Handler)  # closes itself (and the uploads) when it cannot bind
        h = Handler
        self.routes = {("GET", "/api/options"): h.api_options, ("GET", "/api/whatif"): h.api_whatif,
                       ("GET", "/api/policy"): h.api_policy,
                       ("POST", "/api/upload"): h.api_upload, ("GET", "/api/measured"): h.api_measured,
                       ("POST", "/api/simulate"): h.api_simulate, ("GET", "/api/job"): h.api_job}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in str(host) else host)
        return f"http://{shown}:{port}/"

    def server_close(self) -> None:
        super().server_close()
        self.uploads.close()


def make_server(host: str = "127.0.0.1", port: int = 0, **kw: Any) -> CrossoverServer:
    """A server bound to (host, port); port 0 picks a free one (see `.url`). Call serve_forever()."""
    try:
        return CrossoverServer(host, int(port), **kw)
    except OSError as exc:
        raise CrossoverError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
