"""Speed of a whole capacity plan (issue 13 item 5): Llama-3.1-70B, ShareGPT, 6 accelerators x 4 TP
degrees x 2 weight dtypes x 3 speculation arms (off, on at its best k, routed by load), fleets sized
for 50 req/s at a 50 ms TPOT, priced, and the best 5 simulated at their planned load.

Run: python benchmarks/bench_plan.py [--jobs N]   (goal: <= 5 s; prints the first run, which fills
the step model's caches as a fresh `crossover plan` does, and the median of 3 runs after it)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HARDWARE = ("h100-sxm", "h200", "b200", "a100-80gb-sxm", "l40s", "mi300x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=None, help="simulation processes (default: all cores)")
    ap.add_argument("--runs", type=int, default=3)
    jobs = ap.parse_args().jobs
    runs = ap.parse_args().runs
    import crossover

    def once():
        t0 = time.perf_counter()
        res = crossover.plan("llama-3.1-70b", "sharegpt", {"peak_rps": 50}, {"tpot_ms": 50},
                             search={"hardware": HARDWARE, "tp": (1, 2, 4, 8), "weight_dtype": "bf16,fp8"},
                             verification={"verify": 5, "jobs": jobs})
        return time.perf_counter() - t0, res

    first, res = once()
    times = [once()[0] for _ in range(runs)]
    opts = len(res.plan.options)
    sims = sum(o.simulated is not None for o in res.plan.options)
    print(f"plan 6 GPUs x 4 TP x 2 dtypes x 3 arms ({opts} options, {sims} simulated, jobs "
          f"{jobs or os.cpu_count()}): first {first:.2f} s, median of {runs} after it {statistics.median(times):.2f} s "
          f"(goal <= 5 s)")
    print(res.recommendation)


if __name__ == "__main__":
    main()
