"""Speed of the page's round trips (issue 25): the what-if call the page makes on every change of a
control (predict + the per-op breakdown for the page's state) and the policy call beside it, over HTTP
to a server on this machine, as the browser sends them.

Run: python benchmarks/bench_web.py [--requests N]   (prints medians and p90s in ms; the page's
budget is 100 ms per change)
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _get(host: str, port: int, path: str) -> float:
    """Seconds for one GET (connect, request, the whole body read), as a browser's fetch does it."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request("GET", path)
        res = conn.getresponse()
        res.read()
        if res.status != 200:
            raise SystemExit(f"{path}: HTTP {res.status}")
    finally:
        conn.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=60)
    n = ap.parse_args().requests
    from crossover.web import make_server

    srv = make_server("127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    host, port = srv.server_address[:2]
    try:
        cases = {
            "what-if, the page's default state": lambda i: "/api/whatif",
            "what-if, k changed (2..5 in turn)": lambda i: f"/api/whatif?k={2 + i % 4}",
            "what-if, acceptance changed (0.50..0.85 in turn)": lambda i: f"/api/whatif?acceptance={0.5 + 0.05 * (i % 8):.2f}",
            "policy, the page's default state": lambda i: "/api/policy",
        }
        for name, path in cases.items():
            _get(host, port, path(0))  # warm: the first call builds the scenario's step model
            times = sorted(_get(host, port, path(i)) * 1e3 for i in range(n))
            print(f"{name}: median {statistics.median(times):.1f} ms, p90 {times[int(0.9 * len(times))]:.1f} ms "
                  f"over {n} requests (page budget 100 ms)")
    finally:
        srv.shutdown()
        srv.server_close()


if __name__ == "__main__":
    main()
