"""Every option is declared once (crossover.api.options, defaults from crossover.defaults): each flag's
help states the default the code uses, and the API function that takes the keyword has that default
(invariant 5, docs/architecture.md)."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import pytest

from crossover import defaults
from crossover.api import options as o
from crossover.cli.parser import build_parser

VERBS = tuple(o.by_verb())


def _api_functions(verb: str):
    from crossover.api import sweep_plan, sweeps, verbs
    from crossover.api.records import SLO, Demand, Pricing, Run, ScenarioOptions, Search, Verification

    # the verb's own function first: its keyword wins over the scenario's of the same name
    return {"predict": (verbs.predict, ScenarioOptions), "simulate": (verbs.simulate, Run, ScenarioOptions),
            "policy": (verbs.policy, ScenarioOptions), "report": (ScenarioOptions,),
            "plan": (verbs.plan, Demand, SLO, Search, Pricing, Verification, ScenarioOptions),
            "whatif": (verbs.whatif, ScenarioOptions), "measured": (sweeps.measured,),
            "calibrate": (sweeps.calibrate_sweep, ScenarioOptions),
            "sweep-plan": (sweep_plan.sweep_plan, sweep_plan.SweepRequest, ScenarioOptions)}[verb]


def _actions(verb: str) -> dict[str, argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[verb]
    parser.format_help()  # adds the verb's pending flags
    return {a.dest: a for a in parser._actions if a.option_strings}


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return tuple(a if isinstance(a, (tuple, list)) else (a,)) == tuple(b if isinstance(b, (tuple, list)) else (b,))
    return a == b


@pytest.mark.parametrize("verb", VERBS)
def test_every_flags_help_states_the_default_the_code_uses(verb):
    actions = _actions(verb)
    for opt in o.by_verb()[verb]:
        action = actions[opt.name]
        assert action.help == opt.help_text and opt.cli_flag in action.option_strings
        if opt.default is not None:
            assert f"default {o.shown(opt.default)}" in action.help, (verb, opt.cli_flag, action.help)
            if opt.passed and opt.kind == "value":
                assert action.default == o.shown(opt.default), (verb, opt.cli_flag)
        elif opt.default_text:
            assert f"default: {opt.default_text}" in action.help
        if not (opt.passed and opt.default is not None and opt.kind == "value"):
            assert action.default in (None, False), (verb, opt.cli_flag, action.default)


@pytest.mark.parametrize("verb", VERBS)
def test_the_api_takes_each_option_with_the_same_default(verb):
    signatures = [inspect.signature(f).parameters for f in _api_functions(verb)]
    checked = 0
    for opt in o.by_verb()[verb]:
        if opt.keyword is None or opt.kind == "switch":
            continue
        for params in signatures:
            if opt.keyword in params:
                api_default = params[opt.keyword].default
                if opt.passed and opt.default is not None:
                    assert _same(api_default, opt.default), (verb, opt.name, api_default, opt.default)
                else:  # the library decides: None there, or the same value
                    assert api_default is None or api_default is inspect.Parameter.empty or _same(
                        api_default, opt.default), (verb, opt.name, api_default)
                checked += 1
                break
    assert checked >= 3, verb


def test_the_drifted_match_rate_help_now_says_what_the_scenario_uses():
    """--match-rate said "default 1" while an n-gram scenario used 0.55."""
    import crossover

    action = _actions("predict")["match_rate"]
    assert f"default {defaults.DEFAULT_NGRAM_MATCH_RATE:g}" in action.help
    sc = crossover.scenario(model="llama-3.1-8b", method="ngram", k=4)
    assert sc.speculation.acceptance.match_rate == defaults.DEFAULT_NGRAM_MATCH_RATE


def test_no_flag_default_is_written_in_the_parser():
    """The parser generates its flags: no literal default or help of a verb's flag is left in it."""
    src = (Path(o.__file__).parent.parent / "cli" / "parser.py").read_text()
    assert not re.search(r"add_argument\(\s*\"--", src), "a flag declared by hand in cli/parser.py"
    assert "default=" not in src.replace('kw["default"]', "")


def test_defaults_are_declared_once_in_the_library():
    """Each default of crossover.defaults is bound to its name in that module only."""
    pkg = Path(o.__file__).parent.parent
    names = [n for n in vars(defaults) if n.isupper()]
    for path in pkg.rglob("*.py"):
        if path.name == "defaults.py":
            continue
        text = path.read_text()
        for name in names:
            assert not re.search(rf"^\s*{name}\s*[:=]", text, flags=re.M), f"{name} bound again in {path}"
