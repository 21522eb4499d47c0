"""Speed of the serving simulator: a 10-level x 2-arm concurrency sweep, 1,000 requests per level.

Run: python benchmarks/bench_simulate.py   (goal: <= 3 s on one core; prints the median of 3 runs)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from crossover.curves import Scenario
    from crossover.serving.sweep import sweep
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.speculation import Acceptance, Speculation
    from crossover.workload import load_workload

    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    workload, base = load_workload("sharegpt")
    p, o = workload.means(base=base)
    sc = Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7)), p + o / 2, p, o)
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]
    times = []
    for seed in range(3):
        t0 = time.perf_counter()
        res = sweep(sc, workload, "concurrency", levels, num_prompts=1000, seed=seed, base=base)
        times.append(time.perf_counter() - t0)
    print(f"10 levels x 2 arms x 1000 requests (sharegpt, 8B on H100, EAGLE k=3): median {statistics.median(times):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in times)}; goal <= 3 s)")
    print("speedup per level:", ", ".join(f"{lv.value:g}: {r:.2f}" for lv, r in zip(res.levels, res.ratios)))


if __name__ == "__main__":
    main()
