"""Deprecated location of the step model, kept for one release: import from `crossover.model.step`."""

from .model.step import (  # noqa: F401 - the old names
    COST_MODES, Forward, Mix, Roofline, StepBreakdown, StepModel, prompts, ragged, step_time, uniform)
from .model.breakdown import op_breakdown  # noqa: F401
