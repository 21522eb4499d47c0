"""The argument parser of the `crossover` command, generated from the option records of
`crossover.api.options` (each flag's default and help are declared there once). Each verb's flags are
added when that verb is parsed or its help is shown (`Parser(flags=...)`): a command builds only its
own, and building them imports no model."""

from __future__ import annotations

import argparse
from typing import Sequence

from ..api import options as o
from .common import Parser
from .serve_verb import SERVE_HELP, add_serve_flags

# groups of mutually exclusive options that must be given (one of them)
REQUIRED_ONE_OF = {"load"}
# options that take one value or two (api/options.py has no kind for it): measured's --engine-metrics FILE
# [BEFORE], so that a file name with a comma can be given (FILE,BEFORE in one value still works)
ONE_OR_TWO = {"engine_metrics": ("FILE", "BEFORE")}


def add_options(p: argparse.ArgumentParser, opts: Sequence[o.Option]) -> None:
    """argparse arguments for the option records, in their order, in their groups."""
    groups: dict[str | None, argparse._ActionsContainer] = {None: p}
    exclusive: dict[str, argparse._ActionsContainer] = {}
    for opt in opts:
        if opt.group not in groups:
            groups[opt.group] = p.add_argument_group(opt.group)
        where = groups[opt.group]
        if opt.exclusive:
            if opt.exclusive not in exclusive:
                exclusive[opt.exclusive] = where.add_mutually_exclusive_group(required=opt.exclusive in REQUIRED_ONE_OF)
            where = exclusive[opt.exclusive]
        kw: dict = {"help": opt.help_text}
        if opt.kind == "switch":
            kw["action"] = "store_true"
        else:
            if opt.kind == "files":
                kw["nargs"] = "+"
            elif opt.kind == "append":
                kw["action"] = "append"
            if opt.metavar:
                kw["metavar"] = opt.metavar
            if opt.name in ONE_OR_TWO:
                kw["nargs"], kw["metavar"] = "+", ONE_OR_TWO[opt.name]
            if opt.choices:
                kw["choices"] = list(opt.choices)
            if opt.required:
                kw["required"] = True
            if opt.argparse_default is not None:
                kw["default"] = opt.argparse_default
        where.add_argument(opt.cli_flag, dest=opt.name, **kw)


def _verb_flags(verb: str):
    """The function that adds `verb`'s generated flags."""
    return lambda p: add_options(p, o.by_verb()[verb])


def _add_list_show(p: argparse.ArgumentParser, what: str):
    """`crossover VERB list|show NAME`; returns the action subparsers for more actions."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    add_options(actions.add_parser("list", help=f"names of all known {what}s"), [o.SPEC_JSON])
    show = actions.add_parser("show", help=f"one {what}'s spec")
    show.add_argument("name")
    add_options(show, [o.SPEC_JSON])
    return actions


def _hardware_flags(p: argparse.ArgumentParser) -> None:
    _add_list_show(p, "accelerator")


def _models_flags(p: argparse.ArgumentParser) -> None:
    mds = _add_list_show(p, "model")
    im = mds.add_parser("import", help="turn a Hugging Face config.json into a model spec (offline)")
    im.add_argument("config")
    add_options(im, o.MODELS_IMPORT)
    _add_max_input(im)


def _add_max_input(p: argparse.ArgumentParser) -> None:
    """Every verb reads its inputs through crossover.files."""
    add_options(p, [o.MAX_INPUT])


# The verbs in the order `crossover --help` lists them: name, keywords of add_parser, the function
# that adds the verb's flags (run when the verb is parsed or its help shown; --max-input-mb last).
VERBS = (
    ("predict", dict(help="on/off throughput over batch and the crossover batch"), _verb_flags('predict')),
    ("simulate", dict(help="simulate a serving benchmark sweep, speculation off and on"), _verb_flags('simulate')),
    ("policy", dict(help="the best k at each batch, as a schedule and engine configs"), _verb_flags('policy')),
    ("report", dict(help="one self-contained HTML page of a scenario, for a design review"), _verb_flags('report')),
    ("plan", dict(
        help="how many GPUs of which kind, deployed how, at what cost, speculation on or off",
        description="Which accelerators to buy or rent, how many, deployed how, and whether to turn speculation on. "
                    "Every --hardware x --tp x dtype x speculation arm (off, on at its best k, routed by load) is "
                    "sized for the demand under the SLOs, priced and ranked; the best --verify are checked in the "
                    "serving simulator. The first line of the output is the answer. Give a --workload, one demand "
                    "and at least one SLO.",
        epilog="example: crossover plan --model llama-3.1-70b --workload sharegpt --peak-rps 50 --slo-tpot-ms 50 "
               "--hardware h100-sxm,h200,b200 --weight-dtype bf16,fp8 --price b200=5"), _verb_flags('plan')),
    ("whatif", dict(help="speedup over two axes (batch, k, acceptance, context, hardware)"), _verb_flags('whatif')),
    ("measured", dict(help="the measured on/off table and crossover of benchmark result files"), _verb_flags('measured')),
    ("calibrate", dict(help="fit efficiencies, overheads and acceptance to a measured sweep"), _verb_flags('calibrate')),
    ("sweep-plan", dict(help="the levels, requests per level and commands of a two-server sweep, planned by the model"),
     _verb_flags('sweep-plan')),
    ("serve", dict(help=SERVE_HELP), add_serve_flags),
    ("hardware", dict(help="list or show accelerator specs"), _hardware_flags),
    ("models", dict(help="list or show model specs"), _models_flags),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `crossover` command."""
    p = Parser(prog="crossover", description="Predict where speculative decoding stops paying off.")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    for name, kw, flags in VERBS:
        sub.add_parser(name, flags=(flags, _add_max_input), **kw)
    return p
