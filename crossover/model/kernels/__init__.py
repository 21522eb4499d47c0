"""Kernel-level pricing: aiconfigurator-core's measured tables as a cost mode (mode.py over tables.py)
and single kernel calls priced from their shape (formulas.py), whose fitted parameters the roofline
reads."""
