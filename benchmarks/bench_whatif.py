"""Speed of what-if grids: 10^6 cells per axis pair (goal <= 1 s). Prints the median of 3 runs."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from crossover.model.scenario import Scenario
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation
    import numpy as np

    from crossover.analysis.whatif import grid, parse_axis

    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("rtx-4090"), tp=1)
    sc = Scenario(dep, Speculation("eagle", 3, Acceptance.rate(0.6)), 512)
    cases = {
        "batch x acceptance (1000 x 1000)": ("batch=1..512", 1000, "acceptance=0.3..0.95", 1000),
        "batch x context (1000 x 1000)": ("batch=1..512", 1000, "context=128..32768", 1000),
        "batch x k (125000 x 8)": ("batch=1..512", 125000, "k=1..8", 8),
    }
    for name, (xa, nx, ya, ny) in cases.items():
        # the library's grid over any number of points (the CLI's --points stops at 1000 per axis)
        x_axis, xs = parse_axis(xa, min(nx, 1000))
        if nx > 1000:
            xs = list(np.geomspace(1, 512, nx))
        y_axis, ys = parse_axis(ya, ny)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            g = grid(sc, x_axis, xs, y_axis, ys)
            times.append(time.perf_counter() - t0)
        print(f"{name}: {g.speedup.size:,} cells, median {statistics.median(times):.3f} s (goal <= 1 s)")


if __name__ == "__main__":
    main()
