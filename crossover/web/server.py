"""`crossover serve`: a local HTTP server (the standard library's ThreadingHTTPServer) for the
what-if page. It serves the page's own static files (no CDN: it works offline) and JSON endpoints
that call the library API (endpoints.py). It reads no file but the spec libraries and uploads.

    GET  /                      the page (static/index.html); /static/<file> its scripts and styles
    GET  /api/options           spec libraries, methods, engines, cost modes, defaults
    GET  /api/whatif?QUERY      predict + the per-op breakdown for the page's state
    GET  /api/policy?QUERY      the best-k schedule and engine configs for the same state
    POST /api/upload?name=FILE  a measured result file as the body (10 MB at most) -> {id}
    GET  /api/uploads?ids=ID,...  what each upload says of itself (its arm, format, levels; or why it
                                cannot be read); ids the server no longer holds under "missing"
    GET  /api/measured?QUERY&files=ID:ARM,...   the uploads as one sweep: the diagnosis, the physics
                                check with both bounds (decode only, with the prefill share)
    GET  /api/calibrate?QUERY&files=ID:ARM,...  the calibration fitted to them, with the default and
                                the calibrated curves over the measured levels
    POST /api/simulate?QUERY    start a serving simulation sweep -> {id}
    GET  /api/job?id=ID         its progress and, when done, its result

Bad input is HTTP 400 with {"error": one line} (every other refusal too: 403, 404, 405 for another
method, 413, and the HTTP parser's own 400/414/431, all as one JSON line); POSTs need the header
X-Crossover: 1 (a cross-site form cannot set it), and requests naming another host than this
server's are refused. A request body no endpoint reads is read and dropped (closing the connection,
with Connection: close, when it is large or its length unreadable); a request giving its length two
ways (two Content-Length headers, or Transfer-Encoding beside one) is a 400, as is one with no HTTP
version (HTTP/0.9, whose answer has no status line).

Slow clients cannot hold the server: a connection silent for REQUEST_TIMEOUT_S is closed, and a
request's line and headers must arrive within REQUEST_TIMEOUT_S of its first byte (408 otherwise),
its body within that plus a second per BODY_BYTES_PER_S of its Content-Length (400 otherwise). At
most MAX_CONNECTIONS connections are served at once; one more is answered 503 at once (Retry-After).
SIGTERM stops serve_forever (in the main thread) as Ctrl-C does, so the uploads go with the server.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

from ..errors import CrossoverError
from .handler import (
    LINGER_BYTES,
    LINGER_S,
    MAX_CONNECTIONS,
    MAX_REFUSING,
    REFUSE_S,
    REQUEST_TIMEOUT_S,
    Handler,
    internal,
    static_files,
)
from .store import MAX_UPLOAD_BYTES, Jobs, Uploads


class CrossoverServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog (socketserver's 5 drops a burst of connections)

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False,
                 upload_limit: int = MAX_UPLOAD_BYTES, request_timeout: float = REQUEST_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.verbose = verbose
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self._open = self._refusing = 0  # connections served, and being answered 503
        self._count = threading.Lock()
        self.bound_host = host
        self.any_host = host in ("0.0.0.0", "::", "")
        self.static = static_files()
        self.uploads = Uploads(upload_limit)
        self.jobs = Jobs(self.uploads.scrub, internal)
        super().__init__((host, port), Handler)  # closes itself (and the uploads) when it cannot bind
        h = Handler
        self.routes = {("GET", "/api/options"): h.api_options, ("GET", "/api/whatif"): h.api_whatif,
                       ("GET", "/api/policy"): h.api_policy,
                       ("POST", "/api/upload"): h.api_upload, ("GET", "/api/uploads"): h.api_uploads,
                       ("GET", "/api/measured"): h.api_measured, ("GET", "/api/calibrate"): h.api_calibrate,
                       ("POST", "/api/simulate"): h.api_simulate, ("GET", "/api/job"): h.api_job}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in str(host) else host)
        return f"http://{shown}:{port}/"

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until shutdown(); in the main thread, SIGTERM stops it too (as Ctrl-C does), and the
        uploads are removed then. The previous SIGTERM handler is restored after (and a Python one
        still called on the signal); an ignored SIGTERM stays ignored."""
        previous = signal.getsignal(signal.SIGTERM)
        if threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
            return super().serve_forever(poll_interval)  # signals reach the main thread only; an ignored one stays so
        terminated = []

        def on_sigterm(signum: int, frame: Any) -> None:
            terminated.append(signum)
            threading.Thread(target=self.shutdown, name="crossover-sigterm", daemon=True).start()  # the loop ends
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGTERM, on_sigterm)
        try:
            super().serve_forever(poll_interval)
        finally:
            signal.signal(signal.SIGTERM, previous)
            if terminated:
                self.uploads.close()  # server_close does too; this even when its caller does not

    @property
    def open_connections(self) -> int:
        """Connections being served now (each holds a thread until it closes)."""
        return self._open

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection, or a quick 503 when MAX_CONNECTIONS are open already."""
        with self._count:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
        if full:
            return self._refuse(request)
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: the slot is free again
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._count:
            self._open -= 1

    def _refuse(self, request: Any) -> None:
        """Answer 503 on a short-lived thread (the accept loop never waits on a client); beyond
        MAX_REFUSING of those at once, close the connection unanswered."""
        with self._count:
            busy = self._refusing >= MAX_REFUSING
            if not busy:
                self._refusing += 1
        if busy:
            return self.close_request(request)
        try:
            threading.Thread(target=self._refuse_thread, args=(request,), name="crossover-503", daemon=True).start()
        except BaseException:
            with self._count:
                self._refusing -= 1
            self.close_request(request)
            raise

    def _refuse_thread(self, request: Any) -> None:
        body = json.dumps({"error": f"the server is busy ({self.max_connections} connections open); "
                                    "try again in a moment"}).encode()
        head = (f"HTTP/1.1 503 Service Unavailable\r\nServer: {Handler.server_version}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                "X-Content-Type-Options: nosniff\r\nRetry-After: 1\r\nConnection: close\r\n\r\n")
        try:
            request.settimeout(REFUSE_S)
            request.sendall(head.encode() + body)
            request.shutdown(socket.SHUT_WR)
            end = time.monotonic() + REFUSE_S  # read what the client sends (closing on unread bytes resets,
            while time.monotonic() < end and request.recv(65536):  # which can drop the 503 unread)
                pass
        except OSError:
            pass
        finally:
            self.close_request(request)
            with self._count:
                self._refusing -= 1

    def shutdown_request(self, request: Any) -> None:
        """Close a connection lingering: stop sending, then read (and drop) what the client still sends
        until it closes, for LINGER_S at most. Closing a socket with unread bytes sends a TCP reset,
        which can discard the answer (a 413, a 400 for a chunked body) before the client reads it."""
        try:
            request.shutdown(socket.SHUT_WR)
            request.settimeout(LINGER_S)
            end, got = time.monotonic() + LINGER_S, 0
            while got < LINGER_BYTES and time.monotonic() < end:
                chunk = request.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
        except OSError:  # already gone, or silent for LINGER_S
            pass
        self.close_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request is no error worth a traceback on stderr."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        self.uploads.close()


def make_server(host: str = "127.0.0.1", port: int = 0, **kw: Any) -> CrossoverServer:
    """A server bound to (host, port); port 0 picks a free one (see `.url`). Call serve_forever()."""
    try:
        return CrossoverServer(host, int(port), **kw)
    except OSError as exc:
        raise CrossoverError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
