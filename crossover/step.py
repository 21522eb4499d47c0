"""Deprecated location of the step model, kept for one release: import from `crossover.model.step`."""

from .model.step import (  # noqa: F401 - the old names
    COST_MODES, Mix, Roofline, StepBreakdown, StepModel, step_time)
from .model.forward import Forward, prompts, ragged, uniform  # noqa: F401
from .model.breakdown import op_breakdown  # noqa: F401
