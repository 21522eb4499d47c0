"""The `crossover` command: predict, simulate, policy, whatif, plan, report, measured, calibrate,
hardware, models. A leaf: nothing in the library imports it."""

from .common import parse_list
from .main import main
from .parser import build_parser
from .scenario import scenario_from_args, speculation_from_args

__all__ = ["build_parser", "main", "parse_list", "scenario_from_args", "speculation_from_args"]
