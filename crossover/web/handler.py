"""The request handler of `crossover serve` (server.py): one request at a time per connection, read
against a deadline (Deadline), routed to the JSON endpoints (endpoints.py) or the page's static files,
every refusal one JSON line. The limits it applies are the constants below; server.py documents them."""

from __future__ import annotations

import io
import json
import math
import socket
import threading
import time
import warnings
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable
from urllib.parse import SplitResult, parse_qsl, urlsplit

from pydantic import ValidationError

from ..errors import CrossoverError
from . import endpoints, sweeps
from .words import page_words
from .store import MAX_UPLOADS, TooLarge

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon"}
LOCAL_NAMES = {"127.0.0.1", "localhost", "::1"}
METHODS = ("GET", "HEAD", "POST")
REQUEST_TIMEOUT_S = 5.0  # a connection silent this long is closed; a request's headers arrive within this long
BODY_BYTES_PER_S = 1 << 20  # ... and its body within REQUEST_TIMEOUT_S more a second per this many bytes
MAX_CONNECTIONS = 64  # served at once (a thread each); one more is a quick 503
REFUSE_S, MAX_REFUSING = 0.5, 16  # how long a 503 lingers for the client's request, and how many at once
DRAIN_BYTES = 65536  # a request body no endpoint reads, up to this size, is read so the connection stays in step
LINGER_S, LINGER_BYTES = 2.0, 64 << 20  # what a closing connection still reads of a body nobody wanted
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


def internal(exc: BaseException) -> str:
    """A bug's one line (HTTP 500, or a failed job): still no traceback."""
    return f"internal error: {type(exc).__name__}: {one_line(exc)}"


def library_call(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run one library call, its warnings returned under "warnings" as one line each."""
    with _LIBRARY, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    lines = list(dict.fromkeys(str(w.message).splitlines()[0] for w in caught if str(w.message)))
    if lines:
        out["warnings"] = out.get("warnings", []) + lines
    return out


class Deadline(io.RawIOBase):
    """A connection's reads, bounded: waiting for a request's first byte, `timeout` seconds; from it on,
    the request's line, headers and body share a deadline `timeout` seconds on (extend() adds the
    body's allowance). A read past it raises TimeoutError and sets .expired. A client trickling a
    byte at a time cannot keep a connection (and its thread) past the deadline."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__()
        self._sock, self.timeout = sock, timeout
        self.deadline: float | None = None
        self.expired = False

    def readable(self) -> bool:
        return True

    def start(self) -> None:
        """A new request on the connection: its deadline begins with its first byte."""
        self.deadline, self.expired = None, False

    def extend(self, seconds: float) -> None:
        if self.deadline is not None:
            self.deadline += seconds

    def readinto(self, buf: Any) -> int:
        wait = self.timeout if self.deadline is None else self.deadline - time.monotonic()
        if wait <= 0:
            self.expired = True
            raise TimeoutError("the request's deadline passed")
        self._sock.settimeout(wait)
        try:
            n = self._sock.recv_into(buf)
        except TimeoutError:
            self.expired = True
            raise
        finally:
            self._sock.settimeout(self.timeout)  # writes keep the connection's own timeout
        if n and self.deadline is None:
            self.deadline = time.monotonic() + self.timeout
        return n


class Handler(BaseHTTPRequestHandler):
    server: Any  # server.CrossoverServer
    protocol_version = "HTTP/1.1"
    server_version = "crossover"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms wait on a delayed ACK

    def setup(self) -> None:
        self.timeout = self.server.request_timeout  # the socket's, for every write of this connection
        super().setup()
        self.rfile.close()  # http.server's reader (no deadline) gives way to one with a deadline
        self.reader = Deadline(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self) -> None:
        """One request, read on its deadline; one whose line or headers came too slowly is a 408."""
        self.reader.start()
        self._answered = False
        self.command, self.request_version, self.requestline = None, "HTTP/1.1", ""  # until its line is read
        super().handle_one_request()  # closes the connection on a timeout
        if self.reader.expired and not self._answered and self.reader.deadline is not None:
            self.send_error(HTTPStatus.REQUEST_TIMEOUT, f"the request did not arrive within "
                            f"{self.server.request_timeout:g} s of its first byte; send it whole")

    def send_response(self, code: int, message: str | None = None) -> None:
        self._answered = True
        super().send_response(code, message)

    def parse_request(self) -> bool:
        """http.server's parse, and two kinds of request it takes refused (400): HTTP/0.9 (a request
        line with no version, answered with a bare body), and one giving its body's length two ways
        (two Content-Length headers, or Transfer-Encoding beside one: a proxy in front could read the
        other length than this server, and take the rest of the body for another request)."""
        self._body_done = False  # per request: a keep-alive connection carries many
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":  # no status line nor headers in the answer: the client
            self.send_error(HTTPStatus.BAD_REQUEST,  # could not tell a refusal from the page
                            "the request line needs its HTTP version (GET /path HTTP/1.1): this server speaks HTTP/1.1")
            return False
        lengths = len(self.headers.get_all("Content-Length") or [])
        if lengths > 1 or (lengths and self.headers.get_all("Transfer-Encoding")):
            self._body_done = True  # no length to read it by: the connection closes
            got = "Transfer-Encoding and Content-Length" if lengths == 1 else f"{lengths} Content-Length"
            self.send_error(HTTPStatus.BAD_REQUEST,
                            f"a request may carry one Content-Length and no Transfer-Encoding beside it (got {got})")
            return False
        return True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.server.verbose:
            super().log_message(format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a garbled request line, an unknown method, a header too long)
        as one JSON line like every other error, not its HTML page; an unknown method is 405."""
        extra = None
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # not parsed yet (a garbled request line): answer as HTTP/1.1,
            self.request_version = "HTTP/1.1"  # whose status line and headers a client can read
        if code == HTTPStatus.NOT_IMPLEMENTED:  # only for a method there is no do_<METHOD> for
            code, extra = HTTPStatus.METHOD_NOT_ALLOWED, {"Allow": ", ".join(METHODS)}
            message = f"method {_line(self.command or '')} is not allowed: use {', '.join(METHODS)}"
        elif code == HTTPStatus.HTTP_VERSION_NOT_SUPPORTED:  # a request line saying HTTP/2.0 or later
            code = HTTPStatus.BAD_REQUEST
            message = f"{message or 'unsupported HTTP version'}: this server speaks HTTP/1.1"
        text = " ".join(str(message or HTTPStatus(code).phrase).split())
        try:
            self._json(code, {"error": _line(text, 200)}, extra)
        except OSError:  # the client has gone
            pass

    # ------------------------------------------------------------------ responses

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.close_connection:  # the client must not send its next request on this connection
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        text = json.dumps(_finite(obj), allow_nan=False, default=_jsonable)
        self._send(status, self.server.uploads.scrub(text).encode(), "application/json", extra)  # uploads by name only

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    # ------------------------------------------------------------------ routing

    def _host_ok(self, url: SplitResult) -> bool:
        """The request names this server (a DNS-rebinding page cannot reach the API): its Host header,
        or the host of an absolute URL on the request line, which HTTP/1.1 puts before the header."""
        if self.server.any_host:
            return True
        try:
            authority = url.netloc if (url.scheme or url.netloc) else (self.headers.get("Host") or "")
            host = urlsplit("//" + authority).hostname or ""
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
        try:
            url = urlsplit(self.path)
            q = dict(parse_qsl(url.query, keep_blank_values=True))
            if (method, url.path) != ("POST", "/api/upload"):
                self._drain()  # only the upload reads its body
            if not self._host_ok(url):
                self._drain()
                return self._error(HTTPStatus.FORBIDDEN, "this server answers requests for its own address only")
            if method == "GET" and url.path in self.server.static:
                return self._static(url.path)
            route = self.server.routes.get((method, url.path))
            if route is None:
                if method == "POST" or url.path.startswith("/api/"):
                    return self._error(HTTPStatus.NOT_FOUND, f"no endpoint {method} {_line(url.path)}")
                return self._error(HTTPStatus.NOT_FOUND, f"not found: {_line(url.path)}")
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
            self.close_connection = True
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, internal(exc))

    def _static(self, path: str) -> None:
        file = self.server.static[path]
        self._send(HTTPStatus.OK, file.read_bytes(), TYPES[file.suffix])

    def _length(self) -> int | None:
        """The request's Content-Length; None when absent, -1 when no length (garbled, negative, chunked)."""
        text = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            return -1
        if text is None:
            return None
        text = text.strip()
        return int(text) if text.isdigit() and text.isascii() and len(text) < 19 else -1

    def _drain(self) -> None:
        """Read (and drop) a small request body so the connection stays in step; close on a large one,
        or one whose length cannot be read. Reads a body once."""
        if self._body_done:
            return
        self._body_done = True
        n = self._length()
        if n is None or n == 0:
            return
        if 0 < n <= DRAIN_BYTES:
            try:
                if len(self.rfile.read(n)) == n:
                    return
            except (TimeoutError, OSError):
                pass
        self.close_connection = True

    def body(self, limit: int) -> bytes:
        n = self._length()
        if n is None or n < 0:
            self._drain()
            raise CrossoverError("the request needs a Content-Length (a whole number of bytes; no chunked upload)")
        if n > limit:
            self._drain()
            self.close_connection = True
            raise TooLarge(f"upload of {n} bytes exceeds the limit of {limit} bytes ({limit / (1024 * 1024):.3g} MB)")
        self._body_done = True
        self.reader.extend(n / BODY_BYTES_PER_S)
        try:
            data = self.rfile.read(n) if n > 0 else b""
        except TimeoutError:
            data = None
        if data is None or len(data) < n:
            self.close_connection = True
            got = "nothing" if not data else f"{len(data)} bytes"
            raise CrossoverError(f"the upload ended after {got} of its {n} bytes (Content-Length); send the whole file")
        return data

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

    def _files(self, q: dict[str, str]) -> list[tuple[Path, str]]:
        """The query's files=ID:ARM,... as (upload path, arm) pairs (a file listed twice: once)."""
        items = list(dict.fromkeys(filter(None, (q.get("files") or "").split(","))))
        if len(items) > MAX_UPLOADS:
            raise CrossoverError(f"files: at most {MAX_UPLOADS} uploads in one sweep (got {len(items)})")
        files = []
        for item in items:
            uid, _, arm = item.partition(":")
            files.append((self.server.uploads.path(uid), arm or "auto"))
        return list(dict.fromkeys(files))

    def api_uploads(self, q: dict[str, str]) -> dict[str, Any]:
        return library_call(sweeps.uploads, q, self.server.uploads)

    def api_measured(self, q: dict[str, str]) -> dict[str, Any]:
        return _reworded(library_call(sweeps.measured, q, self._files(q)))

    def api_calibrate(self, q: dict[str, str]) -> dict[str, Any]:
        return _reworded(library_call(sweeps.calibrate, q, self._files(q)))

    def api_simulate(self, q: dict[str, str]) -> dict[str, Any]:
        self._drain()
        kw = endpoints.simulation_kwargs(q)
        library_call(lambda: endpoints.check_simulation(kw) or {})
        job = self.server.jobs.start(len(kw["concurrency"]), lambda progress: endpoints.simulate(kw, progress))
        return job.to_dict()

    def api_job(self, q: dict[str, str]) -> dict[str, Any]:
        return self.server.jobs.get(q.get("id", "")).to_dict()


def _reworded(out: dict[str, Any]) -> dict[str, Any]:
    """The warnings of a measured-panel call in the page's words (words.py), as its errors and notes."""
    if out.get("warnings"):
        out["warnings"] = [page_words(w) for w in out["warnings"]]
    return out


def _line(text: str, limit: int = 80) -> str:
    """A value of the request, echoed in an error line: one line, at most `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _finite(x: Any) -> Any:
    """NaN and infinities as null (JSON has no such numbers; the browser's parser refuses them);
    numpy scalars and arrays as the Python numbers and lists they hold."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if hasattr(x, "tolist") and hasattr(x, "dtype"):  # numpy: float32 and arrays are no float / list
        return _finite(x.tolist())
    return x


def _jsonable(x: Any) -> Any:
    """What json cannot write by itself (paths in results) as text."""
    return str(x)
