"""What `predict --breakdown` prints: one batch's steps off and on, per op of the target forward and
per term of `StepModel.price`, so that the rows add up to the step (the kernel gaps and an eager
forward's launch floor included)."""

from __future__ import annotations

import numpy as np

from .graphs import replayed
from .speculation import Speculation
from .step import StepBreakdown, StepModel
from .step_terms import host_seconds


def op_breakdown(model: StepModel, batch: float, context: float, spec: Speculation) -> dict:
    """One batch's steps off and on, per op of the target forward (ms, the bound each op hit and
    which cost mode priced it) and per step term (ms): what `predict --breakdown` prints."""
    b = np.array([float(batch)])
    mix_on = model.decode(b, context, spec)
    off = model.price(model.decode(b, context), detail=True)
    on = model.price(mix_on, detail=True)
    marks_off = getattr(off.target, "priced_by", {})
    marks_on = getattr(on.target, "priced_by", {})
    ops_off, ops_on = off.ops, on.ops
    rows = []
    gaps_off, gaps_on = (float(np.broadcast_to(x.target.overhead, (1,))[0]) for x in (off, on))
    for name in ops_on:
        o, n = ops_off.get(name), ops_on[name]
        rows.append({"op": name, "off_ms": None if o is None else round(float(o.time[0]) * 1e3, 6),
                     "on_ms": round(float(n.time[0]) * 1e3, 6), "bound_on": str(n.bound[0]),
                     "priced_by": marks_on.get(name, marks_off.get(name, model.cost.name))})
    # the per-layer kernel gaps of the forward (launch floors inside the graph): part of target_forward
    rows.append({"op": "kernel_gaps", "off_ms": round(gaps_off * 1e3, 6), "on_ms": round(gaps_on * 1e3, 6),
                 "bound_on": "overhead", "priced_by": model.cost.name})
    # an eager forward takes at least its layers' launch time: what that floor adds to the kernels
    floor_off, floor_on = (float(x.term("target_forward")[0] - np.broadcast_to(x.target.total, (1,))[0])
                           for x in (off, on))
    if floor_off > 0 or floor_on > 0:
        rows.append({"op": "eager_launch_floor", "off_ms": round(floor_off * 1e3, 6), "on_ms": round(floor_on * 1e3, 6),
                     "bound_on": "host", "priced_by": "engine profile"})
    terms = {t: {"off_ms": round(float(off.term(t)[0]) * 1e3, 6), "on_ms": round(float(on.term(t)[0]) * 1e3, 6)}
             for t in StepBreakdown.TERMS}
    dep = model.deployment
    n = dep.data_parallel  # with data parallelism the step is the busiest rank's, its graph a rank's
    rank_off, rank_on = (m.busiest_rank(n) if n > 1 else m for m in (model.decode(b, context), mix_on))
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
           "total_off_ms": round(float(off.total[0]) * 1e3, 6), "total_on_ms": round(float(on.total[0]) * 1e3, 6)}
    if n > 1:
        out["data_parallel"] = {"ranks": n, "busiest_rank_sequences": float(np.ravel(rank_off.target.tokens)[0]),
                                "moe": dep.model.moe is not None}
    return out
