"""The `crossover` command: predict, simulate, policy, whatif, plan, report, measured, calibrate,
hardware, models. A leaf: nothing in the library imports it."""

from typing import Any

from .common import parse_list
from .main import main
from .parser import build_parser

__all__ = ["build_parser", "main", "parse_list", "scenario_from_args", "speculation_from_args"]


def __getattr__(name: str) -> Any:
    """scenario_from_args and speculation_from_args, imported on use (they load the model stack)."""
    if name in ("scenario_from_args", "speculation_from_args"):
        from . import scenario

        return getattr(scenario, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
