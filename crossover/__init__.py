"""crossover: predict where speculative decoding stops paying off (a roofline simulator).

    import crossover
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3, acceptance=0.7)
    print(crossover.predict(sc).crossover_batch)
"""

from .api import calibrate, measured, plan, policy, predict, simulate, whatif
from .build import inputs, scenario
from .errors import CrossoverError

__version__ = "0.1.0"

__all__ = ["CrossoverError", "calibrate", "inputs", "measured", "plan", "policy", "predict", "scenario", "simulate", "whatif"]
