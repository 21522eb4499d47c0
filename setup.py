"""Package discovery (everything else is in pyproject.toml): every folder of crossover/, plus the spec
libraries at the top of the repository, shipped inside the package as crossover/_data/<kind>."""

from setuptools import find_packages, setup

DATA = ("hardware", "models", "workloads", "engines", "docs")

setup(packages=find_packages(include=["crossover", "crossover.*"]) + [f"crossover._data.{d}" for d in DATA])
