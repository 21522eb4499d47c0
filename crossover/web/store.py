"""What the server holds between requests: the user's uploads (in a private temporary directory,
size-limited, deleted when the server stops) and simulation jobs (a thread each, with progress)."""

from __future__ import annotations

import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import CrossoverError
from .params import shown

MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # one result file; vLLM/SGLang results are kilobytes
MAX_UPLOADS = 64  # kept at once; the oldest go first
MAX_JOBS = 16  # finished jobs kept for polling
MAX_RUNNING = 2  # simulations at once (the machine's cores are the limit)


class TooLarge(CrossoverError):
    """An upload over MAX_UPLOAD_BYTES (HTTP 413)."""


def safe_name(name: str) -> str:
    """A file name with no directory part and plain characters only (the suffix kept)."""
    base = re.sub(r"[^A-Za-z0-9._=-]+", "_", name.replace("\\", "/").split("/")[-1]).lstrip(".")
    return base[:120] or "upload"


class Uploads:
    """Uploaded result files, each in its own folder under one temporary directory."""

    def __init__(self, limit: int = MAX_UPLOAD_BYTES) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="crossover-uploads-"))
        self.limit = limit
        self._files: OrderedDict[str, Path] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, name: str, data: bytes) -> dict[str, Any]:
        if len(data) > self.limit:
            raise TooLarge(f"upload of {len(data)} bytes exceeds the limit of {self.limit} bytes")
        if not data:
            raise CrossoverError("empty upload: choose a measured result file")
        uid = secrets.token_hex(8)
        folder = self.root / uid
        folder.mkdir()
        path = folder / safe_name(name)
        path.write_bytes(data)
        with self._lock:
            self._files[uid] = path
            while len(self._files) > MAX_UPLOADS:
                _, old = self._files.popitem(last=False)
                shutil.rmtree(old.parent, ignore_errors=True)
        return {"id": uid, "name": path.name, "bytes": len(data)}

    def path(self, uid: str) -> Path:
        with self._lock:
            path = self._files.get(uid)
        if path is None:
            raise CrossoverError(f"no upload {shown(uid)} (uploads are kept while the server runs; upload it again)")
        return path

    def scrub(self, text: str) -> str:
        """Messages name an upload by its file name, not by its place on the server."""
        return re.sub(re.escape(str(self.root)) + r"[/\\][0-9a-f]+[/\\]", "", text)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _bad_input(exc: BaseException) -> bool:
    """CrossoverError or pydantic's ValidationError: the input's fault, not the program's."""
    if isinstance(exc, CrossoverError):
        return True
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)


@dataclass
class Job:
    id: str
    state: str = "running"  # running, done, failed
    done: int = 0
    total: int = 0
    load: float | None = None
    started: float = field(default_factory=time.time)
    seconds: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state, "done": self.done, "total": self.total, "load": self.load,
                "seconds": self.seconds if self.seconds is not None else round(time.time() - self.started, 2),
                "result": self.result, "error": self.error}


class Jobs:
    """Simulation sweeps running in threads; polled by id."""

    def __init__(self, scrub: Callable[[str], str] = str,
                 internal: Callable[[BaseException], str] | None = None) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._scrub = scrub
        self._internal = internal  # a bug's line (not bad input): the server's "internal error: ..."

    def start(self, total: int, work: Callable[[Callable[[int, int, float], None]], dict[str, Any]]) -> Job:
        with self._lock:
            if sum(j.state == "running" for j in self._jobs.values()) >= MAX_RUNNING:
                raise CrossoverError(f"{MAX_RUNNING} simulations are already running; wait for one to finish")
            job = Job(secrets.token_hex(8), total=total)
            self._jobs[job.id] = job
            while len(self._jobs) > MAX_JOBS:
                oldest = next((k for k, j in self._jobs.items() if j.state != "running"), None)
                if oldest is None:
                    break
                del self._jobs[oldest]

        def progress(done: int, total: int, load: float) -> None:
            job.done, job.total, job.load = done, total, float(load)

        def run() -> None:
            try:
                job.result = work(progress)
                job.state = "done"
            except Exception as exc:  # reported to the page in one line
                text = str(exc).strip()
                line = text.splitlines()[0] if text else type(exc).__name__
                if self._internal is not None and not _bad_input(exc):
                    line = self._internal(exc)
                job.error = self._scrub(line)
                job.state = "failed"
            job.seconds = round(time.time() - job.started, 2)

        threading.Thread(target=run, name=f"crossover-sim-{job.id}", daemon=True).start()
        return job

    def get(self, jid: str) -> Job:
        with self._lock:
            job = self._jobs.get(jid)
        if job is None:
            raise CrossoverError(f"no simulation job {shown(jid)}")
        return job
