"""A measured sweep beside the model: latency crossings and the prediction at the measured levels
(compare), and the engine behaviour that explains where they part (engine_effects)."""
