"""Measured sweeps beside the model: read both arms, check every point against the speed of light,
predict at the measured levels, and calibrate the model's free parameters to the sweep. The API
verbs `crossover.measured` and `crossover.calibrate` (and the CLI's) are built from these."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .build import DEFAULT_K, DEFAULT_METHOD, inputs, scenario
from .calibration import TPOT_MS_RANGE, Observation, calibrate
from .compare import predicted_at_levels
from .curves import Scenario
from .errors import CrossoverError
from .measured_report import (
    calibration_dict,
    calibration_table,
    measured_dict,
    measured_table,
)
from .measurements import MeasuredTable, read_measurements
from .physics import LIKELY_CAUSES, check, files_model, in_flight

Paths = Sequence[str | Path] | None


def read_arms(on: Paths = None, off: Paths = None, files: Paths = None, load_axis: str | None = None) -> MeasuredTable:
    """Both arms of a sweep: `on` and `off` result files (or folders), or `files` whose own fields
    name the arm; a one-line error when no level is measured in both."""
    if not files and not (on and off):
        raise CrossoverError("give --on FILES and --off FILES (or --files whose own fields name the arm)")
    points = read_measurements(off, arm="off", load_axis=load_axis) if off else []
    points += read_measurements(on, arm="on", load_axis=load_axis) if on else []
    points += read_measurements(files, arm=None, load_axis=load_axis) if files else []
    table = MeasuredTable(points)
    if not table.pairs():
        raise CrossoverError("no load level is measured in both arms; give --on and --off files of the same sweep")
    return table


def files_tau(table: MeasuredTable) -> float | None:
    """The mean acceptance length (tau) the on-arm files report, if any."""
    taus = [p.acceptance_length for p in table.arm("on") if p.acceptance_length]
    return sum(taus) / len(taus) if taus else None


def check_file_taus(table: MeasuredTable, k: int | None) -> None:
    """Each on-arm file's tau against the k the model will use: a tau above k + 1 is named with its
    file and value (not as an average of several files)."""
    k = DEFAULT_K if k is None else k
    for p in table.arm("on"):
        if p.acceptance_length and p.acceptance_length > k + 1 + 1e-9:
            from_file = f" (the file says k = {p.k})" if p.k is not None and p.k != k else ""
            raise CrossoverError(f"{p.source}: acceptance length (tau) {p.acceptance_length:g} exceeds k + 1 = {k + 1} "
                                 f"for k = {k}{from_file}; give the k of that run with --k, or check the file")


def model_for_check(table: MeasuredTable, model: str | None, hardware: str | None) -> tuple[str | None, str | None]:
    """(the model to check the points with, the note to print when the check cannot run): an
    explicit model, else the one the files name (`model_id`), which needs only the hardware."""
    if model:
        return model, None
    named = table.model_ids()
    found = files_model(named)
    if found is not None and hardware:
        return found, None
    if found is not None:
        return None, (f"note: physics check skipped: the files' model is {found}; give --hardware (and --tp) to "
                      f"check every point against the speed of light")
    if named:
        return None, (f"note: physics check skipped: the files' model_id {', '.join(repr(n) for n in named)} is no "
                      f"library model; give --model (a spec name or YAML) and --hardware")
    return None, ("note: physics check skipped: the files name no model; give --model and --hardware to check "
                  "every point against the speed of light")


@dataclass
class MeasuredResult:
    """`crossover measured`: the measured table, the physics check of every point, the prediction
    at the measured levels (with a model), and notes for stderr."""

    table: MeasuredTable
    scenario: Scenario | None
    checks: list = field(default_factory=list)
    predicted: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def impossible(self) -> list:
        """Points faster than the speed of light allows."""
        return [c for c in self.checks if c.beats_physics]

    def to_dict(self) -> dict[str, Any]:
        return measured_dict(self.table, self.checks, self.predicted)

    def to_text(self) -> str:
        return measured_table(self.table, self.checks, LIKELY_CAUSES, self.predicted)


def measured(on: Paths = None, off: Paths = None, *, files: Paths = None, load_axis: str | None = None,
             model: str | None = None, hardware: str | None = None, tp: int | None = None,
             method: str = DEFAULT_METHOD, draft: str | None = None, k: int | None = None,
             calibration: str | Path | None = None, force: bool = False) -> MeasuredResult:
    """A measured sweep's on/off table and crossover; with the hardware (and the model, or files
    that name it), every point checked against the speed of light and the model beside each level.
    `force`: apply a calibration fitted on another model, hardware or TP (build.scenario checks)."""
    table = read_arms(on, off, files, load_axis)
    model, note = model_for_check(table, model, hardware)
    notes = [note] if note else []
    if not model:
        if calibration is not None:
            raise CrossoverError("--calibration applies to the prediction beside the measurement: give --model and "
                                 "--hardware too")
        return MeasuredResult(table, None, notes=notes)
    if not hardware:
        raise CrossoverError("--model needs --hardware (and usually --tp) to check the points against physics")
    check_file_taus(table, k)
    p_len, o_len = table.mean_lengths()
    sc = scenario(model, hardware, tp=tp, method=method, draft=draft, k=k, tau=files_tau(table),
                  calibration=calibration, prompt_len=p_len, output_len=o_len, force_calibration=force)
    predicted = predicted_at_levels(table, sc)
    if predicted is None:
        notes.insert(0, "note: no prediction beside this request-rate sweep: its files record no token totals "
                        "(total_input_tokens, total_output_tokens, completed), which the serving simulator needs")
    return MeasuredResult(table, sc, check(sc, table.points), predicted, notes)


def _rate_observations(table: MeasuredTable, sc: Scenario) -> list[Observation]:
    """A request-rate sweep as observations: each arm's requests in flight by Little's law (rate x mean
    end-to-end latency) and its mean TPOT; throughput only echoes the offered rate, so it is not fitted."""
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
                               load_on=in_flight(on, sc), use_throughput=False))
    return obs


@dataclass
class CalibrateResult:
    """`crossover calibrate`: the fit (parameters, errors, crossover interval) and its scenario."""

    fit: Any  # calibration.Fit
    inputs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**calibration_dict(self.fit), "inputs": self.inputs}

    def to_text(self) -> str:
        return calibration_table(self.fit, self.inputs)

    def to_yaml_dict(self) -> dict[str, Any]:
        """What `--out` saves (and `--calibration` reads back)."""
        return self.fit.to_yaml_dict()


def calibrate_sweep(on: Paths = None, off: Paths = None, *, files: Paths = None, load_axis: str | None = None,
                    bootstrap: int = 60, model: str | None = None, prompt_len: float | None = None,
                    output_len: float | None = None, **scenario_kwargs: Any) -> CalibrateResult:
    """Fit efficiencies, overheads and (unless the files report tau or one is given) the acceptance
    rate to a measured sweep; the model defaults to the one the files name."""
    table = read_arms(on, off, files, load_axis)
    if isinstance(bootstrap, bool) or int(bootstrap) != bootstrap or bootstrap < 0:
        raise CrossoverError(f"--bootstrap must be >= 0 refits (0: no interval), got {bootstrap}")
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
    if table.load_axis == "request_rate":
        obs, axis = _rate_observations(table, sc), "in_flight"
    else:
        obs = [Observation(load, off.output_throughput, on.output_throughput, off.metrics.get("mean_tpot_ms"),
                           on.metrics.get("mean_tpot_ms"), f"{off.source} | {on.source}")
               for load, off, on in table.pairs()]
        axis = table.load_axis
    fit = calibrate(sc, obs, fit_acceptance=tau is None and not given, load_axis=axis, bootstrap=int(bootstrap))
    return CalibrateResult(fit, inputs(sc))
