"""crossover: predict where speculative decoding stops paying off (a roofline simulator).

    import crossover
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3, acceptance=0.7)
    print(crossover.predict(sc).crossover_batch)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import CrossoverError

if TYPE_CHECKING:  # the API, imported on first use (a command imports only what its verb needs)
    from .api.sweeps import calibrate_sweep as calibrate, measured
    from .api.verbs import plan, policy, predict, report, simulate, whatif
    from .api.build import scenario
    from .api.inputs import inputs
    from .api.sweep_plan import sweep_plan

__version__ = "0.1.0"

__all__ = ["CrossoverError", "calibrate", "inputs", "measured", "plan", "policy", "predict", "report", "scenario",
           "simulate", "sweep_plan", "whatif"]

# name -> (module, attribute): measured and calibrate come from crossover.api.sweeps, so reading a sweep
# does not import the simulator and the planner. No module of the package shares a verb's name.
_LAZY = {"calibrate": ("api.sweeps", "calibrate_sweep"), "measured": ("api.sweeps", "measured"),
         "plan": ("api.verbs", "plan"), "policy": ("api.verbs", "policy"), "predict": ("api.verbs", "predict"),
         "simulate": ("api.verbs", "simulate"), "whatif": ("api.verbs", "whatif"), "report": ("api.verbs", "report"),
         "inputs": ("api.inputs", "inputs"), "scenario": ("api.build", "scenario"),
         "sweep_plan": ("api.sweep_plan", "sweep_plan")}


def __getattr__(name: str) -> Any:
    """The API verbs, imported on first use: `import crossover` stays light, `crossover.predict` works."""
    if name not in _LAZY:
        raise AttributeError(f"module 'crossover' has no attribute {name!r}")
    import importlib

    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(f".{module}", __name__), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
