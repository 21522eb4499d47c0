"""Verbs that read measured sweeps: measured, calibrate."""

from __future__ import annotations

import argparse
import sys

from ..errors import CrossoverError
from ..api.sweeps import SKIPPED, measured
from .common import engine_metrics_files, parse_lengths, parse_number, print_result, sampling_kwargs
from .outputs import wrote


def _files(args: argparse.Namespace) -> dict:
    return dict(on=args.on, off=args.off, files=args.files, load_axis=args.load_axis)


def _launch(args: argparse.Namespace) -> dict:
    """The deployment settings measured takes beside the files (a launch configuration gives the rest)."""
    out = {"weight_dtype": args.weight_dtype, "kv_dtype": args.kv_dtype, "cuda_graphs": args.cuda_graphs,
           "cuda_graphs_speculating": args.cuda_graphs_speculating, "chunked_prefill": args.chunked_prefill,
           "async_scheduling": args.async_scheduling,
           "mla_verify": args.mla_verify, "expert_parallel": args.expert_parallel or None}
    if args.cuda_graph_max is not None:
        out["cuda_graph_max"] = int(parse_number(args.cuda_graph_max, "--cuda-graph-max", integer=True))
    if args.data_parallel is not None:
        out["data_parallel"] = int(parse_number(args.data_parallel, "--dp", integer=True))
    if args.draft_tp is not None:
        out["draft_tp"] = int(parse_number(args.draft_tp, "--draft-tp", integer=True))
    if args.gpu_memory_utilization is not None:
        out["gpu_memory_utilization"] = parse_number(args.gpu_memory_utilization, "--gpu-memory-utilization")
    out.update(sampling_kwargs(args))
    return {k: v for k, v in out.items() if v is not None}


def cmd_measured(args: argparse.Namespace) -> int:
    """`crossover measured`."""
    k = int(parse_number(args.k, "--k", integer=True)) if args.k is not None else None
    p_len, o_len = parse_lengths(args)
    res = measured(**_files(args), model=args.model, hardware=args.hardware, prompt_len=p_len, output_len=o_len,
                   tp=int(parse_number(args.tp, "--tp", integer=True)) if args.tp is not None else None,
                   method=args.method, draft=args.draft, k=k, calibration=getattr(args, "calibration", None),
                   force_calibration=bool(getattr(args, "force_calibration", False)), engine=getattr(args, "engine", None),
                   distilled=not getattr(args, "no_distilled", False),
                   engine_metrics=engine_metrics_files(args.engine_metrics), server_args=args.server_args,
                   **_launch(args))
    bad = res.impossible
    failing = bool(getattr(args, "strict", False) and bad)  # exit 2: its one error line is all stderr says
    later = [d for d in res.diagnostics if d.kind == SKIPPED]  # the skipped check is said after the output
    for d in res.diagnostics:
        if d not in later and not failing:
            print(d.line, file=sys.stderr)
    if args.plot:
        from ..api.inputs import inputs
        from ..reporting.plots import plot_measured

        plot_measured(res.table, (res.scenario, inputs(res.scenario)) if res.scenario else None, args.plot, res.predicted)
    print_result(args, res)
    for d in later if not failing else ():
        print(d.line, file=sys.stderr)
    if failing:
        where = ", ".join(f"{c.arm} at {c.load:g}" for c in bad[:4]) + (" ..." if len(bad) > 4 else "")
        raise CrossoverError(f"{len(bad)} measured point(s) beyond the speed of light ({where}); see the physics "
                             f"check above (--strict)")
    return 0


def _bootstrap_progress(args: argparse.Namespace):
    """calibrate's progress line over the bootstrap refits (stderr, a terminal only, after 2 s)."""
    from .progress import progress_line

    draws = args.bootstrap
    return progress_line("calibrate", lambda done, total: f"bootstrap {done / total:.0%} of {draws} refits",
                         bool(args.quiet))


def cmd_calibrate(args: argparse.Namespace) -> int:
    """`crossover calibrate`."""
    import yaml

    from ..files import write_text
    from ..api.sweeps import calibrate_sweep
    from .scenario import scenario_kwargs

    kw = scenario_kwargs(args)
    model = kw.pop("model", None)
    p_len = o_len = None
    if args.prompt_len is not None or args.output_len is not None:
        p_len, o_len = parse_lengths(args)
    res = calibrate_sweep(**_files(args), bootstrap=int(parse_number(args.bootstrap, "--bootstrap", integer=True,
                                                                 positive=False)),
                          model=model, prompt_len=p_len, output_len=o_len, progress=_bootstrap_progress(args),
                          **kw)
    print_result(args, res)
    if args.out and not res.reproduces and not args.force:  # the verdict is printed above; nothing written
        raise CrossoverError(f"{args.out} not written: the model cannot reproduce this sweep (see above); give "
                             f"--force to write the fit anyway")
    if args.out:
        write_text(args.out, yaml.safe_dump(res.to_yaml_dict(), sort_keys=False))
        wrote(args.out)
    return 0
