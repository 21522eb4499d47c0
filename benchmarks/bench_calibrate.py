"""Speed of calibration: a 2-arm, 10-level measured sweep, fit (up to 5 parameters) + 60-draw parametric
bootstrap of the crossover.

Run: python benchmarks/bench_calibrate.py   (goal: <= 2 s; prints the median of 5 runs)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from crossover.analysis.calibration import Observation, calibrate
    from crossover.model.scenario import Scenario
    from crossover.analysis.curves import evaluate
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation

    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), tp=1)
    truth = Scenario(dep.with_efficiency(bandwidth_fraction=0.7, step_overhead_s=2e-3),
                     Speculation("eagle", 3, Acceptance.rate(0.6)), 1088, 1024, 128)
    levels = [1, 2, 4, 8, 16, 32, 64, 96, 128, 192]
    c = evaluate(truth, levels)
    rng = np.random.default_rng(0)
    obs = [Observation(b, float(c.tokens_per_s_off[i]) * float(np.exp(rng.normal(0, 0.03))),
                       float(c.tokens_per_s_on[i]) * float(np.exp(rng.normal(0, 0.03)))) for i, b in enumerate(levels)]
    start = Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.5)), 1088, 1024, 128)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fit = calibrate(start, obs, fit_acceptance=True, bootstrap=60)
        times.append(time.perf_counter() - t0)
    print(f"calibrate 2 arms x 10 levels (up to 5 parameters, 60 bootstrap draws): median {statistics.median(times):.2f} s "
          f"(goal <= 2 s); crossover {fit.crossover:.1f}, interval {fit.crossover_interval}")


if __name__ == "__main__":
    main()
