"""What the step model answers: on/off curves and the crossover (curves), crossings between measured or
simulated levels (crossings, pure numbers), the best k by load (policy, engine_config's server text),
draft trees, adaptive verification, two-axis what-ifs, calibration to measured sweeps and the speed of
light (bounds)."""
