"""crossover.plan takes typed records (demand, SLO, search, pricing, verification, speculation), or
mappings of their fields, instead of 34 keywords; the CLI builds the same records from its flags."""

from __future__ import annotations

import json

import pytest

import crossover
from crossover.api.records import SLO, Demand, Pricing, Search, Verification
from crossover.cli import main
from crossover.errors import InputError

FAST = dict(search=Search(hardware=("h100-sxm",), tp=(1, 2)), verification=Verification(verify=0))


def test_records_and_mappings_plan_the_same():
    a = crossover.plan("llama-3.1-8b", "sharegpt", Demand(peak_rps=20), SLO(tpot_ms=30), **FAST,
                       speculation={"method": "eagle", "k": 3})
    b = crossover.plan("llama-3.1-8b", "sharegpt", {"peak_rps": 20}, {"tpot_ms": 30},
                       search={"hardware": "h100-sxm", "tp": "1,2"}, verification={"verify": 0},
                       speculation={"method": "eagle", "k": 3})
    assert a.to_dict() == b.to_dict() and a.recommendation


def test_the_cli_plans_what_the_api_plans(capsys):
    res = crossover.plan("llama-3.1-8b", "sharegpt", Demand(peak_rps=20), SLO(tpot_ms=30, p99_ttft_ms=2000),
                         **FAST, pricing=Pricing(price={"h100-sxm": 2.0}))
    assert main(["plan", "--model", "llama-3.1-8b", "--workload", "sharegpt", "--peak-rps", "20", "--slo-tpot-ms",
                 "30", "--slo-p99-ttft-ms", "2000", "--hardware", "h100-sxm", "--tp", "1,2", "--verify", "0",
                 "--price", "h100-sxm=2", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(res.to_dict()))


def test_unknown_fields_and_wrong_types_are_one_input_error():
    with pytest.raises(InputError, match="slo: unknown field 'tpot'") as info:
        crossover.plan("llama-3.1-8b", "sharegpt", {"peak_rps": 5}, {"tpot": 40})
    assert info.value.parameter == "slo"
    with pytest.raises(InputError, match="demand must be a Demand or a mapping"):
        crossover.plan("llama-3.1-8b", "sharegpt", 5, {"tpot_ms": 40})


def test_no_public_api_function_takes_more_than_ten_parameters():
    """Long keyword lists are records (api/records.py): the verbs, crossover.scenario and its helpers."""
    import ast
    from pathlib import Path

    api = Path(crossover.__file__).parent / "api"
    long = []
    for path in api.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                if n > 10:
                    long.append(f"{path.name}:{node.name} ({n})")
    assert not long, long
