"""Raw HTTP over a socket for the web server's tests: bytes sent as written, the answer read until
the server closes, parsed leniently (a missing status line is status 0); and `served`, a server
answering on a thread for the length of a block."""

from __future__ import annotations

import socket
import sys
import threading
import traceback
from contextlib import contextmanager


@contextmanager
def served(server, poll_interval: float = 0.05, record_crashes: bool = False):
    """`server` answering on a daemon thread for the block, shut down and closed after it. With
    `record_crashes`, a handler that dies (other than a dropped connection) appends its traceback to
    `server.crashes` instead of socketserver printing it."""
    if record_crashes:
        server.crashes = []

        def handle_error(request, address):
            if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                server.crashes.append(traceback.format_exc())

        server.handle_error = handle_error
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def read_until_close(s: socket.socket, *, stop_on=(ConnectionResetError,)) -> bytes:
    """What the server sends until it closes the connection (or raises one of `stop_on`)."""
    chunks = []
    while True:
        try:
            chunk = s.recv(65536)
        except stop_on:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def parse_answer(raw: bytes) -> tuple[int, dict, bytes]:
    """(status, lower-cased headers, body up to its Content-Length) of the first response in `raw`."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:]))
    return status, headers, body[: int(headers.get("content-length", len(body)))]


def send_raw(address, data: bytes, timeout: float) -> tuple[int, dict, bytes]:
    """Send `data` as written, close our side, and parse what comes back."""
    with socket.create_connection(address[:2], timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        return parse_answer(read_until_close(s))
