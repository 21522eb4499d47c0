"""Typed results of the API's verbs: the computed objects, the resolved inputs, and `.to_dict()` /
`.to_text()` exactly as the CLI prints them with and without `--json` (invariant 3, docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..reporting.policy import policy_dict, policy_extras_dict, policy_text
from ..reporting.serving import simulation_dict, simulation_table
from ..reporting.text import breakdown_table, prediction_dict, prediction_table
from ..reporting.plan import plan_dict, plan_table

from ..reporting.assumptions import assumed_lines
from .diagnostics import Diagnostic

if TYPE_CHECKING:  # annotations only: the model stack loads with the first prediction
    from ..measurements import MeasuredTable
    from ..model.scenario import Scenario
    from ..analysis.curves import Prediction


@dataclass
class PredictResult:
    """`crossover predict`: the on/off curves, the crossover and the memory limits."""

    prediction: Prediction
    resolved: dict[str, Any] | None = None  # the inputs record, built when asked for (`inputs`)
    breakdown: dict[str, Any] | None = None  # step.op_breakdown at one batch (predict --breakdown)

    @property
    def inputs(self) -> dict[str, Any]:
        """Every input the scenario resolved to (api/inputs.py), built on first use: predict() itself
        does not pay for it."""
        if self.resolved is None:
            from .inputs import inputs

            self.resolved = inputs(self.prediction.scenario)
        return self.resolved

    @property
    def crossover_batch(self) -> float | None:
        """The first batch where speculation stops paying off (None when it never crosses)."""
        return self.prediction.crossover_batch

    @property
    def regime(self) -> str:
        """'crosses', 'always_faster' or 'never_faster'."""
        return self.prediction.regime

    at_batch: float | None = None  # the load the answer is about (the largest requested batch that fits)

    @cached_property
    def assumed(self) -> list[dict[str, Any]]:
        """Each input the answer assumes (not given, not measured) and where the answer would flip."""
        from ..analysis.assumptions import assumptions

        pred = self.prediction
        b = self.at_batch if self.at_batch is not None else float(pred.curves.batch.max())
        return assumptions(pred.scenario, min(b, float(pred.max_batch_on)), float(pred.curves.batch.max()))

    def to_dict(self) -> dict[str, Any]:
        out = {**prediction_dict(self.prediction), "assumed": self.assumed, "inputs": self.inputs}
        if self.breakdown is not None:
            out["breakdown"] = self.breakdown
        return out

    def to_text(self) -> str:
        text = "\n".join([prediction_table(self.prediction, self.inputs), *assumed_lines(self.assumed)])
        return text if self.breakdown is None else text + "\n" + breakdown_table(self.breakdown)


@dataclass
class SimulateResult:
    """`crossover simulate`: both arms at every load level and the crossover between levels."""

    sweep: Any  # serving.sweep.SweepResult
    inputs: dict[str, Any]

    @property
    def crossover(self) -> float | None:
        """The load where the on/off ratio passes through 1 (interpolated between levels)."""
        return self.sweep.crossover

    def to_dict(self) -> dict[str, Any]:
        return {**simulation_dict(self.sweep), "inputs": self.inputs}

    def to_text(self) -> str:
        return simulation_table(self.sweep, self.inputs)


@dataclass
class PolicyResult:
    """`crossover policy`: the best k per batch, engine configs, and optionally adaptive
    verification and draft trees by load."""

    policy: Any  # policy.Policy
    configs: dict[str, Any]
    inputs: dict[str, Any]
    adaptive: dict[str, Any] | None = None
    trees: dict[str, Any] | None = None

    scenario: Any = None  # the scenario the schedule was computed for (its assumptions)

    @cached_property
    def assumed(self) -> list[dict[str, Any]]:
        """Each input the schedule assumes, and where speculation stops paying off at the largest batch."""
        from ..analysis.assumptions import assumptions

        if self.scenario is None:
            return []
        b = float(self.inputs["batch_max"])
        return assumptions(self.scenario, b, b)

    def to_dict(self) -> dict[str, Any]:
        adaptive, trees = policy_extras_dict(self.adaptive, self.trees)
        return {**policy_dict(self.policy, self.configs), "adaptive": adaptive, "trees": trees,
                "assumed": self.assumed, "inputs": self.inputs}

    def to_text(self) -> str:
        return "\n".join([policy_text(self.policy, self.configs, self.inputs,
                                       *policy_extras_dict(self.adaptive, self.trees)), *assumed_lines(self.assumed)])


@dataclass
class PlanResult:
    """`crossover plan`: the fleet each option needs for the demand under the SLOs, its cost, ranked;
    the one-line recommendation on top."""

    plan: Any  # planning.ranking.FleetPlan
    inputs: dict[str, Any]

    @property
    def recommendation(self) -> str:
        """The plan in one line."""
        return self.plan.recommendation

    @property
    def options(self) -> list[Any]:
        """Options that serve the demand, best first (planning.ranking.Option)."""
        return self.plan.ranked

    def to_dict(self) -> dict[str, Any]:
        return {**plan_dict(self.plan), "inputs": self.inputs}

    def to_text(self) -> str:
        return "\n".join([plan_table(self.plan, self.inputs), *assumed_lines(self.inputs.get("assumed", []))])


@dataclass
class WhatifResult:
    """`crossover whatif`: the speedup grid and the crossover along x for each y."""

    grid: Any  # whatif.Grid
    inputs: dict[str, Any]

    @property
    def crossovers(self) -> list[float | None]:
        """The crossover along x for each y value."""
        return self.grid.crossover_along_x()

    def to_dict(self) -> dict[str, Any]:
        g = self.grid
        return {"x_axis": g.x_axis, "x": g.x, "y_axis": g.y_axis, "y": g.y,
                "speedup": [[round(float(v), 5) for v in row] for row in g.speedup],
                f"crossover_{g.x_axis}_per_{g.y_axis}": self.crossovers, "inputs": self.inputs}

    def to_text(self) -> str:
        g = self.grid
        lines = [f"speedup over {g.x_axis} x {g.y_axis} ({len(g.x)} x {len(g.y)} cells); crossover {g.x_axis} per "
                 f"{g.y_axis}:"]
        for yv, cx, row in zip(g.y, self.crossovers, g.speedup):
            lab = f"{yv:.3g}" if isinstance(yv, float) else str(yv)
            if g.x_axis == "hardware":
                lines.append(f"  {g.y_axis} {lab}: " + ", ".join(f"{h} {v:.2f}" for h, v in zip(g.x, row)))
                continue
            where = f"{cx:.1f}" if cx is not None else ("none (speculation faster throughout)" if row[0] > 1
                                                         else "none (never faster)")
            lines.append(f"  {g.y_axis} {lab:>10}: {where}   (speedup {row[0]:.2f} at {g.x_axis} {g.x[0]:.3g}, "
                         f"{row[-1]:.2f} at {g.x[-1]:.3g})")
        return "\n".join(lines)

    def csv_rows(self) -> list[list[Any]]:
        """x, y, speedup rows (header first)."""
        g = self.grid
        return [[g.x_axis, g.y_axis, "speedup"]] + [[xv, yv, round(float(g.speedup[i, j]), 6)]
                                                    for i, yv in enumerate(g.y) for j, xv in enumerate(g.x)]


@dataclass
class ReportResult:
    """`crossover report`: one self-contained HTML page of a scenario (curves, policy, an optional
    simulation and capacity plan) for a design review; `write(folder)` saves it as index.html."""

    html: str
    inputs: dict[str, Any]

    def to_text(self) -> str:
        return self.html

    def write(self, folder, force: bool = False):
        """index.html in `folder` (created if missing); an existing page is replaced only with `force`."""
        from pathlib import Path

        from ..errors import FileError
        from ..files import write_text

        out = Path(folder)
        try:
            out.mkdir(parents=True, exist_ok=True)  # the report's folder is created if missing
        except OSError as exc:
            raise FileError(f"cannot write {out}: {exc.strerror}") from None
        page = out / "index.html"
        if page.exists() and not force:
            raise FileError(f"{page} exists; give force=True (--force) to replace it")
        write_text(page, self.html)
        return page


@dataclass
class MeasuredResult:
    """`crossover measured`: the measured table, the physics check of every point, the prediction
    at the measured levels (with a model), and the diagnostics said beside it (stderr)."""

    table: MeasuredTable
    scenario: Scenario | None
    checks: list = field(default_factory=list)
    predicted: dict[str, Any] | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    engine_effects: dict[str, Any] | None = None  # a slowdown deeper than the model allows, and its causes
    engine_metrics: dict[str, Any] | None = None  # the server's acceptance (--engine-metrics)
    diagnosis: dict[str, Any] | None = None  # one verdict with its evidence (comparison.diagnosis; needs a model)

    @property
    def verdict(self) -> str | None:
        """The diagnosis's verdict: impossible, physics, configuration, engine, model or inconclusive."""
        return None if self.diagnosis is None else self.diagnosis["verdict"]

    @property
    def notes(self) -> list[str]:
        """The diagnostics as the lines the CLI prints."""
        return [d.line for d in self.diagnostics]

    @property
    def impossible(self) -> list:
        """Points faster than the speed of light allows: beyond the decode-only bound, or beyond the one
        with the sweep's prefill share (impossible unless prefix caching is on)."""
        from ..analysis.bounds import BoundChecks

        return BoundChecks.of(self.checks).beaten(prefill=True)

    def to_dict(self) -> dict[str, Any]:
        from ..reporting.measured import measured_dict

        out = measured_dict(self.table, self.checks, self.predicted)
        if self.predicted is not None:
            out["engine_effects"] = self.engine_effects
        if self.diagnosis is not None:
            out["diagnosis"] = self.diagnosis
        if self.engine_metrics is not None:
            out["engine_metrics"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.engine_metrics.items()}
        return out

    def to_text(self) -> str:
        from ..analysis.bounds import LIKELY_CAUSES
        from ..reporting.measured import measured_text

        return measured_text(self.table, self.checks, LIKELY_CAUSES, self.predicted, self.engine_effects, self.diagnosis)


@dataclass
class CalibrateResult:
    """`crossover calibrate`: the fit (parameters, errors, crossover interval) and its scenario, beside
    the crossover measured between the sweep's levels (comparison.compare.measured_crossover)."""

    fit: Any  # calibration.Fit
    inputs: dict[str, Any]
    measured: dict[str, Any] | None = None

    @property
    def reproduces(self) -> bool:
        """Whether the fitted model reproduces the sweep (something identified, every |ln(measured /
        predicted)| within sweep_fit.RESIDUAL_LIMIT); the CLI writes no fit that does not
        without --force."""
        return bool(self.fit.reproduces)

    def to_dict(self) -> dict[str, Any]:
        from ..reporting.measured import calibration_dict

        return {**calibration_dict(self.fit, self.measured), "inputs": self.inputs}

    def to_text(self) -> str:
        from ..reporting.measured import calibration_table

        return calibration_table(self.fit, self.inputs, self.measured)

    def to_yaml_dict(self) -> dict[str, Any]:
        """What `--out` saves (and `--calibration` reads back), with the fitted crossover and its
        bootstrap interval on the sweep's load axis (what `sweep-plan --calibration` plans around)."""
        out = self.fit.to_yaml_dict()
        d = self.to_dict()
        out["load_axis"] = d["load_axis"]
        if d.get("crossover") is not None:
            out["crossover"] = d["crossover"]
        iv = d.get("crossover_interval")
        if iv is not None and iv[0] is not None:
            out["crossover_interval"] = list(iv)
        return out
