"""Capacity planning: demand from a peak or a trace (traffic), a replica's capacity under SLOs per
speculation arm (fleet), rental and ownership costs (pricing) and the search over hardware, TP, dtypes
and arms (plan)."""
