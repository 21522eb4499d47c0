"""crossover: predict where speculative decoding stops paying off (a roofline simulator).

    import crossover
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3, acceptance=0.7)
    print(crossover.predict(sc).crossover_batch)
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from .errors import CrossoverError

if TYPE_CHECKING:  # the API, imported on first use (a command imports only what its verb needs)
    from .api import calibrate, measured, plan, policy, predict, simulate, whatif
    from .build import inputs, scenario

__version__ = "0.1.0"

__all__ = ["CrossoverError", "calibrate", "inputs", "measured", "plan", "policy", "predict", "scenario", "simulate", "whatif"]

# name -> (module, attribute): measured and calibrate come from crossover.measured (what crossover.api
# re-exports), so reading a sweep does not import the simulator and the planner
_LAZY = {"calibrate": ("measured", "calibrate_sweep"), "measured": ("measured", "measured"), "plan": ("api", "plan"),
         "policy": ("api", "policy"), "predict": ("api", "predict"), "simulate": ("api", "simulate"),
         "whatif": ("api", "whatif"), "inputs": ("build", "inputs"), "scenario": ("build", "scenario")}


class _Package(types.ModuleType):
    """`crossover.measured` and `crossover.plan` are API verbs that share their names with modules:
    importing the module must not replace the verb (as the eager `from .api import ...` ensured)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
