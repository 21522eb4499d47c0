"""Speed of the serving simulator (issue 13 item 5): 10 concurrency levels x 2 arms x 1,000 requests
(goal <= 1 s), and the same sweep as `crossover simulate` runs it (each level at least 10 rounds of
its clients: 1,000 requests up to concurrency 90, 2,845 at 256).

Run: python benchmarks/bench_simulate.py [--runs N]   (prints the median of N runs, wall and CPU
seconds, with the load average; the first run, which imports numba and loads the compiled loop, is
reported apart)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LEVELS = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    from crossover.model.scenario import Scenario
    from crossover.serving.sweep import run_level, sweep
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation
    from crossover.specs.workload import load_workload

    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    workload, base = load_workload("sharegpt")
    p, o = workload.means(base=base)
    sc = Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.7)), p + o / 2, p, o)

    def goal(seed: int) -> None:  # exactly 1,000 requests per level, both arms
        for v in LEVELS:
            run_level(sc, workload, "concurrency", v, num_prompts=1000, seed=seed, base=base)

    def timed(fn, seed: int) -> tuple[float, float]:
        w, c = time.perf_counter(), time.process_time()
        fn(seed)
        return time.perf_counter() - w, time.process_time() - c

    first = timed(lambda s: run_level(sc, workload, "concurrency", 4, num_prompts=100, seed=s, base=base), 0)
    print(f"first level (imports numba, loads the compiled loop, fills the step model's caches): {first[0]:.2f} s")
    for name, fn in (("10 levels x 2 arms x 1,000 requests", goal),
                     ("sweep as `crossover simulate` runs it (>= 10 rounds per level)",
                      lambda s: sweep(sc, workload, "concurrency", LEVELS, num_prompts=1000, seed=s, base=base))):
        load = os.getloadavg()[0]
        times = [timed(fn, seed) for seed in range(runs)]
        wall, cpu = statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)
        print(f"{name} (sharegpt, 8B on H100, EAGLE k=3): median {wall:.2f} s wall, {cpu:.2f} s CPU over {runs} runs "
              f"(wall: {', '.join(f'{t[0]:.2f}' for t in times)}); load average {load:.1f} on {os.cpu_count()} cores"
              + ("; goal <= 1 s" if fn is goal else ""))


if __name__ == "__main__":
    main()
