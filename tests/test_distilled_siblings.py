"""A GPU without kernel tables of its own takes the distilled block of the library GPU with the same chip
(Hardware.distilled_from), so that two parts of one chip price on the same footing: before, the A100 SXM
(distilled, 59 us of kernel floors per layer) stepped slower than the A100 PCIe (generic 15 us) although it
has more bandwidth, and the L40S slower than the L40."""

from __future__ import annotations

import pytest

import crossover
from crossover.errors import CrossoverError
from crossover.specs import load_hardware

from conftest import run_cli

SIBLINGS = {"a100-80gb-pcie": "a100-80gb-sxm", "a100-40gb-sxm": "a100-80gb-sxm", "l40": "l40s",
            "h100-nvl": "h100-sxm", "gb300": "b300"}


@pytest.mark.parametrize("gpu, sibling", sorted(SIBLINGS.items()))
def test_the_borrowed_block_is_the_siblings_and_says_so(gpu, sibling):
    hw, sib = load_hardware(gpu), load_hardware(sibling)
    assert hw.distilled is not None and hw.distilled.source.startswith(f"borrowed from {sibling} (")
    assert hw.distilled.gemm_bf16 == sib.distilled.gemm_bf16
    assert hw.distilled.decode_attention == sib.distilled.decode_attention
    # the all-reduce fit is the measured box's links: kept only over the same NVLink links, never over PCIe
    # (each server's switches and P2P paths decide it)
    same_link = (hw.interconnect, hw.interconnect_gb_s) == (sib.interconnect, sib.interconnect_gb_s)
    kept = same_link and not hw.is_pcie
    assert (hw.distilled.all_reduce == sib.distilled.all_reduce) if kept else hw.distilled.all_reduce is None
    assert gpu != "l40" or (same_link and hw.distilled.all_reduce is None)  # same PCIe link class, not borrowed


@pytest.mark.parametrize("slow, fast", [("a100-80gb-pcie", "a100-80gb-sxm"), ("a100-40gb-sxm", "a100-80gb-sxm"),
                                        ("l40", "l40s")])
@pytest.mark.parametrize("method", ["eagle", "ngram"])
def test_a_part_with_no_less_of_anything_never_steps_slower(slow, fast, method):
    """The faster part of one chip has at least the bandwidth and FLOP/s of the other: every step off and
    on, at every batch, is no slower on it."""
    a, b = load_hardware(slow), load_hardware(fast)
    assert b.memory_bandwidth_gb_s >= a.memory_bandwidth_gb_s and b.bf16_dense_tflops >= a.bf16_dense_tflops
    kw = dict(model="llama-3.1-8b", method=method)
    batches = [1, 4, 16, 64, 128]
    ps = {h: crossover.predict(crossover.scenario(hardware=h, **kw), batches=batches).prediction.curves for h in (slow, fast)}
    assert (ps[fast].step_off <= ps[slow].step_off * (1 + 1e-12)).all()
    assert (ps[fast].step_on <= ps[slow].step_on * (1 + 1e-12)).all()


def test_inputs_name_the_fractions_in_effect_and_where_the_distilled_values_come_from():
    pcie = crossover.inputs(crossover.scenario(model="llama-3.1-8b", hardware="a100-80gb-pcie"))["efficiency"]
    sxm = load_hardware("a100-80gb-sxm").distilled
    assert pcie["bandwidth_fraction"] == pytest.approx(sxm.gemm_bf16.bandwidth_fraction, rel=1e-12)
    assert pcie["kv_bandwidth_fraction"] == pytest.approx(sxm.decode_attention.bandwidth_fraction, rel=1e-12)
    assert pcie["distilled_source"].startswith("borrowed from a100-80gb-sxm")
    # a GPU with no kernel tables and no sibling: the defaults in effect, no distilled source
    plain = crossover.inputs(crossover.scenario(model="llama-3.1-8b", hardware="h100-pcie"))["efficiency"]
    assert plain["bandwidth_fraction"] == pytest.approx(0.8) and plain["flops_fraction"] == pytest.approx(0.75)
    assert plain["distilled_source"] is None
    off = crossover.inputs(crossover.scenario(model="llama-3.1-8b", hardware="a100-80gb-pcie", distilled=False))
    assert off["efficiency"]["distilled_source"] is None


def test_a_sibling_without_a_block_or_itself_is_one_line(tmp_path):
    base = (load_hardware("l40").model_dump(mode="json", exclude_none=True))
    import yaml

    for sib, needle in (("h100-pcie", "has no distilled block to borrow"), ("mine", "names this GPU itself")):
        spec = {**{k: v for k, v in base.items() if k != "distilled"}, "name": "mine", "distilled_from": sib}
        path = tmp_path / f"mine-{sib}.yaml"
        path.write_text(yaml.safe_dump(spec))
        with pytest.raises(CrossoverError, match=needle):
            load_hardware(str(path))
        r = run_cli("predict", "--model", "llama-3.1-8b", "--hardware", str(path))
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
