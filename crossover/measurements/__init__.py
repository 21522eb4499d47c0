"""Measured sweeps (vLLM bench serve JSON, SGLang bench_serving JSONL, CSV) read into one table.

Imports only crossover.errors and the standard library: nothing here knows about the model.
"""

from .acceptance import parse_prometheus, parse_spec_decode_log, read_acceptance
from .readers import read_columns, read_file, read_measurements
from .step_times import StepTime, read_step_times
from .columns import Columns
from .point import MeasuredPoint
from .table import MeasuredTable

__all__ = [
    "Columns",
    "MeasuredPoint",
    "MeasuredTable",
    "parse_prometheus",
    "parse_spec_decode_log",
    "read_acceptance",
    "read_columns",
    "read_file",
    "read_measurements",
    "read_step_times",
    "StepTime",
]
