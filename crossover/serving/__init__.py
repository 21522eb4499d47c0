"""Serving: a discrete-event simulation of a continuous-batching engine, and load sweeps."""
