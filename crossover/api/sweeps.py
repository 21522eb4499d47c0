"""Measured sweeps beside the model: read both arms, check every point against the speed of light,
predict at the measured levels, and calibrate the model's free parameters to the sweep. The API
verbs `crossover.measured` and `crossover.calibrate` (and the CLI's) are built from these."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..defaults import DEFAULT_BOOTSTRAP, DEFAULT_K, DEFAULT_METHOD
from ..comparison.engine_effects import engine_effects
from ..errors import CrossoverError, InputError, api_boundary
from .diagnostics import Diagnostic
from .options import LAUNCH_SCENARIO, SAMPLING_OPTIONS
from .results import CalibrateResult, MeasuredResult
from ..measurements import Columns, MeasuredTable, read_columns
from ..analysis.bounds import files_model

# The model (specs, step model, calibration) is imported where a model is asked for: a sweep read
# without one loads only the readers and the report.
if TYPE_CHECKING:
    from ..analysis.calibration import Observation
    from ..model.scenario import Scenario

Paths = Sequence[str | Path] | None


# SGLang's --speculative-algorithm values and the methods that price them
SKIPPED = "physics_check_skipped"  # said after the output: what a user could add to check the points
SGLANG_METHODS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NGRAM": "ngram", "NEXTN": "mtp", "STANDALONE": "draft"}


def files_method(table: MeasuredTable, method: str | None) -> tuple[str, Diagnostic | None]:
    """The method to price the sweep with, and a note: `method` when given (noting files that say
    another ran), else the one the on-arm files name (SGLang's speculative_algorithm), else the default."""
    algos = sorted(table.columns.algorithms)
    named = {SGLANG_METHODS.get(a) for a in algos}
    if method is not None:
        if len(named) == 1 and None not in named and method not in named:
            return method, Diagnostic("method_differs_from_files", f"the files ran {algos[0]} (SGLang); priced as "
                                      f"--method {method}", evidence={"algorithm": algos[0], "method": method})
        return method, None
    if len(named) == 1 and None not in named:
        found = named.pop()
        return found, Diagnostic("method_from_files", f"method {found} from the files (SGLang speculative_algorithm "
                                 f"{algos[0]}; --method sets another)", evidence={"algorithm": algos[0], "method": found})
    return DEFAULT_METHOD, None


def read_arms(on: Paths = None, off: Paths = None, files: Paths = None, load_axis: str | None = None) -> MeasuredTable:
    """Both arms of a sweep: `on` and `off` result files (or folders), or `files` whose own fields
    name the arm; a one-line error when no level is measured in both."""
    if not files and not (on and off):
        raise CrossoverError("give --on FILES and --off FILES (or --files whose own fields name the arm)")
    parts = [read_columns(off, arm="off", load_axis=load_axis)] if off else []
    parts += [read_columns(on, arm="on", load_axis=load_axis)] if on else []
    parts += [read_columns(files, arm=None, load_axis=load_axis)] if files else []
    table = MeasuredTable(columns=Columns.concat(parts))  # column arrays: no Python object per row
    if not len(table.levels()[0]):
        raise CrossoverError("no load level is measured in both arms; give --on and --off files of the same sweep")
    return table


def files_tau(table: MeasuredTable) -> float | None:
    """The mean acceptance length (tau) the on-arm files report, if any."""
    taus = table.on_taus()[1].tolist()  # by load, as the on-arm points
    return sum(taus) / len(taus) if taus else None


def files_match_rate(table: MeasuredTable) -> float | None:
    """n-gram: the share of request steps that carried a draft (measurements.acceptance.match_rate),
    from the on-arm files' counters summed over the runs (vllm bench serve's spec_decode_num_drafts,
    spec_decode_accepted_tokens, total_output_tokens and completed). None where the files do not
    report all four."""
    c = table.columns
    drafts, accepted = c.metric("spec_decode_num_drafts"), c.metric("spec_decode_accepted_tokens")
    out, done = c.metric("total_output_tokens"), c.metric("completed")
    rows = c.on & ~np.isnan(drafts) & ~np.isnan(accepted) & ~np.isnan(out) & ~np.isnan(done)
    if not rows.any():
        return None
    from ..measurements.acceptance import match_rate

    return match_rate(float(drafts[rows].sum()), float(out[rows].sum()), float(done[rows].sum()),
                      float(accepted[rows].sum()))


def check_file_taus(table: MeasuredTable, k: int | None) -> None:
    """Each on-arm file's tau against the k the model will use: a tau above k + 1 is named with its
    file and value (not as an average of several files)."""
    k = DEFAULT_K if k is None else k
    for row, tau in zip(*(a.tolist() for a in table.on_taus())):
        if tau > k + 1 + 1e-9:
            p = table.columns.point(row)
            from_file = f" (the file says k = {p.k})" if p.k is not None and p.k != k else ""
            raise CrossoverError(f"{p.source}: acceptance length (tau) {p.acceptance_length:g} exceeds k + 1 = {k + 1} "
                                 f"for k = {k}{from_file}; give the k of that run with --k, or check the file")


def model_for_check(table: MeasuredTable, model: str | None,
                    hardware: str | None) -> tuple[str | None, Diagnostic | None]:
    """(the model to check the points with, the note to print when the check cannot run): an
    explicit model, else the one the files name (`model_id`), which needs only the hardware."""
    if model:
        return model, None
    named = table.model_ids()
    found = files_model(named)
    if found is not None and hardware:
        return found, None
    if found is not None:
        return None, Diagnostic(SKIPPED, f"physics check skipped: the files' model is {found}; give --hardware "
                                f"(and --tp) to check every point against the speed of light",
                                evidence={"model": found})
    if named:
        return None, Diagnostic(SKIPPED, f"physics check skipped: the files' model_id "
                                f"{', '.join(repr(n) for n in named)} is no library model; give --model (a spec name "
                                f"or YAML) and --hardware", evidence={"model_ids": list(named)})
    return None, Diagnostic(SKIPPED, "physics check skipped: the files name no model; give --model and --hardware "
                            "to check every point against the speed of light")


# crossover.scenario's keywords a measured sweep takes (the deployment the files ran; the rest the files say)
# the deployment's settings a launch configuration (or the user) gives
LAUNCH_KEYWORDS = ("draft_tp", *LAUNCH_SCENARIO, "expert_parallel", "data_parallel")
MEASURED_KEYWORDS = ("model", "hardware", "tp", "method", "draft", "k", "calibration", "force_calibration", "engine",
                     "distilled", "prompt_len", "output_len", *SAMPLING_OPTIONS,  # sampling: no file records it
                     *LAUNCH_KEYWORDS)


@api_boundary
def measured(on: Paths = None, off: Paths = None, *, files: Paths = None, load_axis: str | None = None,
             engine_metrics: Paths = None, server_args: Paths = None, **scenario_kwargs: Any) -> MeasuredResult:
    """A measured sweep's on/off table and crossover; with the hardware (and the model, or files
    that name it), every point checked against the speed of light and the model beside each level.
    `scenario_kwargs`: crossover.scenario's keywords for the deployment the files ran (MEASURED_KEYWORDS:
    model, hardware, tp, method, draft, k, calibration, force_calibration, engine, distilled, and the
    mean prompt_len and output_len, which beat the files' token counts); the lengths, tau and n-gram
    match rate otherwise come from the files. `engine_metrics`: the server's own acceptance
    (a vLLM log, or a /metrics scrape after the run and optionally one before it): its tau, k and
    n-gram match rate replace the files'. `server_args`: the servers' launch configurations (one
    file, or one per server: api/launch.py): what they say fills every keyword not given."""
    unknown = sorted(set(scenario_kwargs) - set(MEASURED_KEYWORDS))
    if unknown:
        raise InputError(f"measured takes no {unknown[0]!r} (the deployment the files ran: "
                         f"{', '.join(MEASURED_KEYWORDS)})", parameter=unknown[0])
    launch_note = None
    if server_args:
        from .launch import launch_keywords

        extra, launch_note = launch_keywords(server_args, scenario_kwargs)
        scenario_kwargs = {**scenario_kwargs, **extra}
    model, hardware, tp, method, draft, k, calibration, engine = (
        scenario_kwargs.get(n) for n in ("model", "hardware", "tp", "method", "draft", "k", "calibration", "engine"))
    force = scenario_kwargs.get("force_calibration", False)
    distilled = scenario_kwargs.get("distilled", True)
    table = read_arms(on, off, files, load_axis)
    metrics = read_engine_metrics(engine_metrics)
    model, skipped = model_for_check(table, model, hardware)
    said = [skipped] if skipped else []
    if launch_note is not None:
        said.insert(0, launch_note)
    inferred = method is None
    method, method_note = files_method(table, method)
    if metrics is not None:
        said.insert(0, metrics_note(metrics, method))
    if not model:
        if calibration is not None:
            raise CrossoverError("--calibration applies to the prediction beside the measurement: give --model and "
                                 "--hardware too")
        return MeasuredResult(table, None, diagnostics=said, engine_metrics=metrics)
    if not hardware:
        raise CrossoverError("--model needs --hardware (and usually --tp) to check the points against physics")
    if inferred and method == "draft" and draft is None:
        raise CrossoverError("the files ran SGLang's STANDALONE speculation (a separate draft model): give --draft NAME, "
                             "or --method to price another")
    if method_note:
        said.append(method_note)
    from .build import scenario
    from ..comparison.compare import predicted_at_levels
    from ..analysis.bounds import check

    if k is None and metrics is not None and metrics.get("k"):
        k = int(metrics["k"])
    check_file_taus(table, k)
    p_len, o_len = table.mean_lengths()
    given = scenario_kwargs.get("prompt_len"), scenario_kwargs.get("output_len")
    if (given[0] is None) != (given[1] is None):
        raise InputError("give prompt_len and output_len together (mean tokens per request)",
                         parameter="prompt_len" if given[0] is None else "output_len")
    if given[0] is not None:  # the lengths the sweep ran, as given: they beat the files' token counts
        p_len, o_len = given
    if p_len is None or o_len is None:  # the prefill mix needs both lengths: pure decode otherwise
        p_len = o_len = None
    tau = files_tau(table)
    if metrics is not None and metrics.get("acceptance_length"):
        tau = float(metrics["acceptance_length"])
    match = None
    if method == "ngram":
        match = metrics.get("match_rate") if metrics is not None else None
        if match is None:
            match = files_match_rate(table)
            if match is not None:
                said.append(Diagnostic("match_rate_from_files", f"n-gram match rate {match:.3f} from the files' "
                                        "counters (drafts per request step); the crossover moves with it",
                                        evidence={"match_rate": match}))
    if engine is None and table.columns.formats == {"sglang"}:  # the files name their engine: no silent vllm
        engine = "sglang"
        said.append(Diagnostic("engine_from_files", "engine profile sglang: the files are SGLang bench_serving "
                                "results (--engine sets another)", evidence={"engine": "sglang"}))
    sc = scenario(model, hardware, tp=tp, method=method, draft=draft, k=k, tau=tau, match_rate=match,
                  calibration=calibration, prompt_len=p_len, output_len=o_len, force_calibration=force,
                  distilled=distilled, **({} if engine is None else {"engine": engine}),
                  **{n: scenario_kwargs[n] for n in (*LAUNCH_KEYWORDS, *SAMPLING_OPTIONS)
                     if scenario_kwargs.get(n) is not None})
    sc = _graphs_of_servers(sc, scenario_kwargs)
    from ..comparison.diagnosis import diagnose

    predicted = predicted_at_levels(table, sc)
    if predicted is None:
        said.insert(0, Diagnostic("no_rate_prediction", "no prediction beside this request-rate sweep: its files "
                                   "record no token totals (total_input_tokens, total_output_tokens, completed), "
                                   "which the serving simulator needs"))
    checks = check(sc, table)
    impossible = sorted(set(checks.load[checks.impossible].tolist()))  # no further diagnosis at these levels
    diagnosis = diagnose(table, sc, checks, predicted)
    return MeasuredResult(table, sc, checks, predicted, said, engine_effects(table, sc, predicted, exclude=impossible),
                          metrics, diagnosis)


def _graphs_of_servers(sc, launch: dict[str, Any]):
    """The scenario with each server's CUDA-graph capture limit sized from the running-sequence limits
    its launch file gives, where the engine sizes it so (vLLM V0 and V1: specs/capture.py for_servers);
    the batch stays the sweep's load."""
    seqs, budget = launch.get("max_num_seqs"), launch.get("max_num_batched_tokens")
    spec_seqs = launch.get("max_num_seqs_speculating")
    if seqs is None and spec_seqs is None and budget is None:
        return sc
    from ..serving.engine import EngineLimits
    from ..specs.capture import for_servers

    dep = sc.deployment
    limits = EngineLimits.of(dep, seqs, budget)
    engine = for_servers(dep.engine, limits.max_num_seqs, limits.max_num_batched_tokens, sc.speculation.k,
                         spec_seqs or limits.spec_max_num_seqs)
    return sc if engine is dep.engine else sc.with_engine(engine)


def read_engine_metrics(paths: Paths) -> dict[str, Any] | None:
    """The server's acceptance from a vLLM log or a /metrics scrape after the run ([after, before]:
    the before-scrape subtracted), with its source; None without."""
    if not paths:
        return None
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if len(paths) > 2:
        raise CrossoverError("--engine-metrics takes one file, or a scrape after the run and one before it (AFTER,BEFORE)")
    from ..measurements.acceptance import read_acceptance

    out = dict(read_acceptance(paths[0], paths[1] if len(paths) == 2 else None))
    out["source"] = ",".join(str(p) for p in paths)
    if not out.get("acceptance_length") and not out.get("match_rate"):
        raise CrossoverError(f"{out['source']}: no acceptance length in these engine metrics (V1 counters "
                             "vllm:spec_decode_num_drafts and num_accepted_tokens, or SpecDecoding log lines)")
    return out


def metrics_note(m: dict[str, Any], method: str) -> Diagnostic:
    """One line: what the engine metrics said."""
    parts = []
    if m.get("acceptance_length"):
        parts.append(f"acceptance length {m['acceptance_length']:.3f}")
    if m.get("acceptance_rate") is not None:
        parts.append(f"rate {m['acceptance_rate']:.3f}")
    if m.get("k"):
        parts.append(f"k {m['k']}")
    if method == "ngram":
        parts.append(f"n-gram match rate {m['match_rate']:.3f} (drafts per request step; the crossover moves with it)"
                     if m.get("match_rate") is not None else
                     "no n-gram match rate (needs vllm:generation_tokens and vllm:request_success in a scrape)")
    evidence = {key: m[key] for key in ("source", "acceptance_length", "acceptance_rate", "k", "match_rate")
                if m.get(key) is not None}
    return Diagnostic("engine_metrics", f"engine metrics {m['source']}: " + ", ".join(parts), evidence=evidence)


def _rate_observations(table: MeasuredTable, sc: Scenario, per_level: bool = True) -> list[Observation]:
    """A request-rate sweep as observations: each arm's requests in flight by Little's law (rate x mean
    end-to-end latency) and its mean TPOT; throughput only echoes the offered rate, so it is not fitted."""
    from ..analysis.calibration import TPOT_MS_RANGE, Observation
    from ..analysis.bounds import in_flight

    obs = []
    for load, off, on in table.pairs():
        for p in (off, on):
            if not p.metrics.get("mean_e2el_ms") or not p.metrics.get("mean_tpot_ms"):
                raise CrossoverError(f"{p.source}: a request-rate sweep is calibrated on mean TPOT at the requests "
                                     f"in flight (rate x mean_e2el_ms), so both arms need mean_e2el_ms and "
                                     f"mean_tpot_ms at every level")
            e2e = p.metrics["mean_e2el_ms"]
            if not TPOT_MS_RANGE[0] <= e2e <= TPOT_MS_RANGE[1]:
                raise CrossoverError(f"{p.source}: mean_e2el_ms {e2e:g} is no measurement (expected "
                                     f"{TPOT_MS_RANGE[0]:g}-{TPOT_MS_RANGE[1]:g} ms)")
        obs.append(Observation(in_flight(off, sc), off.output_throughput, on.output_throughput,
                               off.metrics["mean_tpot_ms"], on.metrics["mean_tpot_ms"], f"{off.source} | {on.source}",
                               load_on=in_flight(on, sc), use_throughput=False,
                               tau_on=(on.acceptance_length or None) if per_level else None))
    return obs


# The most bootstrap refits: the 5% and 95% quantiles of 10,000 draws move by ~0.2 of a percentile
# point between seeds, far inside the interval; 1e8 draws asked for 6 GB of noise and hours of refits.
MAX_BOOTSTRAP = 10_000


def check_bootstrap(draws: Any) -> int:
    """The number of bootstrap refits as an int 0..MAX_BOOTSTRAP; a one-line InputError otherwise."""
    number = not isinstance(draws, bool) and isinstance(draws, (int, float, np.integer, np.floating))
    if not (number and (isinstance(draws, (int, np.integer)) or (math.isfinite(draws) and draws == int(draws)))
            and draws >= 0):
        raise InputError(f"--bootstrap must be a whole number >= 0 of refits (0: no interval), got {draws!r}",
                         parameter="bootstrap")
    if draws > MAX_BOOTSTRAP:
        shown = (f"{int(draws)}" if draws < 1e15 else f"{draws:.3g}" if isinstance(draws, (float, np.floating))
                 else f"of {len(str(int(draws)))} digits")
        raise InputError(f"--bootstrap {shown} is more refits than the interval needs: at most {MAX_BOOTSTRAP:,} "
                         f"(its 5% and 95% quantiles are settled well before)", parameter="bootstrap")
    return int(draws)


@api_boundary
def calibrate_sweep(on: Paths = None, off: Paths = None, *, files: Paths = None, load_axis: str | None = None,
                    bootstrap: int = DEFAULT_BOOTSTRAP, model: str | None = None, prompt_len: float | None = None,
                    output_len: float | None = None, progress=None, **scenario_kwargs: Any) -> CalibrateResult:
    """Fit efficiencies, overheads and (unless the files report tau or one is given) the acceptance
    rate to a measured sweep; the model defaults to the one the files name. `progress(done, total)`
    follows the bootstrap (calibration.calibrate)."""
    from .build import scenario
    from .inputs import inputs
    from ..analysis.calibration import Observation, calibrate

    bootstrap = check_bootstrap(bootstrap)  # before any file is read or refit drawn
    table = read_arms(on, off, files, load_axis)
    if not model:
        named = table.model_ids()
        model = files_model(named)
        if model is None:
            what = (f"the files' model_id {', '.join(repr(n) for n in named)} is no library model" if named
                    else "the files name no model (model_id)")
            raise CrossoverError(f"give --model: {what}")
    given = any(scenario_kwargs.get(key) is not None for key in ("acceptance", "tau", "per_position"))
    if scenario_kwargs.get("tree") is None and scenario_kwargs.get("tau") is None:
        check_file_taus(table, scenario_kwargs.get("k"))
    if prompt_len is None and output_len is None:
        prompt_len, output_len = table.mean_lengths()
    tau = files_tau(table)
    if tau is not None and not given:
        scenario_kwargs["tau"] = tau  # the files report it: use it, do not fit it
    sc = scenario(model, prompt_len=prompt_len, output_len=output_len, **scenario_kwargs)
    per_level = tau is not None and not given  # each level at its own tau, as the files report it
    if table.load_axis == "request_rate":
        obs, axis = _rate_observations(table, sc, per_level), "in_flight"
    else:
        obs = [Observation(load, off.output_throughput, on.output_throughput, off.metrics.get("mean_tpot_ms"),
                           on.metrics.get("mean_tpot_ms"), f"{off.source} | {on.source}",
                           tau_on=(on.acceptance_length or None) if per_level else None)
               for load, off, on in table.pairs()]
        axis = table.load_axis
    fit = calibrate(sc, obs, fit_acceptance=tau is None and not given, load_axis=axis, bootstrap=bootstrap,
                    progress=progress)
    from ..comparison.compare import measured_crossover

    return CalibrateResult(fit, inputs(sc), measured_crossover(table))
