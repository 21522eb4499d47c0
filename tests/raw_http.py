"""Raw HTTP over a socket for the web server's tests: bytes sent as written, the answer read until
the server closes, parsed leniently (a missing status line is status 0)."""

from __future__ import annotations

import socket


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
