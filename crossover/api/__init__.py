"""The Python API: the verbs (verbs.py; measured and calibrate in sweeps.py, which never loads the
simulator or the planner), `crossover.scenario` and `crossover.inputs` (build.py) and their typed
results (results.py). `crossover/__init__.py` exports them lazily."""
