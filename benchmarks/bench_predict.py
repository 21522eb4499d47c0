"""Speed of predict where users call it: the public API (`crossover.predict` on a reused and on a
freshly built `crossover.scenario`), the internal curve it rests on, and the CLI's cold start beside
the floor under it (a fresh interpreter importing numpy, pydantic and yaml, before any of crossover).

Run: python benchmarks/bench_predict.py   (prints medians; goals, issue 25: public API <= 0.3 ms
reused and <= 0.6 ms fresh, cold start <= 0.25 s)
A full prediction is 64 batch points plus the crossover root, as `crossover predict` does it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def in_process(repeats: int = 300) -> dict[str, float]:
    """Median and p90 milliseconds of predict() over 64 batches, for a crossing and a non-crossing case."""
    import numpy as np

    from crossover.model.scenario import Scenario
    from crossover.analysis.curves import predict
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation

    out = {}
    cases = {
        "default (70B, 4xH100, EAGLE k=3; crosses beyond its memory limit)": (
            Deployment(model=load_model("llama-3.1-70b"), hardware=load_hardware("h100-sxm"), tp=4),
            Speculation("eagle", 3, Acceptance.rate(0.7)), 2048),
        "8B on RTX 4090, EAGLE k=3 (crosses)": (
            Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("rtx-4090"), tp=1),
            Speculation("eagle", 3, Acceptance.rate(0.6)), 512),
    }
    batches = np.arange(1, 65) * 8
    for name, (dep, spec, ctx) in cases.items():
        sc = Scenario(dep, spec, ctx)
        predict(sc, batches)  # warm caches
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            predict(sc, batches)
            times.append(time.perf_counter() - t0)
        times.sort()
        out[name] = (statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3)
        # A new scenario each time: the op lists are compiled again (no plan cache hit).
        times = []
        for _ in range(repeats):
            fresh = Scenario(dep.model_copy(), Speculation(spec.method, spec.k, spec.acceptance), ctx)
            t0 = time.perf_counter()
            predict(fresh, batches)
            times.append(time.perf_counter() - t0)
        times.sort()
        out[name + ", fresh scenario"] = (statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3)
    return out


def public_api(repeats: int = 200) -> dict[str, tuple[float, float]]:
    """Median and p90 milliseconds of what a user of the Python API calls: `crossover.predict` over 64
    batches on a reused `crossover.scenario(...)`, and `crossover.predict(crossover.scenario(...))`
    built fresh each time, the result's to_dict() included (what the CLI and the page print)."""
    import crossover

    kw = dict(model="llama-3-70b", hardware="h100-sxm", tp=4, method="eagle", k=3, acceptance=0.7)
    batches = [8 * i for i in range(1, 65)]
    sc = crossover.scenario(**kw)
    crossover.predict(sc, batches=batches).to_dict()  # warm caches
    out = {}
    for name, call in (("reused scenario", lambda: crossover.predict(sc, batches=batches)),
                       ("fresh scenario", lambda: crossover.predict(crossover.scenario(**kw), batches=batches)),
                       ("reused scenario, with to_dict()", lambda: crossover.predict(sc, batches=batches).to_dict())):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        times.sort()
        out[name] = (statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3)
    return out


def _fresh(argv: list[str], repeats: int, env: dict[str, str]) -> tuple[float, float]:
    """Median and min seconds of a fresh interpreter running `argv` (after one warm-up run)."""
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *argv], cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=env)
        if i:  # the first run writes the bytecode
            times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def cold_start(repeats: int = 9) -> dict[str, tuple[float, float]]:
    """Median and min seconds of `python -m crossover predict --json` in a fresh interpreter, with
    its bytecode cached (in a temporary PYTHONPYCACHEPREFIX, written by a warm-up run) as an installed
    package has it, whatever PYTHONDONTWRITEBYTECODE says in the calling shell; and of the floor under
    it, the same interpreter importing numpy, pydantic and yaml only. The two alternate, so that both
    see the same load."""
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=cache)
        runs: dict[str, list[tuple[float, float]]] = {"crossover predict --json": [], "floor": []}
        for _ in range(3):
            runs["crossover predict --json"].append(_fresh(["-m", "crossover", "predict", "--json"], repeats // 3, env))
            runs["floor"].append(_fresh(["-c", "import numpy, pydantic, yaml"], repeats // 3, env))
    return {k: (statistics.median(m for m, _ in v), min(b for _, b in v)) for k, v in runs.items()}


def main() -> None:
    for name, (med, p90) in in_process().items():
        print(f"internal curve + root (analysis.curves.predict), {name}: median {med:.3f} ms, p90 {p90:.3f} ms")
    for name, (med, p90) in public_api().items():
        goal = {"reused scenario": " (goal <= 0.3 ms)", "fresh scenario": " (goal <= 0.6 ms)"}.get(name, "")
        print(f"public API crossover.predict, 70B on 4xH100, EAGLE k=3, 64 batches, {name}: median {med:.3f} ms, "
              f"p90 {p90:.3f} ms{goal}")
    cold = cold_start()
    (med, best), (fmed, fbest) = cold["crossover predict --json"], cold["floor"]
    print(f"cold start `crossover predict --json`: median {med:.3f} s, best {best:.3f} s (goal <= 0.25 s); "
          f"the floor (a fresh interpreter importing numpy, pydantic and yaml): median {fmed:.3f} s, best "
          f"{fbest:.3f} s; crossover's own share: median {med - fmed:.3f} s")


if __name__ == "__main__":
    main()
