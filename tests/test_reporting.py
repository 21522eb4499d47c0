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
