"""Specs: accelerators, models and deployments, validated with pydantic and loaded by name or path."""

from .deployment import Deployment, Efficiency
from .hardware import Hardware
from .loader import available, load_hardware, load_model
from .model import MLA, Model, MoE, SlidingWindow

__all__ = [
    "Deployment", "Efficiency", "Hardware", "MLA", "Model", "MoE", "SlidingWindow",
    "available", "load_hardware", "load_model",
]
