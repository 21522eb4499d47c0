"""What `predict --breakdown` prints: one batch's steps off and on, per op of the target forward and
per term of `StepModel.price`, so that the rows add up to the step (the kernel gaps and an eager
forward's launch floor included). With the prefill share (prompt and output lengths) the step is the
mean one the prediction's row prices: the steps carrying floor(r) and ceil(r) prompts, weighted."""

from __future__ import annotations

import numpy as np

from .graphs import replayed
from .speculation import Speculation
from .step import StepBreakdown, StepModel, prompts_per_step
from .step_terms import host_seconds


def _steps(model: StepModel, batch: float, context: float, spec: Speculation | None,
           prompts: tuple[float, float] | None, tokens: float) -> list[tuple[object, float, float]]:
    """(mix, weight, prompts it carries) of the steps whose mean the prediction prices at `batch` (one step for pure decode)."""
    b = np.array([float(batch)])
    if prompts is None:
        return [(model.decode(b, context, spec), 1.0, 0.0)]
    prompt_len, output_len = prompts
    lo, frac = (float(x[0]) for x in prompts_per_step(b, tokens, output_len))
    return [(model.with_prompts(np.maximum(b - n, 0.0), np.array([n]), prompt_len, context, spec), w, n)
            for n, w in ((lo, 1.0 - frac), (lo + 1.0, frac)) if w > 0.0]


def op_breakdown(model: StepModel, batch: float, context: float, spec: Speculation,
                 prompts: tuple[float, float] | None = None) -> dict:
    """One batch's steps off and on, per op of the target forward (ms, the bound each op hit and
    which cost mode priced it) and per step term (ms): what `predict --breakdown` prints. `prompts`
    (prompt_len, output_len): the mean step with the prefill share, as analysis.curves prices it."""
    arms = {"off": _steps(model, batch, context, None, prompts, 1.0),
            "on": _steps(model, batch, context, spec, prompts, spec.tau)}
    priced = {arm: [(model.price(m, detail=True), w) for m, w, _ in steps] for arm, steps in arms.items()}

    def mean(arm: str, value) -> float:  # the weighted mean over the arm's steps, in ms
        return round(sum(w * float(np.ravel(value(p))[0]) for p, w in priced[arm]) * 1e3, 6)

    main = {arm: max(range(len(p)), key=lambda i: p[i][1]) for arm, p in priced.items()}  # the commoner step
    on_main = priced["on"][main["on"]][0]
    marks = {arm: getattr(priced[arm][main[arm]][0].target, "priced_by", {}) for arm in priced}
    names = list(dict.fromkeys(n for p, _ in priced["on"] for n in p.ops))
    off_names = {n for p, _ in priced["off"] for n in p.ops}
    rows = []
    for name in names:
        time = lambda p, n=name: p.ops[n].time if n in p.ops else 0.0  # noqa: E731
        bound = on_main.ops[name].bound[0] if name in on_main.ops else next(p.ops[name].bound[0] for p, _ in priced["on"] if name in p.ops)
        rows.append({"op": name, "off_ms": mean("off", time) if name in off_names else None, "on_ms": mean("on", time),
                     "bound_on": str(bound), "priced_by": marks["on"].get(name, marks["off"].get(name, model.cost.name))})
    # the per-layer kernel gaps of the forward (launch floors inside the graph): part of target_forward
    rows.append({"op": "kernel_gaps", "off_ms": mean("off", lambda p: p.target.overhead),
                 "on_ms": mean("on", lambda p: p.target.overhead), "bound_on": "overhead", "priced_by": model.cost.name})
    # an eager forward takes at least its layers' launch time: what that floor adds to the kernels
    floor = {arm: mean(arm, lambda p: p.term("target_forward") - np.ravel(p.target.total)[0]) for arm in priced}
    if floor["off"] > 0 or floor["on"] > 0:
        rows.append({"op": "eager_launch_floor", "off_ms": floor["off"], "on_ms": floor["on"],
                     "bound_on": "host", "priced_by": "engine profile"})
    terms = {t: {"off_ms": mean("off", lambda p, t=t: p.term(t)), "on_ms": mean("on", lambda p, t=t: p.term(t))}
             for t in StepBreakdown.TERMS}
    dep = model.deployment
    n = dep.data_parallel  # with data parallelism the step is the busiest rank's, its graph a rank's
    rank_off, rank_on = (m.busiest_rank(n) if n > 1 else m for m in (arms["off"][main["off"]][0], arms["on"][main["on"]][0]))
    graphs = {"off": replayed(rank_off.target.tokens, 0.0, dep.engine, False),
              "on": replayed(rank_on.target.tokens, rank_on.verifying, dep.speculating_engine, True)}
    per, fixed = dep.host_per_seq_s, dep.host_per_step_s  # the host work, and whether each server hides it

    def work(mix) -> float:  # all of it, hidden or not
        return float(np.ravel(host_seconds(dep, mix, 0.0, False))[0]) * 1e3

    host = None if per <= 0.0 and fixed <= 0.0 else {
        "per_seq_us": per * 1e6, "per_step_us": fixed * 1e6,
        "off": {"ms": work(rank_off), "overlapped": dep.engine.overlaps(None)},
        "on": {"ms": work(rank_on), "overlapped": model.overlap_on}}
    out = {"batch": float(batch), "context": float(context), "ops": rows, "terms": terms, "graphs": graphs, "host": host,
           "total_off_ms": mean("off", lambda p: p.total), "total_on_ms": mean("on", lambda p: p.total)}
    if prompts is not None:  # the steps averaged: how many prompts each carries and its share of the steps
        out["prompts"] = {"prompt_len": float(prompts[0]), "output_len": float(prompts[1]),
                          **{arm: [{"prompts": c, "share": w} for _, w, c in steps] for arm, steps in arms.items()}}
    if n > 1:
        out["data_parallel"] = {"ranks": n, "busiest_rank_sequences": float(np.ravel(rank_off.target.tokens)[0]),
                                "moe": dep.model.moe is not None}
    return out
