"""Verbs that read measured sweeps: measured, calibrate."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import CrossoverError
from .common import _emit, _lengths, _number
from .scenario import scenario_from_args


def _read_arms(args: argparse.Namespace):
    from ..measurements import MeasuredTable, read_measurements

    if not args.files and not (args.on and args.off):
        raise CrossoverError("give --on FILES and --off FILES (or --files whose own fields name the arm)")
    points = read_measurements(args.off, arm="off", load_axis=args.load_axis) if args.off else []
    points += read_measurements(args.on, arm="on", load_axis=args.load_axis) if args.on else []
    points += read_measurements(args.files, arm=None, load_axis=args.load_axis) if args.files else []
    table = MeasuredTable(points)
    if not table.pairs():
        raise CrossoverError("no load level is measured in both arms; give --on and --off files of the same sweep")
    return table


def _measured_scenario(args: argparse.Namespace, table):
    """A scenario for the bound check and overlay of `crossover measured` (None without --model)."""
    if not args.model:
        if getattr(args, "calibration", None):
            raise CrossoverError("--calibration applies to the prediction beside the measurement: give --model and "
                                 "--hardware too")
        return None
    if not args.hardware:
        raise CrossoverError("--model needs --hardware (and usually --tp) to check the points against physics")
    ns = argparse.Namespace(model=args.model, hardware=args.hardware, tp=args.tp, context=None, weight_dtype=None,
                            kv_dtype="bf16", method=args.method, draft=args.draft, draft_tp=None, draft_vocab="32000",
                            k=args.k, acceptance=None, tau=None, acceptance_per_position=None, match_rate=None,
                            bandwidth_fraction=None, flops_fraction=None, step_overhead_ms=None, transition=None,
                            expert_parallel=False, calibration=getattr(args, "calibration", None))
    taus = [p.acceptance_length for p in table.arm("on") if p.acceptance_length]
    if taus:  # the files report it: the overlay and the bound use the measured acceptance length
        ns.tau = str(sum(taus) / len(taus))
    p_len, o_len = table.mean_lengths()
    return scenario_from_args(ns, p_len, o_len)


def _model_for_check(args: argparse.Namespace, table) -> str | None:
    """Without --model, the check takes the model the files name (`model_id`) and needs only
    --hardware (sets args.model); when it cannot run, the one line that says why and which flag
    enables it (printed once the output is out)."""
    from ..physics import files_model

    if args.model:
        return None
    named = table.model_ids()
    found = files_model(named)
    if found is not None and args.hardware:
        args.model = found
        return None
    if found is not None:
        return (f"note: physics check skipped: the files' model is {found}; give --hardware (and --tp) to check "
                f"every point against the speed of light")
    if named:
        return (f"note: physics check skipped: the files' model_id {', '.join(repr(n) for n in named)} is no "
                f"library model; give --model (a spec name or YAML) and --hardware")
    return ("note: physics check skipped: the files name no model; give --model and --hardware to check every "
            "point against the speed of light")


def _strict(args: argparse.Namespace, checks) -> None:
    """--strict: a point beyond the speed of light is an error (after the output is printed)."""
    bad = [c for c in checks if c.beats_physics]
    if getattr(args, "strict", False) and bad:
        where = ", ".join(f"{c.arm} at {c.load:g}" for c in bad[:4]) + (" ..." if len(bad) > 4 else "")
        raise CrossoverError(f"{len(bad)} measured point(s) beyond the speed of light ({where}); see the physics "
                             f"check above (--strict)")


def cmd_measured(args: argparse.Namespace) -> int:
    """`crossover measured`."""
    from ..compare import predicted_at_levels
    from ..physics import LIKELY_CAUSES, check
    from ..report import measured_dict, measured_table

    table = _read_arms(args)
    skipped = _model_for_check(args, table)
    if args.model:
        _check_file_taus(args, table)
    scenario = _measured_scenario(args, table)
    checks = check(scenario[0], table.points) if scenario else []
    predicted = predicted_at_levels(table, scenario[0]) if scenario else None
    if scenario and predicted is None:
        print("note: no prediction beside this request-rate sweep: its files record no token totals "
              "(total_input_tokens, total_output_tokens, completed), which the serving simulator needs",
              file=sys.stderr)
    if args.plot:
        from ..plots import plot_measured

        plot_measured(table, scenario, args.plot, predicted)
    _emit(args, lambda: measured_dict(table, checks, predicted),
          lambda: measured_table(table, checks, LIKELY_CAUSES, predicted))
    if skipped:
        print(skipped, file=sys.stderr)
    _strict(args, checks)
    return 0


def _rate_observations(table, sc):
    """A request-rate sweep as observations: each arm's requests in flight by Little's law (rate x mean
    end-to-end latency) and its mean TPOT; throughput only echoes the offered rate, so it is not fitted."""
    from ..calibration import Observation
    from ..physics import in_flight

    obs = []
    for load, off, on in table.pairs():
        for p in (off, on):
            if not p.metrics.get("mean_e2el_ms") or not p.metrics.get("mean_tpot_ms"):
                raise CrossoverError(f"{p.source}: a request-rate sweep is calibrated on mean TPOT at the requests "
                                     f"in flight (rate x mean_e2el_ms), so both arms need mean_e2el_ms and "
                                     f"mean_tpot_ms at every level")
        obs.append(Observation(in_flight(off, sc), off.output_throughput, on.output_throughput,
                               off.metrics["mean_tpot_ms"], on.metrics["mean_tpot_ms"], f"{off.source} | {on.source}",
                               load_on=in_flight(on, sc), use_throughput=False))
    return obs


def _check_file_taus(args: argparse.Namespace, table) -> None:
    """Each on-arm file's acceptance length (tau) against the k the model will use: a tau above
    k + 1 is named with its file and value (not as an average of several files)."""
    from .common import DEFAULT_K

    if getattr(args, "tree", None) or getattr(args, "tau", None) is not None:
        return
    k = int(_number(args.k, "--k", integer=True)) if getattr(args, "k", None) else DEFAULT_K
    for p in table.arm("on"):
        if p.acceptance_length and p.acceptance_length > k + 1 + 1e-9:
            from_file = f" (the file says k = {p.k})" if p.k is not None and p.k != k else ""
            raise CrossoverError(f"{p.source}: acceptance length (tau) {p.acceptance_length:g} exceeds k + 1 = {k + 1} "
                                 f"for k = {k}{from_file}; give the k of that run with --k, or check the file")


def _calibrate_model(args: argparse.Namespace, table) -> None:
    """Without --model, calibrate the model the files name (`model_id`); an error when they name none."""
    from ..physics import files_model

    if args.model:
        return
    named = table.model_ids()
    found = files_model(named)
    if found is None:
        what = (f"the files' model_id {', '.join(repr(n) for n in named)} is no library model" if named
                else "the files name no model (model_id)")
        raise CrossoverError(f"give --model: {what}")
    args.model = found  # the table's header and the JSON inputs name it


def _bootstrap(text: str) -> int:
    """--bootstrap: a whole number of refits >= 0 (0: no interval)."""
    n = int(_number(text, "--bootstrap", integer=True, positive=False))
    if n < 0:
        raise CrossoverError(f"--bootstrap must be >= 0 refits (0: no interval), got {text}")
    return n


def cmd_calibrate(args: argparse.Namespace) -> int:
    """`crossover calibrate`."""
    import yaml

    from ..calibration import Observation, calibrate
    from ..report import calibration_dict, calibration_table

    table = _read_arms(args)
    bootstrap = _bootstrap(args.bootstrap)
    _calibrate_model(args, table)
    _check_file_taus(args, table)
    p_len, o_len = table.mean_lengths()
    if args.prompt_len is not None or args.output_len is not None:
        p_len, o_len = _lengths(args)
    taus = [p.acceptance_length for p in table.arm("on") if p.acceptance_length]
    fit_acc = not taus and args.acceptance is None and args.tau is None and args.acceptance_per_position is None
    if taus and args.tau is None and args.acceptance is None and args.acceptance_per_position is None:
        args.tau = str(sum(taus) / len(taus))  # the files report it: use it, do not fit it
    sc, resolved = scenario_from_args(args, p_len, o_len)
    if table.load_axis == "request_rate":
        obs, axis = _rate_observations(table, sc), "in_flight"
    else:
        obs = [Observation(load, off.output_throughput, on.output_throughput, off.metrics.get("mean_tpot_ms"),
                           on.metrics.get("mean_tpot_ms"), f"{off.source} | {on.source}")
               for load, off, on in table.pairs()]
        axis = table.load_axis
    fit = calibrate(sc, obs, fit_acceptance=fit_acc, load_axis=axis,
                    bootstrap=bootstrap)
    if args.out:
        if os.path.exists(args.out):
            raise CrossoverError(f"{args.out} exists; choose another --out (files are never overwritten)")
        try:
            with open(args.out, "x", encoding="utf-8") as fh:
                yaml.safe_dump(fit.to_yaml_dict(), fh, sort_keys=False)
        except OSError as exc:
            raise CrossoverError(f"cannot write {args.out}: {exc.strerror}") from None
        print(f"wrote {args.out}", file=sys.stderr)
    _emit(args, lambda: calibration_dict(fit), lambda: calibration_table(fit, resolved), resolved)
    return 0
