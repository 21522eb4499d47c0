"""`crossover.sweep_plan`: the two-server sweep the model plans (issue 24). For a scenario (or a
calibrated one, or with a first measured sweep's files), the load levels to measure, the requests
and warm-up per level so the on/off throughput ratio's 95% interval is within `half_width` in the
simulator, and both arms' server launch lines and client commands, whose result files `crossover
measured` reads back with --on/--off alone. Nothing is run against a network.

    import crossover
    plan = crossover.sweep_plan(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3")
    print(plan.interval, [lv["load"] for lv in plan.levels], plan.to_dict()["servers"]["vllm"]["on"])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import defaults as d
from ..errors import CrossoverError, InputError, api_boundary
from .records import Record

Paths = Sequence[str | Path] | None
AXES = ("concurrency", "request_rate")
_ACCEPTANCE_KEYS = ("acceptance", "tau", "per_position")
MAX_LEVELS = 64  # serving.sweep's
RATE_HEADROOM = 0.95  # the highest request rate planned, of the slower arm's simulated capacity


@dataclass(frozen=True)
class SweepRequest(Record):
    """What the plan is asked for: the load axis (None: the measured sweep's, else concurrency), the
    highest load (`peak`; None: the memory limit), the number of levels, the target half-width of each
    level's on/off throughput ratio interval, the requests a level may take, the seed, the engine
    limits both servers are launched with (None: the engine's defaults on the GPU, with its own cap when
    speculating), the EAGLE head or draft id to write, the port, the folder the commands write their
    results under, and the client the text lists (--json lists all)."""

    load_axis: str | None = None
    peak: float | None = None
    levels: int = d.DEFAULT_SWEEP_PLAN_LEVELS
    half_width: float = d.DEFAULT_SWEEP_PLAN_HALF_WIDTH
    min_requests: int = d.DEFAULT_SWEEP_PLAN_MIN_REQUESTS
    max_requests: int = d.DEFAULT_SWEEP_PLAN_MAX_REQUESTS
    seed: int = d.DEFAULT_SEED
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    draft_model_id: str | None = None
    port: int = d.DEFAULT_SWEEP_PLAN_PORT
    results_dir: str = d.DEFAULT_SWEEP_PLAN_RESULTS_DIR
    client: str = d.DEFAULT_SWEEP_PLAN_CLIENT

    _what = "sweep"

    def checked(self) -> "SweepRequest":
        """This request, or a one-line InputError naming the field at fault."""
        from ..planning.sweep_commands import CLIENTS

        def whole(name: str, lo: int, hi: int | None = None) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
                span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                raise InputError(f"{name.replace('_', '-')} must be a whole number {span} (got {v!r})", parameter=name)

        if self.load_axis is not None and self.load_axis not in AXES:
            raise InputError(f"load axis must be concurrency or request_rate (got {self.load_axis!r})",
                             parameter="load_axis")
        hw = self.half_width
        if isinstance(hw, bool) or not isinstance(hw, (int, float)) or not 0 < hw < 1:
            raise InputError(f"half-width must be a number in (0, 1): the on/off ratio's 95% interval half-width "
                             f"(got {hw!r})", parameter="half_width")
        p = self.peak
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or not (math.isfinite(p) and p > 0)):
            raise InputError(f"peak must be a finite load > 0 (got {p!r})", parameter="peak")
        whole("levels", 1, 64)
        whole("min_requests", 2)
        whole("max_requests", 2)
        whole("seed", 0)
        if self.max_num_batched_tokens is not None:
            whole("max_num_batched_tokens", 1)
        whole("port", 1, 65535)
        if self.max_num_seqs is not None:
            whole("max_num_seqs", 1)
        if not isinstance(self.results_dir, str) or not self.results_dir.strip() or any(c in self.results_dir for c in "\n\r\0"):
            raise InputError(f"results dir must be a folder name (got {self.results_dir!r})", parameter="results_dir")
        if self.client not in CLIENTS:
            raise InputError(f"client must be one of {', '.join(CLIENTS)} (got {self.client!r})", parameter="client")
        return self


@dataclass
class SweepPlanResult:
    """`crossover sweep-plan`: the levels, their requests, the crossover interval they are dense
    across, the servers' launch lines and the clients' commands."""

    plan: dict[str, Any]
    inputs: dict[str, Any]

    @property
    def levels(self) -> list[dict[str, Any]]:
        return self.plan["levels"]

    @property
    def interval(self) -> tuple[float, float] | None:
        iv = self.plan["crossover"]["interval"]
        return None if iv is None else (iv[0], iv[1])

    def to_dict(self) -> dict[str, Any]:
        from ..reporting.sweep_plan import sweep_plan_dict

        return sweep_plan_dict(self.plan, self.inputs)

    def to_text(self) -> str:
        from ..reporting.sweep_plan import sweep_plan_text

        return sweep_plan_text(self.plan, self.inputs)


def _measured_interval(table, floor: float, top: float):
    """The measured sweep's crossing bracket (the levels either side), or the side it stayed on up to
    the plan's range."""
    from ..comparison.compare import measured_crossover
    from ..planning.sweep_plan import Interval

    m = measured_crossover(table)
    lo, hi = m["range"]
    if m["between"] is not None:
        return Interval(m["between"][0], m["between"][1], m["crossover"],
                        f"the measured sweep's crossing between {m['between'][0]:g} and {m['between'][1]:g}")
    if m["side"] == "on" and top > hi:
        return Interval(hi, top, None, f"the measured sweep stays faster with speculation up to {hi:g}")
    if m["side"] == "off" and lo > floor:
        return Interval(floor, lo, None, f"the measured sweep is slower with speculation from {lo:g}")
    return Interval(lo, hi, None, "the measured sweep's range (its ratio within noise of 1)")


def _calibration_interval(path: Any, axis: str):
    """A calibration file's `crossover_interval: [low, high]` (high null: beyond the sweep) on its
    `load_axis` (default concurrency), when the file records one."""
    from ..planning.sweep_plan import Interval
    from ..specs.loader import read_yaml

    data = read_yaml(Path(path))
    iv = data.get("crossover_interval") if isinstance(data, dict) else None
    if iv is None or data.get("load_axis", "concurrency") != axis:
        return None
    ok = isinstance(iv, list) and len(iv) == 2 and all(
        x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0) for x in iv)
    if not ok or iv[0] is None:
        raise CrossoverError(f"{path}: crossover_interval must be [low, high] loads > 0 (high null: beyond the sweep), "
                             f"got {iv!r}")
    return Interval(float(iv[0]), float(iv[1]) if iv[1] is not None else math.inf, None,
                    f"the calibration's bootstrap interval ({path})")


def _new_levels(interval, floor: float, top: float, n: int, integer: bool, done: list[float]) -> list[float]:
    """`n` levels (planning.sweep_plan.place_levels) none of which is measured already (`done`): more
    are placed until `n` are new, never fewer inside the interval than outside it."""
    from ..planning.sweep_plan import place_levels

    for count in range(n, MAX_LEVELS + 1):
        placed = [v for v in place_levels(interval, floor, top, count, integer)
                  if not any(math.isclose(v, x, rel_tol=1e-6) for x in done)]
        if len(placed) >= n:
            break
    if interval is not None:
        inside = [v for v in placed if interval.holds(v)]
        outside = [v for v in placed if not interval.holds(v)]
        # the measured levels were inside: keep the new ones there the most; one more placed level can
        # bring two new ones (n + 1): those beyond n go from outside first, from the middle
        while outside and (len(outside) > len(inside) or len(inside) + len(outside) > n):
            outside.pop(len(outside) // 2)
        while len(inside) > n:
            inside.pop(len(inside) // 2)
        placed = sorted(inside + outside)
    else:
        while len(placed) > n:
            placed.pop(len(placed) // 2)
    if not placed:
        raise CrossoverError("every planned level is measured already: give more --levels or a higher --peak")
    return placed


def _significant(x: float, rounding) -> float:
    """`x` to 3 significant digits, rounded down (math.floor) or up (math.ceil)."""
    scale = 10.0 ** (2 - math.floor(math.log10(x)))
    return float(f"{rounding(round(x * scale, 9)) / scale:.3g}")


@api_boundary
def sweep_plan(scenario=None, *, sweep: SweepRequest | Mapping[str, Any] | None = None, on: Paths = None,
               off: Paths = None, files: Paths = None, progress: Callable[[int, int, float], None] | None = None,
               **scenario_kwargs: Any) -> SweepPlanResult:
    """The sweep to measure for a scenario (or `crossover.scenario`'s keywords; the lengths default to
    1024 in / 128 out, or a measured sweep's): `sweep` (a SweepRequest or a mapping of its fields);
    `on` / `off` / `files`: a first measured sweep (as `crossover.measured` reads it) whose crossing
    bracket the plan refines, its levels left out and its tau and lengths used where none are given.
    `progress(levels done, levels, load)` follows the sizing."""
    from ..planning import sweep_commands as cmds
    from ..planning import sweep_plan as sp
    from ..serving.engine import EngineLimits
    from .build import scenario as build
    from .inputs import inputs

    req = SweepRequest.of(sweep).checked()
    table = None
    if on or off or files:
        from .sweeps import files_tau, measured

        table = measured(on=on, off=off, files=files, load_axis=req.load_axis).table
        if table.load_axis == "batch":
            raise CrossoverError("the measured sweep is against batch: a served sweep runs by concurrency or request rate")
    axis = req.load_axis or (table.load_axis if table is not None else d.DEFAULT_SWEEP_PLAN_LOAD_AXIS)
    if scenario is None:
        p_len, o_len = table.mean_lengths() if table is not None else (None, None)
        scenario_kwargs.setdefault("prompt_len", p_len or d.DEFAULT_SWEEP_PLAN_PROMPT_LEN)
        scenario_kwargs.setdefault("output_len", o_len or d.DEFAULT_SWEEP_PLAN_OUTPUT_LEN)
        if table is not None and files_tau(table) and all(scenario_kwargs.get(k) is None for k in _ACCEPTANCE_KEYS):
            scenario_kwargs["tau"] = files_tau(table)
        sc = build(**scenario_kwargs)
    elif scenario_kwargs:
        raise CrossoverError(f"give a scenario or scenario keywords, not both ({', '.join(scenario_kwargs)})")
    else:
        sc = scenario
    if sc.prompt_len is None or sc.output_len is None:
        raise CrossoverError("sweep-plan needs the scenario's prompt and output lengths (prompt_len, output_len)")
    lengths = (max(int(round(sc.prompt_len)), 1), max(int(round(sc.output_len)), 1))
    limits = EngineLimits.of(sc.deployment, req.max_num_seqs, req.max_num_batched_tokens)
    wl = sp.fixed_lengths(*lengths)
    how = sp.Sizing(float(req.half_width), req.min_requests, req.max_requests, req.seed, limits)
    caps = None
    ceiling = sp.fits(sc, *lengths)
    if ceiling < 1:
        raise CrossoverError(f"not one request of {lengths[0]} + {lengths[1]} tokens fits both arms' KV caches")
    top_batch = min(ceiling, limits.max_num_seqs)
    said = (f"the memory limit: {ceiling} requests of {sum(lengths)} tokens in both arms' KV caches"
            if ceiling <= limits.max_num_seqs else f"max-num-seqs {limits.max_num_seqs}, below the memory limit {ceiling}")
    if axis == "concurrency":
        floor, top = 1.0, float(top_batch)
        if req.peak is not None:
            if req.peak != int(req.peak) or req.peak > ceiling:
                raise InputError(f"peak concurrency {req.peak:g} must be a whole number of clients the KV caches hold "
                                 f"(at most {ceiling} requests of {sum(lengths)} tokens)", parameter="peak")
            top, said = float(req.peak), "the peak given"
    else:  # up to 95% of the slower arm's simulated capacity: above it that arm's queue grows without bound
        caps = sp.rate_capacities(sc, wl, how)
        floor = _significant(float(sp.rate_of_batch(sc, [1.0], lengths[1])[0]), math.floor)
        top = _significant(RATE_HEADROOM * min(caps.values()), math.floor)
        said = (f"{RATE_HEADROOM:.0%} of the slower arm's simulated capacity, {min(caps.values()):.3g} req/s with "
                f"{limits.max_num_seqs} running")
        if req.peak is not None:
            top, said = float(req.peak), "the peak given"
            floor = min(floor, top)
    if table is not None:
        interval = _measured_interval(table, floor, top)
    else:
        calibration = scenario_kwargs.get("calibration")
        interval = _calibration_interval(calibration, axis) if calibration is not None else None
        if interval is None:
            interval = sp.model_interval(sc, top_batch)
            if axis == "request_rate":
                interval = sp.batch_interval_as_rates(sc, interval, lengths[1])
    found = interval
    if interval is not None:  # inside the plan's range
        lo, hi = max(interval.low, floor), min(interval.high, top)
        interval = sp.Interval(lo, hi, interval.crossover, interval.source) if lo <= hi else None
    if interval is not None and axis == "request_rate":  # on the levels' grid of 3 significant digits
        interval = sp.Interval(max(_significant(interval.low, math.floor), floor),
                               min(_significant(interval.high, math.ceil), top), interval.crossover, interval.source)
    if interval is not None and axis == "concurrency" and math.ceil(interval.low) > math.floor(interval.high):
        interval = sp.Interval(math.floor(interval.low), math.ceil(interval.high), interval.crossover, interval.source)
    done = [float(x) for x in table.levels()[0]] if table is not None else []
    values = _new_levels(interval, floor, top, req.levels, axis == "concurrency", done)
    levels = sp.size_levels(sc, wl, axis, values, how, caps, progress)
    for lv in levels:
        lv["inside_interval"] = interval is not None and interval.holds(lv["load"])
    model, _ = cmds.model_id(sc)
    servers = cmds.server_lines(sc, limits, req.seed, req.port, req.draft_model_id)
    plan = {"load_axis": axis, "ratio_metric": "output throughput on/off" if axis == "concurrency" else
            "mean e2e latency off/on", "top": top, "top_source": said, "floor": floor, "lengths": lengths,
            "workload": wl.name, "half_width": float(req.half_width), "seed": req.seed,
            "limits": {"max_num_seqs": limits.max_num_seqs, "max_num_seqs_speculating": limits.seats(True),
                       "max_num_batched_tokens": limits.max_num_batched_tokens},
            "crossover": {"interval": None if interval is None else [interval.low, interval.high],
                          "estimate": None if found is None else found.crossover,
                          "source": None if found is None else found.source,
                          "found": None if found is None else [found.low, found.high]},
            "levels": levels, "measured_levels": done,
            "simulated_crossover": sp.simulated_crossover(axis, levels), "servers": servers,
            "clients": cmds.client_commands(axis, levels, model, lengths, req.seed, req.port, req.results_dir,
                                            sc.deployment.engine.sampling_params),
            "read_back": cmds.read_back(axis, values, req.results_dir, {"on": on, "off": off, "files": files}),
            "client": req.client,
            "releases": {"clients": cmds.CLIENT_RELEASES, "servers": cmds.SERVER_RELEASES},
            "results_dir": req.results_dir}
    return SweepPlanResult(plan, inputs(sc))
