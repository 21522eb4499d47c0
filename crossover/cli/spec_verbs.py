"""Verbs over the spec libraries: hardware, models (list, show, import)."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from ..errors import CrossoverError
from ..files import write_text
from ..reporting.text import spec_listing, spec_text
from ..specs.hf_import import import_config
from ..specs.loader import available, resolve
from .outputs import wrote


def cmd_hardware(args: argparse.Namespace) -> int:
    """`crossover hardware list|show`."""
    return _spec_verb(args, "hardware")


def cmd_models(args: argparse.Namespace) -> int:
    """`crossover models list|show|import`."""
    if args.action == "import":
        spec = import_config(args.config, args.name)
        text = yaml.safe_dump(spec, sort_keys=False)
        if args.out:
            write_text(args.out, text)
            wrote(args.out)
        else:
            sys.stdout.write(text)
        return 0
    return _spec_verb(args, "models")


def _spec_verb(args: argparse.Namespace, kind: str) -> int:
    if args.action == "list":
        names = available(kind)  # type: ignore[arg-type]
        specs = [resolve(str(path), kind) for path in names.values()]  # type: ignore[arg-type]
        if args.json:
            print(json.dumps([s.model_dump(mode="json") for s in specs], indent=2))
        else:
            print(spec_listing(specs, kind))
        return 0
    if args.action == "show":
        spec = resolve(args.name, kind)  # type: ignore[arg-type]
        print(json.dumps(spec.model_dump(mode="json"), indent=2) if args.json else spec_text(spec))
        return 0
    raise CrossoverError(f"`crossover {kind}` needs an action: list, show" + (", import" if kind == "models" else ""))
