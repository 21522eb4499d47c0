"""`crossover plan`'s JSON contract and its text table."""

from __future__ import annotations

from typing import Any


def plan_dict(res) -> dict[str, Any]:
    """The JSON contract of `crossover plan --json` (inputs added by the caller): the recommendation,
    every option (ranked ones with their rank, then the dropped ones with dropped_because), the demand
    and the pricing with its sources."""
    d = res.demand
    options = [{"rank": i, **o.to_dict()} for i, o in enumerate(res.ranked, 1)]
    options += [{"rank": None, **o.to_dict()} for o in res.dropped]
    return {"recommendation": res.recommendation, "warnings": res.warnings, "feasible": bool(res.ranked),
            "options": options,
            "demand": {"source": d.source, "peak_requests_per_s": round(d.peak_rps, 6),
                       "mean_requests_per_s": round(d.mean_rps, 6), "interval_s": d.interval_s,
                       "intervals": len(d.requests), "output_len": round(res.output_len, 3),
                       "naive_times_read_as": d.naive_times},
            "costs": res.costs.to_dict(), "unpriced": res.unpriced, "verified": res.verified,
            "retry_replicas": res.retry_replicas}


PLAN_ROWS = 20  # options the plan table shows (all of them in --json)


def _money(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def plan_table(res, inputs: dict[str, Any]) -> str:
    """The recommendation, the ranked options with their fleets and costs, and why the others dropped."""
    from ..planning.fleet import slo_label

    slo = ", ".join(f"{slo_label(k)} <= {v:g} ms" for k, v in res.slo.items())
    d = res.demand
    dem = (f"peak {d.peak_rps:.3g} req/s" + (f" (trace {d.source}: {len(d.requests)} intervals of {d.interval_s:g} s, "
                                             f"mean {d.mean_rps:.3g} req/s"
                                             + (f"; times without a zone read as {d.naive_times}" if d.naive_times
                                                else "") + ")" if d.is_trace else ""))
    c = res.costs
    basis = (f"{c.basis}" + ("" if c.basis == "rental" else f" over {c.years:g} years, PUE {c.pue:g}, "
                             + (f"power ${c.power_usd_per_kwh:g}/kWh" if c.power_usd_per_kwh else "power not priced")))
    lines = [res.recommendation, *res.warnings, "",
             f"{inputs['model']}, workload {inputs['workload']} (prompt {inputs['prompt_len']:.0f}, output "
             f"{inputs['output_len']:.0f}), {dem}; {slo}; speculation {inputs['method']} (tau {inputs['tau']:.2f} "
             f"at k={inputs['k']}, k <= {inputs['k_max']}); cost basis {basis}", "",
             f"{'rank':>4} {'hardware':<14} {'tp':>3} {'dtype':<9} {'spec':<7} {'k':>5} {'run':>5} {'repl':>5} "
             f"{'GPUs':>5} {'util':>5} {'$/month':>10} {'$/M tok':>8} {'sim p99 TPOT':>12}  note"]
    for i, o in enumerate(res.ranked[:PLAN_ROWS], 1):
        s = o.screened
        k = "-" if s.k is None else (f"<={s.k}" if o.arm == "routed" else str(s.k))
        sim = "-" if o.simulated is None else f"{o.simulated['p99_tpot_ms']:.1f}"
        notes = ["DEMOTED: " + o.demoted_because if o.demoted_because else f"verified, {o.retry_note}"
                 if o.retry_note else "verified" if o.simulated else "",
                 f"speculate below {s.speculate_below}" if s.speculate_below else "",
                 "unpriced" if o.usd_per_month is None else ""]
        note = "; ".join(n for n in notes if n)
        dt = o.weight_dtype if o.kv_dtype == "bf16" else f"{o.weight_dtype}/{o.kv_dtype}"
        tp = str(o.tp) if o.data_parallel == 1 else f"{o.tp}x{o.data_parallel}"  # TxD: D data-parallel ranks
        lines.append(f"{i:>4} {o.hardware:<14} {tp:>3} {dt:<9} {o.arm:<7} {k:>5} {s.batch:>5} {o.replicas:>5} "
                     f"{o.gpus:>5} {o.utilisation:>5.0%} {_money(o.usd_per_month):>10} "
                     f"{_money(o.usd_per_million_output_tokens, 3):>8} {sim:>12}  {note}".rstrip())
    if len(res.ranked) > PLAN_ROWS:
        lines.append(f"  ... {len(res.ranked) - PLAN_ROWS} more options in --json")
    if d.is_trace and res.ranked and res.ranked[0].autoscaled_usd_per_month is not None:
        o = res.ranked[0]
        lines += ["", f"off-peak: an autoscaler could release {o.autoscaled_replica_hours_share:.0%} of rank 1's "
                      f"replica-hours (${o.autoscaled_usd_per_month:,.0f} per month rented per interval)"]
    if res.unpriced:
        lines += ["", res.unpriced]
    verify = min(int(inputs.get("verify", res.verified)), res.verified)
    shown = res.ranked[:PLAN_ROWS]
    tp_said = "tp: TxD, D data-parallel ranks of T GPUs; " if any(o.data_parallel > 1 for o in shown) else ""
    lines += ["", f"{tp_said}run: running sequences per replica at capacity under the SLO; util: of the fleet's capacity at the "
                  f"peak; the best {verify} simulated at the peak (burstiness {inputs['burstiness']:g}"
                  + (f"; {res.verified} in all as options moved up" if res.verified > verify else "") + ")"
                  + (f"; one whose simulated latency misses its SLO, or whose simulated replica cannot keep up with "
                     f"its load, is simulated again with up to {res.retry_replicas} "
                     f"more replica{'s' if res.retry_replicas > 1 else ''}, else demoted" if res.retry_replicas
                     else "; demoted when a simulated latency misses its SLO or a simulated replica cannot keep up "
                          "with its load")]
    if res.dropped:
        lines += ["", "dropped:"]
        for o in res.dropped:
            lines.append(f"  {o.label}: {o.dropped_because}")
    return "\n".join(lines)
