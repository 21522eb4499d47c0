"""Check measured points against what physics allows: the roofline at 100% of peak, no overhead.

Two bounds per point, named as such: decode only (pure decode at the prompt length, the least work
any request can need: faster than that is impossible), and with the sweep's prefill share (each
request's prompt prefilled too, from the files' token counts or --prompt-len / --output-len): faster
than that beats physics unless prefix caching skipped the prompts' prefill."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

# The step model and the specs are imported by the checks that price a bound: files_model and
# BoundCheck need neither (a sweep read without a model).
if TYPE_CHECKING:
    from ..model.scenario import Scenario

LIKELY_CAUSES = ("prefix caching (prompts' KV reused, so prefill and KV reads are skipped)",
                 "a different model, TP degree or GPU than the one checked",
                 "wrong units (total tokens/s read as output tokens/s, or tokens/s per GPU x GPUs)",
                 "speculation actually on in a file marked off")


@dataclass
class BoundCheck:
    """One measured point against its speed-of-light bound."""

    arm: str
    load: float
    measured: float  # output tokens/s
    bound: float  # output tokens/s at 100% of peak bandwidth and FLOP/s, no overhead
    source: str = ""
    batch: float | None = None  # requests in flight the bound was taken at (None: the load itself)
    bound_prefill: float | None = None  # output tokens/s with the sweep's prefill share (None: lengths unknown)

    @property
    def fraction(self) -> float:
        """measured / bound: how much of the physical limit the point reached."""
        return self.measured / self.bound

    @property
    def beats_physics(self) -> bool:
        """True when the measurement is faster than the hardware allows (the decode-only bound)."""
        return self.measured > self.bound

    @property
    def beats_prefill(self) -> bool:
        """True when the measurement is within the decode-only bound but faster than the bound with the
        sweep's prefill share: impossible unless prefix caching is on."""
        return self.bound_prefill is not None and self.bound_prefill < self.measured <= self.bound


class BoundChecks(Sequence[BoundCheck]):
    """The bound checks of a sweep as columns, by increasing load (10,000s of measured points: one
    array each instead of an object per point); indexing or iterating gives BoundCheck objects."""

    def __init__(self, on, load, measured, bound, batch, sources: list[str], bound_prefill=None,
                 lengths: tuple[float, float] | None = None) -> None:
        self.on = np.asarray(on, bool)
        self.load, self.measured, self.bound, self.batch = (np.asarray(a, float) for a in (load, measured, bound, batch))
        self.sources = list(sources)
        # with the prefill share (NaN: the sweep's lengths unknown), and the (prompt, output) tokens it used
        self.bound_prefill = np.full(len(self.on), np.nan) if bound_prefill is None else np.asarray(bound_prefill, float)
        self.lengths = lengths

    @classmethod
    def of(cls, checks) -> "BoundChecks":
        """`checks` (BoundCheck objects, or already columns) as columns; a missing batch is the load."""
        if isinstance(checks, BoundChecks):
            return checks
        checks = list(checks)
        return cls([c.arm == "on" for c in checks], [c.load for c in checks], [c.measured for c in checks],
                   [c.bound for c in checks], [c.load if c.batch is None else c.batch for c in checks],
                   [c.source for c in checks],
                   [np.nan if c.bound_prefill is None else c.bound_prefill for c in checks])

    def __len__(self) -> int:
        return len(self.on)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        pre = float(self.bound_prefill[i])
        return BoundCheck("on" if self.on[i] else "off", float(self.load[i]), float(self.measured[i]),
                          float(self.bound[i]), self.sources[i], float(self.batch[i]), None if pre != pre else pre)

    def __eq__(self, other: object) -> bool:
        """Equal to another sequence of the same checks (a list of BoundCheck included)."""
        if not isinstance(other, (BoundChecks, list, tuple)):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BoundChecks({len(self)} points, {int(self.beats.sum())} beat physics)"

    @property
    def fraction(self) -> np.ndarray:
        """measured / bound of every point."""
        return self.measured / self.bound

    @property
    def beats(self) -> np.ndarray:
        """Which points are faster than the hardware allows."""
        return self.measured > self.bound

    @property
    def beats_prefill(self) -> np.ndarray:
        """Which points are within the decode-only bound but faster than the one with the sweep's prefill
        share: impossible unless prefix caching is on."""
        with np.errstate(invalid="ignore"):
            return ~self.beats & (self.measured > self.bound_prefill)

    @property
    def impossible(self) -> np.ndarray:
        """Points beyond either bound (the second: unless prefix caching is on)."""
        return self.beats | self.beats_prefill

    def beaten(self, at=None, prefill: bool = False) -> list[BoundCheck]:
        """The checks beaten (with `prefill`: beyond either bound), or only those at the loads in `at`."""
        hit = self.impossible if prefill else self.beats
        if at is not None:
            hit = hit & np.isin(self.load, np.asarray(list(at), float))
        return [self[i] for i in np.flatnonzero(hit).tolist()]


def speed_of_light(sc: Scenario, tau_bound: float | None = None) -> Scenario:
    """The scenario at 100% of peak with no overheads; with speculation at its most generous tau."""
    from ..model.scenario import Scenario
    from ..specs.deployment import Efficiency
    from ..model.acceptance import Acceptance

    dep = sc.deployment.model_copy(update={"efficiency": Efficiency.speed_of_light()})
    spec = sc.speculation
    tau = tau_bound if tau_bound is not None else spec.k + 1 - 1e-9
    # the measured (or the largest possible) tokens per step, as a chain
    best = replace(spec, acceptance=Acceptance.mean_length(min(tau, spec.k + 1 - 1e-9)), tree=None,
                   tree_paths=None)
    # Pure decode at the prompt length: the least work any request of the sweep can need.
    ctx = sc.prompt_len if sc.prompt_len is not None else sc.context
    return Scenario(dep, best, float(ctx))


def in_flight(p, sc: Scenario) -> float:
    """Requests in flight at a measured point: its concurrency or batch; for a request rate, Little's
    law (rate x mean end-to-end latency) when the file has the latency, else the most the KV cache
    holds (the loosest bound that is still a bound)."""
    if getattr(p, "load_axis", "concurrency") != "request_rate":
        return float(p.load)
    e2el = (getattr(p, "metrics", None) or {}).get("mean_e2el_ms")
    if e2el:
        return max(float(p.load) * e2el / 1e3, 1.0)
    from ..model import memory

    peak = sc.prompt_len + sc.output_len if sc.mixed else sc.context  # type: ignore[operator]
    return float(max(memory.max_batch(sc.deployment, peak), 1))


def check(sc: Scenario, points) -> BoundChecks:
    """Bound checks for measured points (objects with arm, load, output_throughput, acceptance_length;
    load_axis and metrics when the load is a request rate), or for every row of a MeasuredTable, by
    increasing load."""
    if hasattr(points, "columns"):
        return _check_columns(sc, points.columns)
    pts = sorted(points, key=lambda q: (q.load, q.arm != "off", q.source))  # by load, off first
    if not pts:
        return BoundChecks([], [], [], [], [], [])
    batches = np.array([in_flight(p, sc) for p in pts], float)
    tau = np.array([np.nan if p.acceptance_length is None else p.acceptance_length for p in pts], float)
    on = np.array([p.arm == "on" for p in pts], bool)
    return BoundChecks(on, [p.load for p in pts], [p.output_throughput for p in pts], _bounds(sc, on, tau, batches),
                       batches, [p.source for p in pts], _prefill_bounds(sc, on, tau, batches), _lengths(sc))


def _lengths(sc: Scenario) -> tuple[float, float] | None:
    """(prompt, output) tokens per request of the sweep, when known (the prefill-share bound needs both)."""
    return (float(sc.prompt_len), float(sc.output_len)) if sc.prompt_len and sc.output_len else None


def _prefill_bounds(sc: Scenario, on: np.ndarray, tau: np.ndarray, batches: np.ndarray) -> np.ndarray | None:
    """Output tokens/s at the speed of light with the sweep's prefill share (None: lengths unknown).

    In steady state at b requests in flight, a step of t seconds prefills r prompts (each yields its
    first token) while the other b - r sequences decode y tokens each (1 off, the point's tau on):
    b y - r (y - 1) tokens per step, and as many requests finish as start, r = T t / o for T tokens/s
    and o output tokens per request. So T t = b y / (1 + (y - 1) / o), r = b y / (o + y - 1), and
    T = b y / (t (1 + (y - 1) / o)) with t the speed-of-light step of b - r decoding sequences (at the
    prompt length, the least context) and r prompts of p tokens. r is fractional: chunked prefill may
    split a prompt over steps, and a step's time at the speed of light (the larger of its bytes / peak
    bandwidth and FLOPs / peak FLOP/s) is convex in the tokens it carries, so real steps of whole
    prompts average at least t. Prefix caching skips prefill: a point above this bound beats physics
    unless it is on."""
    lengths = _lengths(sc)
    if lengths is None or not len(on):
        return None
    from ..model.step import StepModel

    p_len, o_len = lengths
    sol = speed_of_light(sc)
    tau_max = sol.speculation.tau
    y = np.where(on, np.where(np.isnan(tau) | (tau == 0), tau_max, np.minimum(tau, tau_max)), 1.0)
    r = np.minimum(batches * y / (o_len + y - 1.0), batches)
    model = StepModel.of(sol.deployment, sol.speculation)
    t = np.empty(len(on))
    for arm in (False, True):
        rows = np.flatnonzero(on == arm)
        if len(rows):
            mix = model.with_prompts(batches[rows] - r[rows], r[rows], p_len, p_len, sol.speculation if arm else None)
            t[rows] = model.price(mix).total
    return batches * y / (t * (1.0 + (y - 1.0) / o_len))


def _bounds(sc: Scenario, on: np.ndarray, tau: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """Output tokens/s at the speed of light of each point (speculating where `on`, at its measured
    tau, NaN or 0: the most generous) with `batches` requests in flight. One evaluation for every
    point: the speed-of-light step is a chain at k, whatever its tau, so a point's on-bound is the
    bound at the largest tau scaled by its own tau (tokens/s = batch x tau / step)."""
    from .curves import evaluate

    sol = speed_of_light(sc)
    tau_max = sol.speculation.tau
    curve = evaluate(sol, batches)
    tau = np.where(np.isnan(tau) | (tau == 0), tau_max, np.minimum(tau, tau_max))
    return np.where(on, np.asarray(curve.tokens_per_s_on, float) * tau / tau_max,
                    np.asarray(curve.tokens_per_s_off, float))


def _check_columns(sc: Scenario, c) -> BoundChecks:
    """`check` on a table's column arrays (measurements.Columns): the same bounds, in the same order."""
    n = len(c)
    if not n:
        return BoundChecks([], [], [], [], [], [])
    sources = c.sources(np.arange(n))
    order = np.lexsort((c.on, c.load))  # by load, off first, then source (where load and arm tie)
    x, a = c.load[order], c.on[order]
    if ((x[1:] == x[:-1]) & (a[1:] == a[:-1])).any():
        order = np.lexsort((np.array(sources), c.on, c.load))
    load = c.load[order]
    batches = load.copy()
    rate = np.flatnonzero(c.axis[order] == 1)  # LOAD_AXES[1]: request_rate, where Little's law applies
    if len(rate):
        e2el = c.metric("mean_e2el_ms")[order][rate]
        known = ~np.isnan(e2el) & (e2el != 0)
        batches[rate[known]] = np.maximum(load[rate[known]] * e2el[known] / 1e3, 1.0)
        if not known.all():
            from ..model import memory

            peak = sc.prompt_len + sc.output_len if sc.mixed else sc.context  # type: ignore[operator]
            batches[rate[~known]] = float(max(memory.max_batch(sc.deployment, peak), 1))
    on, tau = c.on[order], c.acceptance_length[order]
    return BoundChecks(on, load, c.output_throughput[order], _bounds(sc, on, tau, batches), batches,
                       [sources[i] for i in order.tolist()], _prefill_bounds(sc, on, tau, batches), _lengths(sc))


def _ids_of(model) -> set[str]:
    """The names a library model answers to, lower case: its spec name, its Hugging Face id and
    aliases, each also without the organisation prefix."""
    out = {model.name.lower()}
    for hf in (model.hf_repo, *model.aliases):
        if hf:
            out |= {hf.lower(), hf.lower().split("/")[-1]}
    return out


def files_model(ids: list[str]) -> str | None:
    """The library model the measured files name (their `model_id`: a spec name, Hugging Face id or
    alias, exact up to case and the organisation prefix); None when they name none or one that is not
    in the library; a one-line error when the names fit several models or the files disagree."""
    if not ids:
        return None
    from ..errors import CrossoverError
    from ..specs.loader import available, load_file

    models = []
    for path in available("models").values():
        try:
            models.append(load_file(path, "models"))
        except CrossoverError:
            continue
    found: dict[str, set[str]] = {}
    for ref in ids:
        want = {ref.strip().lower(), ref.strip().lower().split("/")[-1]}
        hits = {m.name for m in models if want & _ids_of(m)}
        if hits:
            found[ref] = hits
    names = set().union(*found.values()) if found else set()
    if len(names) > 1:
        which = "; ".join(f"{ref!r} -> {', '.join(sorted(h))}" for ref, h in found.items())
        raise CrossoverError(f"the files' model_id fits more than one library model ({which}); give --model")
    return names.pop() if names else None
