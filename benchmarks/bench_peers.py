"""crossover's public predict beside a peer's compiled decode-step call, in one run (issue 25): Llama-3.1-70B
on 4 x H100 SXM, 64 batches (8..512), context 2048.

- crossover: `crossover.predict(scenario, batches=...)`, both arms (speculation off and EAGLE k = 3 on)
  and the crossover root, on a reused scenario.
- aiconfigurator-core (the `kernels` extra installs it; its measured vLLM tables on h100_sxm): one
  arm, `EngineHandle.decode_step_latency(batch, 2048, 2)` at each batch, its engine compiled once.

The two alternate in rounds so both see the same machine load. Run: python benchmarks/bench_peers.py
(skips the peer, saying so, where aiconfigurator-core is not installed).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BATCHES = [8 * i for i in range(1, 65)]


def _ms(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number * 1e3


def main() -> None:
    import crossover

    sc = crossover.scenario(model="llama-3.1-70b", hardware="h100-sxm", tp=4, method="eagle", k=3, acceptance=0.7,
                            context=2048)
    ours = lambda: crossover.predict(sc, batches=BATCHES)  # noqa: E731
    ours()
    peer = None
    try:
        from aiconfigurator_core.sdk.engine import EngineHandle
    except ImportError:
        print("aiconfigurator-core is not installed (pip install \".[kernels]\"): crossover alone")
    else:
        logging.disable(logging.WARNING)  # its table loader's notes on fallback rows
        handle = EngineHandle.compile("meta-llama/Meta-Llama-3.1-70B", "h100_sxm", "vllm", tp_size=4)
        peer = lambda: [handle.decode_step_latency(b, 2048, 2) for b in BATCHES]  # noqa: E731
        peer()
    rounds: dict[str, list[float]] = {"crossover": [], "peer": []}
    for _ in range(15):
        rounds["crossover"].append(_ms(ours, 100))
        if peer is not None:
            rounds["peer"].append(_ms(peer, 5))
    mine = statistics.median(rounds["crossover"])
    print(f"crossover.predict, both arms + crossover, 64 batches: median {mine:.3f} ms (best {min(rounds['crossover']):.3f})")
    if peer is not None:
        theirs = statistics.median(rounds["peer"])
        print(f"aiconfigurator-core decode_step_latency, one arm, 64 batches: median {theirs:.3f} ms "
              f"(best {min(rounds['peer']):.3f}); crossover's two arms in {mine / theirs:.3f} of its one arm's time")


if __name__ == "__main__":
    main()
