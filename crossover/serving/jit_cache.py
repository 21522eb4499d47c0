"""Keep numba's on-disk cache of the simulator's loop true to its sources. numba keys a cached
function by its own file's timestamp only, but `loop.run` inlines functions of records.py, routing.py
and model/roofline.py: after an edit to one of those (an editable install, a checkout moved to another
commit) it would load the old compiled loop and simulate the old semantics silently. Before the first
compile, a digest of all four sources is compared with the one stored beside the cache; where they
differ the cache files of those modules are removed and numba compiles afresh."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# the modules whose compiled functions end up in loop.run, by (directory, file stem)
SOURCES = ((_HERE, "loop"), (_HERE, "records"), (_HERE, "routing"), (_HERE.parent / "model", "roofline"))
STAMP = "crossover-loop-sources.sha1"


def refresh() -> None:
    """Remove the cached compiled loop where its sources changed since it was compiled (best effort:
    a read-only install or NUMBA_CACHE_DIR elsewhere is left to numba)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    try:
        digest = hashlib.sha1(b"".join((d / f"{stem}.py").read_bytes() for d, stem in SOURCES)).hexdigest()
        stamp = _HERE / "__pycache__" / STAMP
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for d, stem in SOURCES:
            for f in (d / "__pycache__").glob(f"{stem}.*.nb[ic]"):
                f.unlink()
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        pass
