"""Every accelerator in the library is priced with a source and a date, or marked unknown with the reason."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO

from crossover.errors import CrossoverError
from crossover.specs import load_hardware
from crossover.specs.hardware import Hardware

HARDWARE = sorted((REPO / "hardware").glob("*.yaml"))
PRICE_KEYS = ("price_per_hour_usd", "purchase_usd_per_gpu", "tdp_w")


@pytest.mark.parametrize("path", HARDWARE, ids=lambda p: p.stem)
def test_every_price_key_is_set_with_a_source_or_marked_unknown(path):
    raw = yaml.safe_load(path.read_text())
    hw = load_hardware(path.stem)
    assert hw.prices_as_of, "prices_as_of: the date the figures were read"
    for key in PRICE_KEYS:
        if key == "purchase_usd_per_gpu" and "purchase_usd_per_node" in raw:
            key = "purchase_usd_per_node"
        assert key in raw, f"{path.name}: {key} missing (null with a reason when unknown)"
        source = raw["sources"].get(key, "")
        if raw[key] is None:
            assert source.startswith("unknown:") and len(source) > 30, f"{path.name}: why is {key} unknown?"
        else:
            assert source and not source.startswith("unknown"), f"{path.name}: {key} unsourced"
            if key != "tdp_w":  # a price names its catalog
                assert "[" in source and "read 20" in source, f"{path.name}: {key} without its catalog and date"


def test_a_node_price_is_per_gpu_over_the_node_and_only_one_purchase_price():
    base = load_hardware("h100-sxm").model_dump()
    hw = Hardware(**{**base, "purchase_usd_per_node": 240000.0, "purchase_usd_per_gpu": None})
    assert hw.purchase_price_per_gpu_usd == pytest.approx(240000.0 / 8)
    with pytest.raises(ValueError, match="not both"):
        Hardware(**{**base, "purchase_usd_per_node": 240000.0, "purchase_usd_per_gpu": 30000.0})
    with pytest.raises(ValueError):
        Hardware(**{**base, "prices_as_of": "2026-13-01"})


def test_bad_price_in_a_spec_file_is_one_line(tmp_path):
    raw = yaml.safe_load(HARDWARE[0].read_text())
    raw["price_per_hour_usd"] = -1
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(CrossoverError) as e:
        load_hardware(str(p))
    assert "\n" not in str(e.value)
