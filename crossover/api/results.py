"""Typed results of the API's verbs: the computed objects, the resolved inputs, and `.to_dict()` /
`.to_text()` exactly as the CLI prints them with and without `--json` (invariant 3, docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..reporting.text import (
    breakdown_table,
    policy_dict,
    policy_extras_dict,
    policy_text,
    prediction_dict,
    prediction_table,
    simulation_dict,
    simulation_table,
)
from ..reporting.plan import plan_dict, plan_table

if TYPE_CHECKING:  # annotations only: the model stack loads with the first prediction
    from ..analysis.curves import Prediction


@dataclass
class PredictResult:
    """`crossover predict`: the on/off curves, the crossover and the memory limits."""

    prediction: Prediction
    inputs: dict[str, Any]
    breakdown: dict[str, Any] | None = None  # step.op_breakdown at one batch (predict --breakdown)

    @property
    def crossover_batch(self) -> float | None:
        """The first batch where speculation stops paying off (None when it never crosses)."""
        return self.prediction.crossover_batch

    @property
    def regime(self) -> str:
        """'crosses', 'always_faster' or 'never_faster'."""
        return self.prediction.regime

    def to_dict(self) -> dict[str, Any]:
        out = {**prediction_dict(self.prediction), "inputs": self.inputs}
        if self.breakdown is not None:
            out["breakdown"] = self.breakdown
        return out

    def to_text(self) -> str:
        text = prediction_table(self.prediction, self.inputs)
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

    def to_dict(self) -> dict[str, Any]:
        adaptive, trees = policy_extras_dict(self.adaptive, self.trees)
        return {**policy_dict(self.policy, self.configs), "adaptive": adaptive, "trees": trees, "inputs": self.inputs}

    def to_text(self) -> str:
        return policy_text(self.policy, self.configs, self.inputs, *policy_extras_dict(self.adaptive, self.trees))


@dataclass
class PlanResult:
    """`crossover plan`: the fleet each option needs for the demand under the SLOs, its cost, ranked;
    the one-line recommendation on top."""

    plan: Any  # planning.plan.FleetPlan
    inputs: dict[str, Any]

    @property
    def recommendation(self) -> str:
        """The plan in one line."""
        return self.plan.recommendation

    @property
    def options(self) -> list[Any]:
        """Options that serve the demand, best first (plan.Option)."""
        return self.plan.ranked

    def to_dict(self) -> dict[str, Any]:
        return {**plan_dict(self.plan), "inputs": self.inputs}

    def to_text(self) -> str:
        return plan_table(self.plan, self.inputs)


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

