"""Text formatting (crossover/reporting): what a table's header says is what was given."""

from __future__ import annotations

import crossover


def test_the_policy_header_names_tau_as_tau():
    """`policy --tau 2.5` said "acceptance 2.5" (a tau is no acceptance rate)."""
    head = lambda **kw: crossover.policy(model="llama-3.1-8b", hardware="h100-sxm", **kw).to_text().splitlines()[0]
    assert ", tau 2.5, context 2048" in head(tau=2.5)
    assert ", acceptance 0.7, context 2048" in head(acceptance=0.7)
    assert ", acceptance per position 0.8,0.6,0.4, context" in head(per_position=[0.8, 0.6, 0.4], k=3, k_max=3)


def test_predict_and_policy_say_the_acceptance_the_same_way():
    pred = crossover.predict(model="llama-3.1-8b", hardware="h100-sxm", tau=2.5, batches=[1, 8]).to_text()
    assert ", tau 2.5 -> tau" in pred


def test_the_api_keeps_numbers_as_computed_and_json_rounds_them():
    """Rounding is formatting: policy's adaptive and tree sections hold the computed floats; to_dict
    (--json) rounds them as it always did."""
    res = crossover.policy(model="llama-3.1-8b", hardware="h100-sxm", adaptive=True, tree_nodes=6, k_max=4,
                           batch_max=64)
    raw, shown = res.adaptive["tokens_per_s"], res.to_dict()["adaptive"]["tokens_per_s"]
    assert shown == [round(x, 2) for x in raw] and any(x != round(x, 2) for x in raw)
    row, shown_row = res.trees["schedule"][0], res.to_dict()["trees"]["schedule"][0]
    assert shown_row["tau"] == round(row["tau"], 4) and shown_row["tokens_per_s"] == round(row["tokens_per_s"], 2)
    assert row["tokens_per_s"] != shown_row["tokens_per_s"]
