"""The GB300 and H20 hardware specs (issue 21, item 2): the figures hardware/gb300.yaml and
hardware/h20.yaml carry, computed by hand into SI units; every figure sourced (UNVERIFIED ones
named as such); the NVL72 domain of GB300 against H20's 8-GPU board; the CLI runs on both; and a
batch-1 decode step on each is no faster than streaming its weights at peak bandwidth."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, run_cli

from crossover.errors import CrossoverError
from crossover.model.step import step_time
from crossover.specs import Deployment, Efficiency, load_hardware, load_model

SOL = Efficiency.speed_of_light()

# Hand-written from the YAML files, in SI units (1 GB/s = 1e9 B/s, 1 TFLOP/s = 1e12 FLOP/s).
H20 = {"memory_bytes": 96e9, "bandwidth_bytes_s": 4.0e12, "bf16": 148e12, "fp8": 296e12, "int8": 296e12,
       "interconnect_bytes_s": 450e9, "node_size": 8}
GB300 = {"memory_bytes": 288e9, "bandwidth_bytes_s": 8.0e12, "bf16": 2.5e15, "fp8": 5.0e15, "fp4": 15.0e15,
         "interconnect_bytes_s": 900e9, "node_size": 72}

# Weights streamed per decode step (the input embedding is looked up, not streamed; untied LM head):
# layers x (QKV + O + gate/up/down) + vocab x hidden.
L31_8B_PARAMS = 32 * (4096 * (32 + 2 * 8) * 128 + 32 * 128 * 4096 + 3 * 4096 * 14336) + 128256 * 4096
L3_70B_PARAMS = 80 * (8192 * (64 + 2 * 8) * 128 + 64 * 128 * 8192 + 3 * 8192 * 28672) + 128256 * 8192


def test_hand_counted_weight_params():
    assert L31_8B_PARAMS == 7_504_658_432
    assert L3_70B_PARAMS == 69_501_714_432


@pytest.mark.parametrize("name, want", [("h20", H20), ("gb300", GB300)])
def test_new_hardware_loads_with_hand_computed_figures(name, want):
    hw = load_hardware(name)
    assert hw.name == name and hw.vendor == "nvidia"
    assert hw.memory_bytes == pytest.approx(want["memory_bytes"], rel=1e-12)
    assert hw.bandwidth_bytes_s == pytest.approx(want["bandwidth_bytes_s"], rel=1e-12)
    assert hw.interconnect_bytes_s == pytest.approx(want["interconnect_bytes_s"], rel=1e-12)
    assert hw.node_size == want["node_size"]
    assert not hw.is_pcie
    for dtype in ("bf16", "fp8", "int8", "fp4"):
        if dtype in want:
            assert hw.peak_flops(dtype) == pytest.approx(want[dtype], rel=1e-12), dtype
            assert hw.compute_rate_dtype(dtype) == dtype
        else:  # no dense rate in the file: weight-only execution on bf16, and an explicit rate request fails
            assert hw.compute_rate_dtype(dtype) == "bf16"
            with pytest.raises(CrossoverError, match=f"no dense {dtype}"):
                hw.peak_flops(dtype)


def test_h20_is_hopper_bandwidth_with_a_fraction_of_its_compute():
    h20, h100, h200 = (load_hardware(n) for n in ("h20", "h100-sxm", "h200"))
    assert h20.peak_flops("bf16") / h100.peak_flops("bf16") == pytest.approx(148 / 989)  # ~15%
    assert h20.peak_flops("fp8") == 2 * h20.peak_flops("bf16")
    assert h100.bandwidth_bytes_s < h20.bandwidth_bytes_s < h200.bandwidth_bytes_s
    # ridge point (FLOP per byte at which a GEMM turns compute-bound): 148e12 / 4e12 = 37
    assert h20.peak_flops("bf16") / h20.bandwidth_bytes_s == pytest.approx(37.0)
    assert h20.interconnect_gb_s == h100.interconnect_gb_s == 450


def test_gb300_is_gb200_with_more_memory_and_fp4():
    gb300, gb200 = load_hardware("gb300"), load_hardware("gb200")
    assert gb300.bandwidth_bytes_s == gb200.bandwidth_bytes_s
    assert gb300.peak_flops("bf16") == gb200.peak_flops("bf16") and gb300.peak_flops("fp8") == gb200.peak_flops("fp8")
    assert gb300.peak_flops("fp4") == pytest.approx(1.5 * gb200.peak_flops("fp4"))
    assert gb300.memory_gb > gb200.memory_gb
    assert gb300.node_size == gb200.node_size == 72 and gb300.interconnect == gb200.interconnect


@pytest.mark.parametrize("name", ["h20", "gb300"])
def test_new_hardware_every_figure_has_a_source_and_unverified_ones_say_so(name):
    raw = yaml.safe_load((REPO / "hardware" / f"{name}.yaml").read_text())
    figures = [k for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert "memory_bandwidth_gb_s" in figures and "bf16_dense_tflops" in figures
    for key in figures:
        assert raw["sources"].get(key, "").strip(), f"{name}: {key} without a source"
    assert raw["unverified"], f"{name}: hardware_facts.md has no {name} entry, so its figures are unverified"
    for key in raw["unverified"]:
        assert key in figures, f"{name}: unverified {key} is not a figure in the file"
        assert raw["sources"][key].startswith("UNVERIFIED:"), f"{name}: {key} listed unverified, source does not say so"
    for key in figures:
        if raw["sources"][key].startswith("UNVERIFIED"):
            assert key in raw["unverified"], f"{name}: {key} marked UNVERIFIED in sources but not in unverified"


@pytest.mark.parametrize("model, hardware", [("llama-3.1-8b", "h20"), ("llama-3-70b", "gb300")])
def test_predict_runs_on_the_new_hardware(model, hardware):
    r = run_cli("predict", "--model", model, "--hardware", hardware, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"]["hardware"] == hardware and d["inputs"]["model"] == model
    assert d["points"] and all(p["step_ms_off"] > 0 for p in d["points"])
    assert d["points"][0]["fits_off"]  # 15 GB on 96 GB, 139 GB on 288 GB


def test_tp16_fits_the_gb300_nvl72_domain_but_not_an_h20_board():
    ok = run_cli("predict", "--model", "llama-3-70b", "--hardware", "gb300", "--tp", "16", "--batch", "1", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["inputs"]["tp"] == 16
    bad = run_cli("predict", "--model", "llama-3-70b", "--hardware", "h20", "--tp", "16", "--batch", "1")
    assert bad.returncode == 2
    assert "8 GPUs" in bad.stderr and "\n" not in bad.stderr.strip()


@pytest.mark.parametrize("model, hardware, params, bandwidth", [
    ("llama-3.1-8b", "h20", L31_8B_PARAMS, 4.0e12),
    ("llama-3-70b", "gb300", L3_70B_PARAMS, 8.0e12),
])
def test_batch1_decode_on_new_hardware_is_at_least_weight_bytes_over_bandwidth(model, hardware, params, bandwidth):
    light = params * 2 / bandwidth  # bf16 bytes / peak bandwidth: 3.752 ms on h20, 17.38 ms on gb300
    m, hw = load_model(model), load_hardware(hardware)
    sol = float(step_time(Deployment(model=m, hardware=hw, efficiency=SOL), [1], 1, 0).total[0])
    assert sol >= light * (1 - 1e-12)
    assert sol == pytest.approx(light, rel=2e-3)  # activations and the 1-token KV write are < 0.2%
    real = float(step_time(Deployment(model=m, hardware=hw), [1], 1, 0).total[0])
    assert real > sol  # achieved fractions below 1 and per-step overheads only add time


def test_h20_batch1_decode_speed_of_light_by_hand():
    t = float(step_time(Deployment(model=load_model("llama-3.1-8b"), hardware=load_hardware("h20"), efficiency=SOL),
                        [1], 1, 0).total[0])
    assert 3.75e-3 < t < 3.76e-3  # 7,504,658,432 x 2 B / 4.0e12 B/s = 3.7523 ms
