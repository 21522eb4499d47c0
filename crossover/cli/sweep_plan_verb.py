"""`crossover sweep-plan`: the two-server sweep the model plans (issue 24)."""

from __future__ import annotations

import argparse

from ..api.sweep_plan import SweepRequest, sweep_plan
from .common import parse_number, print_result
from .progress import progress_line
from .scenario import scenario_kwargs


def _int(args: argparse.Namespace, name: str, positive: bool = True) -> int | None:
    text = getattr(args, name)
    flag = "--" + name.replace("_", "-")
    return None if text is None else int(parse_number(text, flag, integer=True, positive=positive))


def cmd_sweep_plan(args: argparse.Namespace) -> int:
    """`crossover sweep-plan`."""
    kw = scenario_kwargs(args)
    for name in ("prompt_len", "output_len"):
        if getattr(args, name) is not None:
            kw[name] = parse_number(getattr(args, name), "--" + name.replace("_", "-"))
    req = SweepRequest(load_axis=args.load_axis, levels=_int(args, "levels"),
                       peak=None if args.peak is None else parse_number(args.peak, "--peak"),
                       half_width=parse_number(args.half_width, "--half-width"),
                       min_requests=_int(args, "min_requests"), max_requests=_int(args, "max_requests"),
                       seed=_int(args, "seed", positive=False), max_num_seqs=_int(args, "max_num_seqs"),
                       max_num_batched_tokens=_int(args, "max_num_batched_tokens"),
                       draft_model_id=args.draft_model_id, port=_int(args, "port"), results_dir=args.results_dir,
                       client=args.client)
    progress = progress_line("sweep-plan", lambda done, total, load: f"sizing {done}/{total} levels (load {load:g} done)",
                             bool(args.quiet))
    res = sweep_plan(sweep=req, on=args.on, off=args.off, files=args.files, progress=progress, **kw)
    print_result(args, res)
    return 0
