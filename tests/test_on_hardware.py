"""A deployment moved to another GPU (Deployment.on_hardware, the what-if hardware axis) is the deployment
built there: the new GPU's distilled efficiency (not the first one's), its engine capture limit (SGLang
sizes it from the GPU's memory) and its MLA backend's graphs (Triton MLA on MI300X captures no full ones);
what the user set stays."""

from __future__ import annotations

import numpy as np
import pytest

import crossover
from crossover.specs import load_hardware


@pytest.mark.parametrize("kw, to", [
    (dict(model="llama-3.1-8b", hardware="h100-sxm"), "a100-80gb-sxm"),
    (dict(model="llama-3.1-8b", hardware="h100-sxm", tp=2), "rtx-4090"),  # a GPU without distilled parameters
    (dict(model="llama-3.1-8b", hardware="l40s", engine="sglang"), "h100-sxm"),
    (dict(model="deepseek-v3", hardware="h200", tp=8, method="mtp", k=1, weight_dtype="fp8"), "mi300x"),
    (dict(model="deepseek-v3", hardware="mi300x", tp=8, method="mtp", k=1, weight_dtype="fp8"), "h200"),
])
def test_a_deployment_moved_to_another_gpu_is_the_one_built_there(kw, to):
    moved = crossover.scenario(**kw).deployment.on_hardware(load_hardware(to))
    built = crossover.scenario(**{**kw, "hardware": to}).deployment
    assert moved == built
    assert moved.efficiency.distilled_fields == built.efficiency.distilled_fields


def test_the_distilled_values_are_the_new_gpus_and_the_users_stay():
    h100 = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", bandwidth_fraction=0.6).deployment
    assert "bandwidth_fraction" not in h100.efficiency.distilled_fields
    a100 = h100.on_hardware(load_hardware("a100-80gb-sxm"))
    fresh = crossover.scenario(model="llama-3.1-8b", hardware="a100-80gb-sxm").deployment
    assert a100.efficiency.bandwidth_fraction == 0.6  # the user's
    assert a100.efficiency.flops_fraction == fresh.efficiency.flops_fraction != h100.efficiency.flops_fraction
    sg = crossover.scenario(model="llama-3.1-8b", hardware="l40s", engine="sglang").deployment
    assert (sg.engine.graph_capture_limit, sg.on_hardware(load_hardware("h100-sxm")).engine.graph_capture_limit) == (32, 256)
    mla = crossover.scenario(model="deepseek-v3", hardware="mi300x", tp=8, method="mtp", k=1, weight_dtype="fp8")
    assert not mla.deployment.engine.full_graphs  # Triton MLA there
    assert mla.deployment.on_hardware(load_hardware("h200")).engine.full_graphs
    piecewise = crossover.scenario(model="deepseek-v3", hardware="mi300x", tp=8, method="mtp", k=1,
                                   weight_dtype="fp8", cuda_graphs="piecewise").deployment
    assert not piecewise.on_hardware(load_hardware("h200")).engine.full_graphs  # the user's mode stays


def test_the_whatif_hardware_axis_prices_each_gpu_as_built_there():
    """Each column of a hardware axis is the speedup of the scenario built on that GPU (before, every GPU
    took the first one's distilled efficiency)."""
    kw = dict(model="llama-3.1-8b", method="eagle", k=3, acceptance=0.7)
    axis = crossover.whatif("batch=1..256", "hardware=h100-sxm,a100-80gb-sxm,l40s", points=5,
                            scenario=crossover.scenario(hardware="h100-sxm", **kw)).grid
    for row, hw in enumerate(("h100-sxm", "a100-80gb-sxm", "l40s")):
        one = crossover.whatif("batch=1..256", "k=3..4", points=5, scenario=crossover.scenario(hardware=hw, **kw)).grid
        np.testing.assert_allclose(axis.speedup[row], one.speedup[0], rtol=1e-12)
