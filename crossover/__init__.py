"""crossover: predict where speculative decoding stops paying off (a roofline simulator)."""

__version__ = "0.1.0"
