"""Speed of the kernels cost mode: the lazy table load, then a predict curve priced from the tables.

Run: pip install "crossover[kernels]"; python benchmarks/bench_kernels.py
(prints medians; goals: table load <= 1 s, <= 5 ms per curve). A curve is what `predict` prices:
64 batch points off and on, then the crossover search, for Llama-3.1-70B on 4 x H100 SXM with EAGLE
k = 3 at context 2048 (vLLM tables). The same curve in roofline mode is timed beside it.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOAD_SNIPPET = """
import time
t0 = time.perf_counter()
from crossover.kernels import Kernels
from crossover.roofline import compiled_target
from crossover.specs import Deployment, load_hardware, load_model
from crossover.step import uniform
dep = Deployment(model=load_model("llama-3.1-70b"), hardware=load_hardware("h100-sxm"), tp=4)
ops = compiled_target(dep)
t1 = time.perf_counter()
mode = Kernels("vllm", "h100-sxm")
mode.seconds(ops, uniform(ops, 8.0, 1.0, 2048.0))  # first use loads the tables this model needs
print(time.perf_counter() - t1)
"""


def load_seconds(repeats: int = 5) -> float:
    """Median seconds, in a fresh interpreter each time, from building the mode to the first priced forward."""
    times = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", LOAD_SNIPPET], capture_output=True, text=True, check=True,
                             cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
        times.append(float(out.stdout.strip()))
    return statistics.median(times)


def curve_ms(repeats: int = 200) -> dict[str, float]:
    """Median milliseconds of one predict curve (64 batches off and on + the crossover root) per mode."""
    import numpy as np

    from crossover.model.scenario import Scenario
    from crossover.analysis.curves import evaluate, find_crossings
    from crossover.model.kernels.mode import Kernels
    from crossover.model.roofline import compiled_target
    from crossover.specs import Deployment, load_hardware, load_model
    from crossover.model.acceptance import Acceptance
    from crossover.model.speculation import Speculation, compiled_draft
    from crossover.model.step import StepModel

    dep = Deployment(model=load_model("llama-3.1-70b"), hardware=load_hardware("h100-sxm"), tp=4)
    spec = Speculation("eagle", 3, Acceptance.rate(0.7))
    sc = Scenario(dep, spec, 2048)
    batches = np.arange(1, 65) * 8.0
    models = {"roofline": StepModel.of(dep, spec),
              "kernels": StepModel(dep, compiled_target(dep), compiled_draft(spec, dep), Kernels("vllm", "h100-sxm"))}
    out = {}
    for name, model in models.items():
        evaluate(sc, batches, model)  # warm: tables and plans
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            evaluate(sc, batches, model)
            find_crossings(sc, float(batches.max()), model)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times) * 1e3
    return out


def main() -> int:
    from crossover.model.kernels.tables import package_data

    if package_data() is None:
        print('aiconfigurator-core is not installed: pip install "crossover[kernels]"')
        return 1
    ms = curve_ms()
    print(f"table load (fresh interpreter, first priced forward): {load_seconds():.2f} s  (goal <= 1 s)")
    print(f"kernels mode:  {ms['kernels']:.2f} ms per predict curve  (goal <= 5 ms)")
    print(f"roofline mode: {ms['roofline']:.2f} ms per predict curve (same curve, for scale)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
