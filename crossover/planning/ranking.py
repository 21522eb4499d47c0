"""The options a plan weighs and the plan itself: each option's fleet, cost and checks (`Option`), and
the ranking, the one-line recommendation, what it leaves unpriced and how close to the edge it runs
(`FleetPlan`). planning.plan fills them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .fleet import Screened, slo_label
from .pricing import Costs
from .traffic import Traffic

# The recommendation warns when its fleet runs close to the edge: above this share of its capacity at the
# peak, or a simulated latency within this share of its SLO (a burst or a forecast error crosses it).
HEADROOM_UTILISATION = 0.85
HEADROOM_SLO_MARGIN = 0.05


@dataclass
class Option:
    """One way to serve the demand: a replica's deployment and arm, the fleet, its cost, its checks."""

    hardware: str
    tp: int
    weight_dtype: str
    kv_dtype: str
    max_num_seqs: int
    arm: str
    screened: Screened = field(default_factory=lambda: Screened("all"))
    replicas: int | None = None
    utilisation: float | None = None  # of the fleet's capacity at the peak
    mean_utilisation: float | None = None  # over the whole demand (a trace's mean rate)
    rental_usd_per_month: float | None = None
    ownership_usd_per_month: float | None = None
    usd_per_month: float | None = None  # on the ranking basis
    usd_per_million_output_tokens: float | None = None  # the demand's tokens, at the SLO
    usd_per_million_at_capacity: float | None = None  # one replica fully used, at the SLO
    autoscaled_usd_per_month: float | None = None  # trace: renting per interval what it needs
    data_parallel: int = 1  # ranks of tp GPUs in one replica (Deployment.data_parallel)
    autoscaled_replica_hours_share: float | None = None
    price_missing: str | None = None
    simulated: dict[str, float] | None = None
    demoted_because: str | None = None
    replicas_added: int = 0  # replicas added over the analytic sizing for the simulator's p99s to meet the SLO
    retried_because: str | None = None  # the simulated miss at the analytic sizing that the added replicas fixed

    @property
    def dropped_because(self) -> str | None:
        return self.screened.dropped_because

    @property
    def retry_note(self) -> str | None:
        """'+1 replica after simulation: p99 TTFT 234.0 ms > SLO 150 ms with 1 replica', or None."""
        if not self.replicas_added or self.replicas is None or not self.retried_because:
            return None
        n, was = self.replicas_added, self.replicas - self.replicas_added
        miss = self.retried_because.rsplit(" at ", 1)[0].replace("simulated ", "")
        return f"+{n} replica{'s' if n > 1 else ''} after simulation: {miss} with {was} replica{'s' if was > 1 else ''}"

    @property
    def replica_gpus(self) -> int:
        """GPUs of one replica: its data-parallel ranks of tp each."""
        return self.tp * self.data_parallel

    @property
    def gpus(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.replica_gpus

    @property
    def layout(self) -> str:
        """'tp 8', or 'tp 1 dp 8' with data parallelism."""
        return f"tp {self.tp}" + (f" dp {self.data_parallel}" if self.data_parallel > 1 else "")

    @property
    def label(self) -> str:
        return f"{self.hardware} {self.layout} {self.weight_dtype}/{self.kv_dtype} {self.arm}"

    def to_dict(self) -> dict[str, Any]:
        s = self.screened
        r = lambda x, n=4: None if x is None else round(float(x), n)  # noqa: E731
        return {"hardware": self.hardware, "tp": self.tp, "data_parallel": self.data_parallel,
                "weight_dtype": self.weight_dtype,
                "kv_dtype": self.kv_dtype, "max_num_seqs": self.max_num_seqs, "speculation": self.arm,
                "k": s.k, "k_schedule": s.schedule, "speculate_below_running": s.speculate_below,
                "running_per_replica": s.batch, "tokens_per_s_per_replica": r(s.tokens_per_s, 2),
                "tokens_per_s_per_gpu": r(s.tokens_per_s / self.replica_gpus, 2) if s.batch else None,
                "requests_per_s_per_replica": r(s.requests_per_s),
                "analytic_ms": {k: r(v, 3) for k, v in s.latency.items()},
                "replicas": self.replicas, "gpus": self.gpus, "utilisation": r(self.utilisation),
                "headroom": r(None if self.utilisation is None else 1.0 - self.utilisation),
                "mean_utilisation": r(self.mean_utilisation), "usd_per_month": r(self.usd_per_month, 2),
                "rental_usd_per_month": r(self.rental_usd_per_month, 2),
                "ownership_usd_per_month": r(self.ownership_usd_per_month, 2),
                "usd_per_million_output_tokens": r(self.usd_per_million_output_tokens),
                "usd_per_million_output_tokens_at_capacity": r(self.usd_per_million_at_capacity),
                "autoscaled_usd_per_month": r(self.autoscaled_usd_per_month, 2),
                "autoscaled_replica_hours_share": r(self.autoscaled_replica_hours_share),
                "price_missing": self.price_missing,
                "simulated": None if self.simulated is None else {k: r(v, 3) for k, v in self.simulated.items()},
                "demoted_because": self.demoted_because, "replicas_added": self.replicas_added,
                "retried_because": self.retried_because, "dropped_because": self.dropped_because}


@dataclass
class FleetPlan:
    """Every option; `ranked` (verified and passing first, then by cost), `dropped`, the recommendation."""

    options: list[Option]
    demand: Traffic
    slo: dict[str, float]
    costs: Costs
    output_len: float
    verified: int = 0
    retry_replicas: int = 0

    @property
    def ranked(self) -> list[Option]:
        """Options that serve the demand under the SLOs: passing ones first, demoted ones last, each
        by cost on the basis (unpriced after priced), then GPUs."""
        ok = [o for o in self.options if o.dropped_because is None]
        return sorted(ok, key=lambda o: (o.demoted_because is not None, o.usd_per_month is None,
                                         o.usd_per_month or 0.0, o.gpus, o.utilisation or 0.0,
                                         (o.simulated or {}).get("p99_tpot_ms", math.inf)))

    @property
    def dropped(self) -> list[Option]:
        """Options that do not fit, or miss the SLO at every load, each with why."""
        return [o for o in self.options if o.dropped_because is not None]

    @property
    def closest(self) -> Option | None:
        """When nothing meets the SLO: the dropped option that misses it by the least."""
        near = [o for o in self.dropped if o.screened.miss > 0]
        return min(near, key=lambda o: o.screened.miss) if near else None

    @property
    def recommendation(self) -> str:
        """The plan in one line."""
        ranked = self.ranked
        if not ranked:
            c = self.closest
            if c is None:
                return "no option fits: every deployment was refused (see dropped_because)"
            return f"no option meets the SLO; closest: {c.label} ({c.dropped_because.split(': ', 1)[-1]})"
        o = ranked[0]
        s = o.screened
        verb = "rent" if self.costs.basis == "rental" else "buy"
        dt = o.weight_dtype + (f" weights, {o.kv_dtype} KV" if o.kv_dtype != "bf16" else " weights")
        shape = f"TP-{o.tp}" + (f" x DP-{o.data_parallel}" if o.data_parallel > 1 else "")
        line = f"{verb} {o.gpus} x {o.hardware} as {o.replicas} {shape} replicas ({dt}), "
        if o.arm == "off":
            line += "speculation off"
        elif o.arm == "on":
            line += f"speculation on (k={s.k})"
        else:
            ks = " -> ".join(str(r["k"]) for r in s.schedule or [])
            line += (f"speculation on below {s.speculate_below} running sequences per replica (k {ks})"
                     if s.speculate_below else f"speculation routed by load (k {ks})")
        if o.usd_per_month is not None:
            line += f"; ${o.usd_per_month:,.0f} per month; ${o.usd_per_million_output_tokens:.3f} per million output tokens"
        else:
            line += f"; cost unknown: {o.price_missing}"
        if o.retry_note:
            line += f" ({o.retry_note})"
        elif self.verified and o.simulated is None:
            line += " (not simulated: the simulated options ranked below it)"
        if o.demoted_because:
            line += f" (no option passed the simulator: {o.demoted_because})"
        unpriced = [u for u in ranked if u.usd_per_month is None]
        if unpriced and o.usd_per_month is not None:
            names = ", ".join(sorted({u.hardware for u in unpriced}))
            line += f"; {len(unpriced)} of {len(ranked)} options unpriced ({names}), ranked after the priced ones"
        return line

    @property
    def warnings(self) -> list[str]:
        """How close the recommended fleet runs to the edge, one line each (empty: headroom): its
        utilisation at the peak above HEADROOM_UTILISATION, a simulated latency within
        HEADROOM_SLO_MARGIN of its SLO."""
        if not self.ranked:
            return []
        o, out = self.ranked[0], []
        if o.utilisation is not None and o.utilisation > HEADROOM_UTILISATION:
            more = self.demand.peak_rps / ((o.replicas + 1) * o.screened.requests_per_s)  # type: ignore[operator]
            out.append(f"warning: little headroom: rank 1 runs at {o.utilisation:.0%} of its fleet's capacity at the "
                       f"peak (above {HEADROOM_UTILISATION:.0%}); {1.0 / o.utilisation - 1.0:.0%} more load than "
                       f"planned exceeds it (one more replica: {more:.0%})")
        for key, limit in self.slo.items():
            v = (o.simulated or {}).get(key)
            if v is not None and (1.0 - HEADROOM_SLO_MARGIN) * limit <= v <= limit:
                out.append(f"warning: little headroom: rank 1's simulated {slo_label(key)} {v:.1f} ms is within "
                           f"{HEADROOM_SLO_MARGIN:.0%} of its SLO {limit:g} ms ({v / limit:.0%} of it)")
        return out

    @property
    def unpriced(self) -> str | None:
        """Which options have no cost on the ranking basis and how to price them, in one line (None:
        every option is priced)."""
        missing = [o for o in self.ranked if o.usd_per_month is None and o.price_missing]
        if not missing:
            return None
        kinds: dict[str, list[str]] = {}  # 'no rental price' -> hardware names (pricing.Costs.missing's words)
        for o in missing:
            kind = o.price_missing.split(" for ", 1)[0]  # type: ignore[union-attr]
            if o.hardware not in kinds.setdefault(kind, []):
                kinds[kind].append(o.hardware)
        what = "; ".join(f"{kind} in hardware/*.yaml for {', '.join(sorted(names))}" for kind, names in kinds.items())
        how = []
        if "no rental price" in kinds:
            how.append("--price " + ",".join(f"{h}=USD" for h in sorted(kinds["no rental price"])) + " (per GPU-hour)")
        file_keys = [key for kind, key in (("no purchase price", "purchase_usd_per_gpu"), ("no board power", "tdp_w"))
                     if kind in kinds]
        how.append("--price-file FILE" + (f" ({' and '.join(file_keys)} per GPU name)" if file_keys else ""))
        return (f"unpriced: {len(missing)} of {len(self.ranked)} options ({what}; cost shown as -); price them with "
                f"{' or '.join(how)}")


__all__ = ["HEADROOM_SLO_MARGIN", "HEADROOM_UTILISATION", "Option", "FleetPlan"]
