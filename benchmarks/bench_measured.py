"""How `crossover measured` scales (issue 12 item 20): time for a sweep of many levels, with and
without the model beside it, and peak memory against the size of a large CSV.

    python benchmarks/bench_measured.py [--levels 10000] [--mb 200] [--repeats 3]

Every file is generated under a temporary directory (removed at the end); nothing large is kept.
Goals: 10,000 levels <= 1 s (with and without --model), peak RSS <= 3 x the file size.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEADER = "arm,concurrency,output_throughput,median_tpot_ms,p99_tpot_ms,median_ttft_ms,mean_e2el_ms,acceptance_length\n"


def rows(levels: int):
    """Both arms at `levels` concurrency levels 1..levels, a crossover near level 100."""
    for c in range(1, levels + 1):
        off = 140.0 * c / (1 + c / 400)
        on = 290.0 * c / (1 + c / 60)
        tpot_off, tpot_on = 1000.0 * c / off, 1000.0 * c * 2.5 / on
        yield f"off,{c},{off:.3f},{tpot_off:.4f},{1.2 * tpot_off:.4f},{20 + c / 10:.3f},{200 * tpot_off:.3f},\n"
        yield f"on,{c},{on:.3f},{tpot_on:.4f},{1.3 * tpot_on:.4f},{22 + c / 9:.3f},{200 * tpot_on:.3f},2.5\n"


def write_levels(path: Path, levels: int) -> None:
    with path.open("w") as f:
        f.write(HEADER)
        f.writelines(rows(levels))


def write_mb(path: Path, mb: float) -> None:
    """About `mb` MB of rows: levels repeat with distinct loads (fractional concurrency)."""
    target = int(mb * 1e6)
    with path.open("w") as f:
        f.write(HEADER)
        size, c = len(HEADER), 0
        while size < target:
            c += 1
            chunk = "".join(r.replace(f",{c},", f",{c}.5,", 1) for r in rows_at(c))
            f.write(chunk)
            size += len(chunk)


def rows_at(c: int):
    off = 140.0 * c / (1 + c / 400)
    on = 290.0 * c / (1 + c / 60)
    tpot_off, tpot_on = 1000.0 * c / off, 1000.0 * c * 2.5 / on
    yield f"off,{c},{off:.3f},{tpot_off:.4f},{1.2 * tpot_off:.4f},{20 + c / 10:.3f},{200 * tpot_off:.3f},\n"
    yield f"on,{c},{on:.3f},{tpot_on:.4f},{1.3 * tpot_on:.4f},{22 + c / 9:.3f},{200 * tpot_on:.3f},2.5\n"


def time_in_process(path: Path, repeats: int, **kw) -> float:
    """Median seconds of crossover.measured(files=[path], ...) in this process."""
    import crossover

    crossover.measured(files=[str(path)], **kw)  # warm: imports, compiled op lists
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        crossover.measured(files=[str(path)], **kw)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def peak_rss_of_cli(path: Path) -> tuple[float, float, int]:
    """(peak RSS in bytes, wall seconds, exit status) of `crossover measured --files PATH --json` in a child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "crossover", "measured", "--files", str(path), "--json"],
                       cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if r.returncode != 0:
        print(r.stderr.strip(), file=sys.stderr)
    # ru_maxrss of children is the largest child so far (KiB on Linux); the first child here is the largest
    return max(peak, before) * 1024.0, wall, r.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=10_000)
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        sweep = d / "sweep.csv"
        write_levels(sweep, args.levels)
        plain = time_in_process(sweep, args.repeats)
        model = time_in_process(sweep, args.repeats, model="llama-3.1-8b", hardware="h100-sxm", tp=1, k=3)
        print(f"measured, {args.levels} levels x 2 arms: {plain:.3f} s; with --model: {model:.3f} s (median of "
              f"{args.repeats}; goal <= 1 s)")
        if args.mb > 0:
            big = d / "big.csv"
            write_mb(big, args.mb)
            size = big.stat().st_size
            peak, wall, rc = peak_rss_of_cli(big)
            print(f"measured --files {size / 1e6:.0f} MB CSV: exit {rc}, {wall:.1f} s, peak RSS {peak / 1e6:.0f} MB "
                  f"= {peak / size:.2f} x the file (goal <= 3 x)")


if __name__ == "__main__":
    main()
