"""Capacity planning: every hardware x TP x weight/KV dtype x speculation arm (off, on at its best k,
routed by load) x max running sequences, each replica at its capacity under the SLOs (fleet.screen),
the fleet that serves the demand's peak, what it costs (pricing), ranked; the best few verified in
the serving simulator at the planned load and demoted when a simulated latency misses its SLO or the
simulated replica cannot keep up with its load (it completes less than KEEP_UP of the requests offered)."""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..model.scenario import Scenario
from ..defaults import (
    DEFAULT_BURSTINESS,
    DEFAULT_KV_DTYPE,
    DEFAULT_RETRY_REPLICAS,
    DEFAULT_SEED,
    DEFAULT_SIM_PROMPTS,
    DEFAULT_VERIFY,
    PLAN_TP,
)
from ..errors import CrossoverError
from .fleet import SLO_KEYS, Curve, Screened, autoscaled_replicas, check_slo, replicas_for, screen, slo_label
from .ranking import FleetPlan, Option
from .pricing import HOURS_PER_MONTH, Costs
from ..serving.engine import MAX_NUM_SEQS, EngineLimits
from ..serving.sweep import run_level
from ..specs.deployment import Deployment
from ..specs.parallel import dp_problem, tp_problem
from ..specs.hardware import Hardware
from ..specs.model import Model
from ..model.speculation import MAX_K, Speculation
from .traffic import Traffic
from ..units import DTYPE_BYTES
from ..specs.workload import Workload

ARMS = ("off", "on", "routed")
MAX_REPLICAS = 2.0**53  # a fleet larger than this (replicas, counted exactly as floats and int64) is an overflow
KEEP_UP = 0.95  # a simulated replica keeps up when it can complete at least this share of the load offered to it
VERIFY_ROUNDS = 3  # at most this many x `verify` options simulated while retried or demoted finalists move down


def _simulate(task: tuple) -> dict[str, float]:
    """One finalist at its planned per-replica request rate (a worker process runs this), with the
    requests/s its replica completes at the engine's limits (`capacity_request_rate`: simulated closed-loop
    at max_num_seqs, the same as `simulate`'s saturation test; measured here when `cap` is None)."""
    sc, schedule, arm, workload, rate, cap, num_prompts, seed, burstiness, limits = task
    arms = () if arm == "routed" else (arm == "on",)
    key = {"off": "off", "on": "on", "routed": "policy"}[arm]
    res = run_level(sc, workload, "request_rate", rate, num_prompts=num_prompts, seed=seed, burstiness=burstiness,
                    limits=limits, arms=arms, schedule=schedule,
                    capacities=None if cap is None else {key: cap})[key]
    keep = [*SLO_KEYS, "output_throughput", "request_throughput", "mean_tpot_ms", "offered_request_rate",
            "capacity_request_rate"]
    return {k: float(res[k]) for k in keep}


def _pool_map(tasks: list[tuple], jobs: int, tick: Callable[[int, int], None] | None = None) -> list[dict[str, float]]:
    """The simulations in `jobs` processes (forked where the platform allows; in-process for one), in
    the tasks' order; `tick(done, total)` after each one finishes."""
    tick = tick or (lambda done, total: None)
    if jobs <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            out.append(_simulate(t))
            tick(len(out), len(tasks))
        return out
    ctx = get_context("fork") if "fork" in __import__("multiprocessing").get_all_start_methods() else None
    first: list[dict[str, float]] = []
    if ctx is not None:
        # The first simulation runs here: forked workers inherit what it loaded (numba and the compiled
        # loop's machine code, the step models and token tables) instead of each loading it again.
        first.append(_simulate(tasks[0]))
        tick(1, len(tasks))
    rest = tasks[len(first):]
    with ProcessPoolExecutor(max_workers=min(jobs, len(rest)), mp_context=ctx) as pool:
        futures = [pool.submit(_simulate, t) for t in rest]
        for done, _ in enumerate(as_completed(futures), len(first) + 1):
            tick(done, len(tasks))
        return first + [f.result() for f in futures]


def _price(o: Option, costs: Costs, demand: Traffic, output_len: float, replicas: int | None = None) -> None:
    """Fleet size (the analytic one, or `replicas` where the simulator needed more), utilisation and
    costs of one feasible option. A product of finite inputs that overflows (a fleet past MAX_REPLICAS,
    a cost past the largest float) is a one-line error naming the inputs, never an Infinity."""
    s = o.screened
    need = demand.peak_rps / s.requests_per_s
    if not need <= MAX_REPLICAS:
        raise CrossoverError(f"{demand.what}: the fleet overflows: {demand.peak_rps:g} req/s at the peak over "
                             f"{s.requests_per_s:.4g} req/s per replica of {o.label} is {need:.3g} replicas (more "
                             f"than {MAX_REPLICAS:.3g}); give a smaller demand")
    o.replicas = replicas or replicas_for(demand.peak_rps, s.requests_per_s)
    o.utilisation = demand.peak_rps / (o.replicas * s.requests_per_s)
    o.mean_utilisation = demand.mean_rps / (o.replicas * s.requests_per_s)
    gpus = o.replicas * o.replica_gpus
    o.rental_usd_per_month = costs.rental_per_month(o.hardware, gpus)
    o.ownership_usd_per_month = costs.ownership_per_month(o.hardware, gpus, o.mean_utilisation)
    o.usd_per_month = costs.per_month(o.hardware, gpus, o.mean_utilisation)
    o.price_missing = costs.missing(o.hardware)
    tokens_per_month = demand.mean_rps * output_len * 3600.0 * HOURS_PER_MONTH
    if not math.isfinite(tokens_per_month):
        raise CrossoverError(f"{demand.what}: the output tokens per month overflow: mean {demand.mean_rps:g} req/s "
                             f"x {output_len:g} tokens x {3600.0 * HOURS_PER_MONTH:g} s; give a smaller demand")
    if o.usd_per_month is not None:
        o.usd_per_million_output_tokens = o.usd_per_month / tokens_per_month * 1e6
        one = costs.per_month(o.hardware, o.replica_gpus, 1.0)
        o.usd_per_million_at_capacity = one / (s.tokens_per_s * 3600.0 * HOURS_PER_MONTH) * 1e6  # type: ignore[operator]
        if not (math.isfinite(o.usd_per_million_output_tokens) and math.isfinite(o.usd_per_million_at_capacity)):
            src = costs.origin(o.hardware, "price_per_hour_usd" if costs.basis == "rental" else "purchase_usd_per_gpu")
            raise CrossoverError(f"{demand.what}: USD per million output tokens overflows for {o.label}: "
                                 f"${o.usd_per_month:g} per month ({src}) over {tokens_per_month:g} tokens (mean "
                                 f"{demand.mean_rps:g} req/s); give a larger demand or a smaller price")
    if demand.is_trace and o.rental_usd_per_month is not None:
        # a replica's rate: its analytic capacity, or what the simulator verified it at
        served = s.requests_per_s if replicas is None else demand.peak_rps / o.replicas
        per = autoscaled_replicas(demand.rates, served)
        o.autoscaled_replica_hours_share = 1.0 - float(per.mean()) / o.replicas
        o.autoscaled_usd_per_month = o.rental_usd_per_month * float(per.mean()) / o.replicas


def _schedule(s: Screened, max_num_seqs: int) -> np.ndarray:
    """A routed arm's k per running batch 1..max_num_seqs (past its capacity: its last k)."""
    sched = np.zeros(max_num_seqs, int)
    for r in s.schedule or []:
        sched[r["batch_min"] - 1:r["batch_max"]] = r["k"]
    last = (s.schedule or [{"batch_max": 0, "k": 0}])[-1]
    sched[last["batch_max"]:] = last["k"]
    return sched


def plan(model: Model, hardware: Sequence[Hardware], spec: Speculation, workload: Workload, demand: Traffic,
         slo: dict[str, float], costs: Costs, *, prompt_len: float, output_len: float,
         tps: Sequence[int] = PLAN_TP, weight_dtypes: Sequence[str | None] = (None,),
         kv_dtypes: Sequence[str] = (DEFAULT_KV_DTYPE,), max_num_seqs: Sequence[int | None] = (None,),
         k_max: int | None = None, max_num_batched_tokens: int | None = None,
         expert_parallel: bool = False, dps: Sequence[int] = (1,), efficiency=None, verify: int = DEFAULT_VERIFY,
         num_prompts: int = DEFAULT_SIM_PROMPTS, burstiness: float = DEFAULT_BURSTINESS, seed: int = DEFAULT_SEED,
         jobs: int | None = None, base: Path | None = None,
         retry_replicas: int = DEFAULT_RETRY_REPLICAS, fp8_where_native: bool = False,
         progress: Callable[[int, int, str], None] | None = None) -> FleetPlan:
    """Screen every option analytically, size and price its fleet, rank, and simulate the best `verify`.
    A finalist whose simulated latencies miss an SLO, or whose simulated replica completes less than
    KEEP_UP of the requests offered to it, is simulated again with one more replica (a lower
    request rate per replica), up to `retry_replicas` more; the first fleet that meets every SLO
    replaces the analytic one (`replicas_added`), else the finalist is demoted. `progress(done, total,
    what)` follows the screening and each round of simulations. `fp8_where_native`: besides the model's
    own weights, fp8 weights on every accelerator with fp8 tensor cores (the default search: fp8 halves
    the bytes each decode step streams where the GPU computes it natively)."""
    slo = check_slo(slo)
    k_max = int(k_max or spec.k)
    if not 1 <= k_max <= MAX_K:
        raise CrossoverError(f"--k-max must be in 1..{MAX_K} (got {k_max})")
    for n in max_num_seqs:  # (None: each deployment's engine default on its GPU, serving/engine.py)
        if n is not None and not 1 <= int(n) <= MAX_NUM_SEQS:
            raise CrossoverError(f"--max-num-seqs must be in 1..{MAX_NUM_SEQS} (got {n})")
    if verify < 0:
        raise CrossoverError(f"--verify must be >= 0 (got {verify})")
    if isinstance(retry_replicas, bool) or int(retry_replicas) != retry_replicas or retry_replicas < 0:
        raise CrossoverError(f"--retry-replicas must be a whole number >= 0 (got {retry_replicas})")
    report = progress or (lambda done, total, what: None)
    jobs = (os.cpu_count() or 1) if jobs is None else int(jobs)
    if jobs < 1:
        raise CrossoverError(f"--jobs must be >= 1 (got {jobs})")
    for label, dts in (("weight", weight_dtypes), ("kv", kv_dtypes)):
        for dt in dts:
            if dt is not None and dt not in DTYPE_BYTES:
                raise CrossoverError(f"unknown {label} dtype {dt!r} (--{label}-dtype); expected one of "
                                     f"{', '.join(DTYPE_BYTES)}")
    kw = {"efficiency": efficiency} if efficiency is not None else {}
    options: list[Option] = []
    scenarios: dict[int, tuple[Scenario, np.ndarray | None]] = {}
    def dtypes(hw: Hardware) -> tuple[str | None, ...]:
        native = fp8_where_native and hw.fp8_dense_tflops is not None and model.weight_dtype in ("bf16", "fp16")
        return (*weight_dtypes, "fp8") if native and "fp8" not in weight_dtypes else tuple(weight_dtypes)

    deployments = sum(len(tps) * len(dps) * len(dtypes(hw)) * len(kv_dtypes) for hw in hardware)
    screened = 0
    for hw in hardware:
        for tp, dp in ((t, d) for t in tps for d in dps):
            problem = tp_problem(model, hw, tp, expert_parallel and dp == 1) or dp_problem(model, hw, tp, dp,
                                                                                            expert_parallel)
            for wd in dtypes(hw):
                for kvd in kv_dtypes:
                    screened += 1
                    report(screened, deployments, "deployments screened")
                    dep = Deployment(model=model, hardware=hw, tp=tp, weight_dtype=wd, kv_dtype=kvd,
                                     expert_parallel=expert_parallel, data_parallel=dp, **kw)
                    for given in max_num_seqs:
                        mns = EngineLimits.of(dep, given, max_num_batched_tokens).max_num_seqs
                        base_opt = dict(hardware=hw.name, tp=tp, weight_dtype=dep.wdtype, kv_dtype=kvd,
                                        max_num_seqs=int(mns), data_parallel=dp)
                        if problem is not None:
                            options.append(Option(**base_opt, arm="all", screened=Screened(
                                "all", dropped_because=f"{'tp' if dp == 1 else 'dp'} {tp if dp == 1 else dp} refused: "
                                                       f"{problem.split(': ', 1)[-1]}")))
                            continue
                        for s in screen(dep, spec, prompt_len, output_len, slo, k_max=k_max, max_num_seqs=int(mns)):
                            o = Option(**base_opt, arm=s.arm, screened=s)
                            if s.dropped_because is None:
                                _price(o, costs, demand, output_len)
                                sp = spec if s.arm == "off" or s.k == spec.k else spec.with_k(int(s.k))  # type: ignore[arg-type]
                                sched = _schedule(s, int(mns)) if s.arm == "routed" else None
                                scenarios[id(o)] = (Scenario(dep, sp, prompt_len + output_len / 2.0, prompt_len,
                                                             output_len), sched)
                            options.append(o)
    res = FleetPlan(options, demand, slo, costs, output_len, retry_replicas=int(retry_replicas))

    capacities: dict[int, float] = {}  # id(option) -> the simulated requests/s its replica completes at most

    def task(o: Option, replicas: int) -> tuple:
        sc, sched = scenarios[id(o)]
        # the option's running sequences are the replica's (every data-parallel rank's together)
        limits = replace(EngineLimits.of(sc.deployment, None, max_num_batched_tokens), max_num_seqs=o.max_num_seqs,
                         spec_max_num_seqs=None)
        return (sc, sched, o.arm, workload, demand.peak_rps / replicas, capacities.get(id(o)), num_prompts, seed,
                burstiness, limits)

    def misses(sim: dict[str, float], replicas: int) -> str | None:
        """Why a simulated replica fails its load: it cannot keep up (completes less than KEEP_UP of the
        requests offered to it: a queue that grows without bound, whatever the latencies of a finite run),
        or a simulated latency misses its SLO."""
        rate, cap = demand.peak_rps / replicas, sim["capacity_request_rate"]
        out = []
        if cap < KEEP_UP * rate:
            out.append(f"simulated replica does not keep up: it completes at most {cap:.3g} req/s, {cap / rate:.0%} "
                       f"of its load (its queue grows without bound; p50 TTFT {sim['median_ttft_ms'] / 1e3:.3g} s over "
                       f"{num_prompts} requests)")
        out += [f"simulated {slo_label(k)} {sim[k]:.1f} ms > SLO {v:g} ms" for k, v in slo.items() if not sim[k] <= v]
        return "; ".join(out) + f" at {rate:.3g} req/s per replica" if out else None

    def verify_round(finalists: list[Option], label: str) -> None:
        """Simulate `finalists` at their planned load; retry the ones that miss with more replicas."""
        sims = _pool_map([task(o, o.replicas) for o in finalists], jobs,  # type: ignore[arg-type]
                         lambda done, total: report(done, total, label))
        for o, sim in zip(finalists, sims):
            o.simulated = sim
            capacities[id(o)] = sim["capacity_request_rate"]
            o.demoted_because = misses(sim, o.replicas)  # type: ignore[arg-type]
        pending = [o for o in finalists if o.demoted_because]
        last: dict[int, str] = {}
        for extra in range(1, int(retry_replicas) + 1):
            if not pending:
                break
            what = f"missed, re-simulated with {extra} more replica{'s' if extra > 1 else ''}"
            sims = _pool_map([task(o, o.replicas + extra) for o in pending], jobs,  # type: ignore[operator]
                             lambda done, total: report(done, total, what))
            still = []
            for o, sim in zip(pending, sims):
                miss = misses(sim, o.replicas + extra)  # type: ignore[operator]
                if miss is None:
                    o.retried_because, o.demoted_because, o.simulated = o.demoted_because, None, sim
                    o.replicas_added = extra
                    _price(o, costs, demand, output_len, replicas=o.replicas + extra)  # type: ignore[operator]
                else:
                    last[id(o)] = miss
                    still.append(o)
            pending = still
        more = f"{retry_replicas} more replica{'s' if retry_replicas > 1 else ''}"
        for o in pending:
            if id(o) in last:
                o.demoted_because = f"{o.demoted_because}; with {more}: {last[id(o)]}"

    # The best `verify` are simulated; where a retried (dearer) or demoted one moves down, the options
    # that move up into the best `verify` are simulated too, up to VERIFY_ROUNDS x `verify` in all.
    verified = 0
    while verified < VERIFY_ROUNDS * verify:
        todo = [o for o in res.ranked[:verify] if o.simulated is None][:VERIFY_ROUNDS * verify - verified]
        if not todo:
            break
        verify_round(todo, "finalists simulated" if not verified else "finalists simulated (moved up)")
        verified += len(todo)
    res.verified = verified
    return res


def slo_sweep(res: FleetPlan, key: str, values: Sequence[float], top: int = 8) -> list[dict[str, Any]]:
    """For the best `top` options: GPUs and cost per million output tokens as the SLO `key` takes each
    of `values` (the other SLOs held), each option at its own k; None where it cannot meet it."""
    out = []
    for o in res.ranked[:top]:
        c: Curve | None = o.screened.curve
        if c is None:
            continue
        gpus, usd = [], []
        for v in values:
            slo = {**res.slo, key: float(v)}
            ok = c.ok(slo)
            if not ok.any():
                gpus.append(None)
                usd.append(None)
                continue
            rps = float(np.max(np.where(ok, c.tokens_per_s, -np.inf))) / res.output_len
            n = replicas_for(res.demand.peak_rps, rps) * o.replica_gpus
            gpus.append(n)
            util = res.demand.mean_rps / (n / o.replica_gpus * rps)
            cost = res.costs.per_month(o.hardware, n, util)
            tokens = res.demand.mean_rps * res.output_len * 3600.0 * HOURS_PER_MONTH
            usd.append(None if cost is None else cost / tokens * 1e6)
        out.append({"label": o.label, "arm": o.arm, "gpus": gpus, "usd_per_million_output_tokens": usd})
    return out


__all__ = ["ARMS", "KEEP_UP", "MAX_REPLICAS", "plan", "slo_sweep"]
