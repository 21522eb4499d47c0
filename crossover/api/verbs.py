"""The Python API: every verb of the command line as a function that returns a typed result.

    import crossover
    result = crossover.predict(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3)
    print(result.crossover_batch, result.to_dict()["regime"])

Each function takes a `scenario` (from `crossover.scenario(...)`) or the same keyword arguments
`crossover.scenario` takes; `.to_dict()` is exactly what the CLI prints with `--json`, `.to_text()`
what it prints without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from . import results

if TYPE_CHECKING:  # each verb imports what only it needs when it runs (a command loads its own verb's stack)
    from ..specs.workload import Workload
from .build_speculation import acceptance_of, speculation as speculation_of
from .build import MAX_DATA_PARALLEL, scenario
from .inputs import inputs
from .options import SPECULATION as SPECULATION_OPTIONS
from .records import SLO, Demand, Pricing, Run, Search, Verification
from ..defaults import DEFAULT_BATCHES
from ..model.scenario import Scenario
from ..analysis.curves import predict as _predict
from ..defaults import (
    DEFAULT_CONFIDENCE_CONCENTRATION,
    DEFAULT_CONFIDENCE_THRESHOLD,
    DEFAULT_K_MAX,
    DEFAULT_KV_DTYPE,
    DEFAULT_METHOD,
    DEFAULT_NUM_PROMPTS,
    DEFAULT_WHATIF_POINTS,
    DEFAULT_WHATIF_X,
    DEFAULT_WHATIF_Y,
    PLAN_HARDWARE,
    PLAN_TP,
)
from ..errors import CrossoverError, InputError, api_boundary
from ..model.memory import batch_ceiling


def _scenario(sc: Scenario | None, kwargs: dict[str, Any]) -> Scenario:
    if sc is not None and kwargs:
        raise CrossoverError(f"give a scenario or scenario keywords, not both ({', '.join(kwargs)})")
    return sc if sc is not None else scenario(**kwargs)


@api_boundary
def predict(scenario: Scenario | None = None, *, batches: Sequence[float] = DEFAULT_BATCHES,
            breakdown: float | None = None, **scenario_kwargs: Any) -> results.PredictResult:
    """Throughput off and on at each batch, the crossover and the memory limits; with `breakdown`
    (a batch), the per-op and per-term step times there and which cost mode priced each op."""
    from ..model.breakdown import op_breakdown
    from ..model.step import StepModel
    sc = _scenario(scenario, scenario_kwargs)
    if batches is not DEFAULT_BATCHES:  # loads the KV cache could hold (fractional: the curve is continuous)
        ceiling = batch_ceiling(sc.deployment)
        try:
            arr = np.asarray(batches, float)
        except (TypeError, ValueError):
            raise InputError(f"batches are numbers of sequences (got {batches!r})", parameter="batches") from None
        if arr.ndim != 1 or arr.size == 0:
            raise InputError(f"batches are a list of numbers of sequences (got {batches!r})", parameter="batches")
        bad = ~(np.isfinite(arr) & (arr > 0) & (arr <= ceiling))
        if bad.any():
            raise CrossoverError(f"batch {arr[bad][0]:g} is no load this deployment could run: batches lie in (0, "
                                 f"{ceiling}], what its KV cache could ever hold")
    bd = None
    if breakdown is not None:
        if not (np.isfinite(breakdown) and 0 < breakdown <= batch_ceiling(sc.deployment)):
            raise CrossoverError(f"--breakdown batch {breakdown:g} is no load this deployment could run (0, "
                                 f"{batch_ceiling(sc.deployment)}]")
        bd = op_breakdown(StepModel.of(sc.deployment, sc.speculation), breakdown, sc.context, sc.speculation,
                          (sc.prompt_len, sc.output_len) if sc.mixed else None)
    if batches is DEFAULT_BATCHES:
        return results.PredictResult(_predict(sc, batches), None, bd, None)
    return results.PredictResult(_predict(sc, arr), None, bd, float(arr.max()))


@api_boundary
def simulate(workload: str | Workload, concurrency: Sequence[int] | None = None,
             request_rate: Sequence[float] | None = None, *, run: Run | Mapping[str, Any] | None = None,
             routing: str | tuple[int, int] | None = None, scenario: Scenario | None = None, progress=None,
             **scenario_kwargs: Any) -> results.SimulateResult:
    """A serving benchmark sweep (closed-loop `concurrency` levels or open-loop `request_rate`s) of two
    servers identical but for speculation, each level run as `run` says (api/records.py: requests,
    seed, burstiness, engine limits). `routing="policy"` adds a third server that routes k by load with
    the best-k schedule; `routing=(low, high)` one that speculates until the running batch rises above
    `high` and resumes when it falls below `low`."""
    from ..analysis.policy import routing_policy
    from ..serving.engine import EngineLimits, limits_note, seated
    from ..serving.sweep import sweep
    from ..specs.workload import load_workload
    r = Run.of(run)
    num_prompts, seed, burstiness = r.num_prompts, r.seed, r.burstiness
    max_num_seqs, max_num_batched_tokens = r.max_num_seqs, r.max_num_batched_tokens
    policy = isinstance(routing, str)
    if policy and routing != "policy":
        raise InputError(f"routing is 'policy' or hysteresis thresholds (low, high) (got {routing!r})",
                         parameter="routing")
    hysteresis = None if routing is None or policy else routing
    wl, base = load_workload(workload)
    if (concurrency is None) == (request_rate is None):
        raise CrossoverError("give concurrency levels or request rates (one of the two)")
    if scenario is None:
        p_mean, o_mean = wl.means(base=base)
        scenario_kwargs.setdefault("prompt_len", p_mean)
        scenario_kwargs.setdefault("output_len", o_mean)
        scenario_kwargs["workload"] = wl
    sc = _scenario(scenario, scenario_kwargs)
    resolved = inputs(sc)
    axis = "concurrency" if concurrency is not None else "request_rate"
    levels = list(concurrency if concurrency is not None else request_rate)  # type: ignore[arg-type]
    # a limit not given: the engine's default on the GPU, with its own cap on speculating arms (SGLang's 48)
    limits = EngineLimits.of(sc.deployment, max_num_seqs, max_num_batched_tokens)
    # each server's largest graph where the engine sizes it from these limits (vLLM V0 and V1)
    resolved["cuda_graph_max"] = {**resolved["cuda_graph_max"],
                                  "off": seated(sc.deployment, limits, 0).engine.capture_limit(False),
                                  "on": seated(sc.deployment, limits, sc.speculation.k).speculating_engine.capture_limit(True)}
    schedule: Any = None
    if hysteresis is not None:
        low, high = (int(x) for x in hysteresis)
        if not (1 <= low <= high):
            raise CrossoverError(f"hysteresis thresholds must satisfy 1 <= low <= high (got {low}, {high})")
        schedule = (low, high)
        resolved["routing"] = {"rule": "hysteresis", "speculate_below": low, "stop_above": high}
    if policy:
        # the schedule's lengths are drawn with the run's own seed (the same requests' distribution)
        pol = routing_policy(sc, *wl.sample(np.random.default_rng(seed), 20_000, base), limits.seats(True))
        schedule = pol.best_k
        resolved["policy_schedule"] = pol.schedule
    res = sweep(sc, wl, axis, levels, num_prompts=num_prompts, seed=seed, burstiness=burstiness, limits=limits,
                base=base, schedule=schedule, progress=progress)
    resolved.update({"workload": wl.name, "num_prompts": num_prompts, "seed": seed, "burstiness": burstiness,
                     "max_num_seqs": limits.max_num_seqs, "max_num_batched_tokens": limits.max_num_batched_tokens,
                     "engine_limits": limits_note(sc.deployment, max_num_seqs is not None,
                                                  max_num_batched_tokens is not None)})
    if limits.seats(True) != limits.max_num_seqs:
        resolved["max_num_seqs_speculating"] = limits.seats(True)
        resolved["max_num_seqs_note"] = (f"{sc.deployment.engine.display_name}'s own cap when speculating; "
                                         f"--max-num-seqs sets both arms")
    return results.SimulateResult(res, resolved)


@api_boundary
def policy(scenario: Scenario | None = None, *, k_max: int = DEFAULT_K_MAX, batch_max: int | None = None,
           adaptive: bool = False, confidence_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD,
           confidence_concentration: float = DEFAULT_CONFIDENCE_CONCENTRATION,
           tree_nodes: int | None = None, draft_model_id: str | None = None,
           **scenario_kwargs: Any) -> results.PolicyResult:
    """The best k at every batch up to `batch_max` (default: the memory limit, at most 1024), the
    engine configs that apply it, and optionally adaptive verification and draft trees by load."""
    from ..analysis.adaptive import adaptive_throughput
    from ..analysis.engine_config import engine_configs
    from ..analysis.policy import best_k_policy
    from ..analysis.trees import best_tree_policy
    from ..model.scenario import memory_limits
    sc = _scenario(scenario, scenario_kwargs)
    resolved = inputs(sc)
    if batch_max is None:
        batch_max = max(1, min(memory_limits(sc)[0], 1024))
    pol = best_k_policy(sc, int(batch_max), int(k_max))
    spec = sc.speculation
    draft = spec.draft.name if spec.method == "draft" and spec.draft is not None else None
    configs = engine_configs(pol, draft_model_id or draft)
    resolved["k_max"], resolved["batch_max"] = int(k_max), int(batch_max)
    out = results.PolicyResult(pol, configs, resolved, scenario=sc)
    if adaptive:
        pts = sorted({int(x) for x in np.geomspace(1, batch_max, 12).round()} | {int(batch_max)})
        res = adaptive_throughput(sc, pts, int(k_max), threshold=confidence_threshold, kappa=confidence_concentration)
        out.adaptive = {"batch": pts, "tokens_per_s": [float(x) for x in res.tokens_per_s],
                        "verified_drafts_per_seq": [float(x) for x in res.verified_drafts],
                        "best_fixed_k": [int(pol.best_k[p - 1]) for p in pts],
                        "best_fixed_tokens_per_s": [float(pol.best_tput[p - 1]) for p in pts],
                        "off_tokens_per_s": [float(pol.tput[0][p - 1]) for p in pts],
                        "threshold": confidence_threshold, "concentration": confidence_concentration}
    if tree_nodes is not None:
        trees = best_tree_policy(sc, int(batch_max), int(tree_nodes), int(k_max))
        rows = []
        for r in trees.schedule():
            i = trees.sizes.index(r["nodes"])
            b = r["batch_min"]
            rows.append({**r, "tau": float(trees.tau[i]), "tokens_per_s": float(trees.tput[i][b - 1]),
                         "best_chain_k": int(pol.best_k[b - 1]), "best_chain_tokens_per_s": float(pol.best_tput[b - 1]),
                         "paths": [list(x) for x in trees.paths[i]]})
        out.trees = {"max_nodes": trees.sizes[-1], "max_depth": int(k_max), "schedule": rows}
    return out


def _names(value: str | Sequence[Any] | None, default: Sequence[Any]) -> list[Any]:
    """A comma list ('bf16,fp8') or a sequence, as a list; `default` when None."""
    if value is None:
        return list(default)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


@api_boundary
def plan(model: str, workload: str | Workload, demand: Demand | Mapping[str, Any] | None = None,
         slo: SLO | Mapping[str, Any] | None = None, *, search: Search | Mapping[str, Any] | None = None,
         pricing: Pricing | Mapping[str, Any] | None = None,
         verification: Verification | Mapping[str, Any] | None = None,
         speculation: Mapping[str, Any] | None = None, progress=None) -> results.PlanResult:
    """How many GPUs of which kind, deployed how, serve the `demand` under the `slo`, at what cost:
    every deployment of the `search` (hardware x TP x weight/KV dtype x max running sequences) x
    speculation arm (off, on at its best k, routed by load), sized, priced (`pricing`) and ranked, the
    best checked in the serving simulator (`verification`: a finalist that misses an SLO is simulated
    again with up to `retry_replicas` more replicas, its fleet growing to the first that meets it,
    before it is demoted). `speculation`: crossover.scenario's speculation keywords (method, k,
    acceptance, tau, draft, ...). Records or mappings of their fields (api/records.py).
    `progress(done, total, what)` follows the screening and the simulations."""
    from ..planning.plan import plan as _plan
    from ..planning.pricing import costs, parse_price_flags
    from ..planning.traffic import demand as planned_demand
    from ..specs import load_hardware, load_model
    from ..specs.workload import load_workload
    need_, slo_, find, price_, check = (Demand.of(demand), SLO.of(slo), Search.of(search), Pricing.of(pricing),
                                        Verification.of(verification))
    target = load_model(model)
    hws = [load_hardware(h) for h in _names(find.hardware, PLAN_HARDWARE)]
    if not hws:
        raise CrossoverError("plan needs at least one accelerator")
    wl, base = load_workload(workload)
    p_len, o_len = wl.means(base=base)
    need = planned_demand(peak_rps=need_.peak_rps, peak_output_tokens_per_s=need_.peak_output_tokens_per_s,
                          traffic=need_.traffic, output_len=o_len)
    prices = dict(price_.price) if isinstance(price_.price, Mapping) else parse_price_flags(price_.price)
    cost = costs(hws, price=prices, price_file=price_.price_file,
                 power_usd_per_kwh=price_.power_cost, pue=price_.pue, years=price_.years, basis=price_.cost_basis)
    kw = dict(speculation or {})
    acc = acceptance_of(acceptance=kw.pop("acceptance", None), tau=kw.pop("tau", None),
                        per_position=kw.pop("per_position", None), match_rate=kw.pop("match_rate", None),
                        method=kw.get("method", DEFAULT_METHOD), workload=wl)
    spec = speculation_of(target, acceptance=acc, **kw)
    tps = tuple(int(t) for t in _names(find.tp, PLAN_TP))
    dps = tuple(int(t) for t in _names(find.data_parallel, (1,)))
    if any(not 1 <= n <= MAX_DATA_PARALLEL for n in dps):
        raise CrossoverError(f"data parallel (--dp) must be whole numbers in 1..{MAX_DATA_PARALLEL} (got {list(dps)})")
    wds = tuple(_names(find.weight_dtype, (None,)))
    kvds = tuple(_names(find.kv_dtype, (DEFAULT_KV_DTYPE,)))
    mns = tuple(None if n is None else int(n) for n in _names(find.max_num_seqs, (None,)))  # None: the engine's
    k_max = find.k_max
    res = _plan(target, hws, spec, wl, need, slo_.by_metric(), cost, prompt_len=p_len, output_len=o_len, tps=tps,
                weight_dtypes=wds, kv_dtypes=kvds, max_num_seqs=mns, k_max=k_max,
                max_num_batched_tokens=None if find.max_num_batched_tokens is None else int(find.max_num_batched_tokens),
                expert_parallel=bool(find.expert_parallel), dps=dps,
                verify=int(check.verify), num_prompts=int(check.num_prompts), burstiness=float(check.burstiness),
                seed=int(check.seed), jobs=check.jobs, base=base, retry_replicas=check.retry_replicas,
                fp8_where_native=find.weight_dtype is None, progress=progress)
    resolved = {"model": target.name, "workload": wl.name, "prompt_len": p_len, "output_len": o_len,
                "slo_ms": res.slo, "hardware": [h.name for h in hws], "tp": list(tps),
                "weight_dtype": [w or target.weight_dtype for w in wds] + (
                    ["fp8 (on GPUs with fp8 tensor cores)"] if find.weight_dtype is None
                    and target.weight_dtype in ("bf16", "fp16") else []), "kv_dtype": list(kvds),
                "max_num_seqs": list(mns), "method": spec.method, "k": spec.k, "k_max": int(k_max or spec.k),
                "tau": round(spec.tau, 4), "verify": int(check.verify), "retry_replicas": int(check.retry_replicas),
                "num_prompts": int(check.num_prompts), "burstiness": float(check.burstiness), "seed": int(check.seed),
                "expert_parallel": bool(find.expert_parallel), "data_parallel": list(dps)}
    from ..analysis.assumptions import SOURCES

    resolved["assumed"] = [{"input": name, "value": value, "source": SOURCES[origin], "flips_at": None,
                            "range": None} for name, value, origin in
                           (("acceptance", acc.value, acc.origin), ("match_rate", acc.match_rate, acc.match_origin))
                           if origin in SOURCES and (name == "acceptance" or spec.method == "ngram")]
    return results.PlanResult(res, resolved)


@api_boundary
def whatif(x: str = DEFAULT_WHATIF_X, y: str = DEFAULT_WHATIF_Y, *, points: int = DEFAULT_WHATIF_POINTS, scenario: Scenario | None = None,
           **scenario_kwargs: Any) -> results.WhatifResult:
    """Speedup over two axes (batch, k, acceptance, context, hardware), e.g. x='batch=1..512',
    y='acceptance=0.5..0.9', and the crossover along x for each y."""
    from ..analysis.whatif import grid, parse_axis
    if int(points) < 2:
        raise CrossoverError("points must be >= 2 (--points)")
    x_axis, xs = parse_axis(x, int(points))
    y_axis, ys = parse_axis(y, int(points))
    sc = _scenario(scenario, scenario_kwargs)
    return results.WhatifResult(grid(sc, x_axis, xs, y_axis, ys), inputs(sc))


# the keywords of crossover.scenario that describe the speculation (a report's plan takes them): the API
# keywords of the speculation options
SPECULATION_KEYWORDS = tuple(opt.keyword for opt in SPECULATION_OPTIONS)


@api_boundary
def report(scenario: Scenario | None = None, *, batches: Sequence[float] = DEFAULT_BATCHES,
           workload: str | None = None, concurrency: Sequence[int] | None = None,
           num_prompts: int = DEFAULT_NUM_PROMPTS, with_plan: bool = False, plan_peak_rps: float | None = None,
           plan_slo_tpot_ms: float | None = None, **scenario_kwargs: Any) -> results.ReportResult:
    """One self-contained HTML page of a scenario for a design review: the curves and crossover, the
    best-k policy, with `workload` and `concurrency` a simulated sweep, and `with_plan` (a workload,
    `plan_peak_rps` and `plan_slo_tpot_ms`) the capacity plan of this model, workload and accelerator
    (its TP degrees 1, 2, 4, 8 and speculation)."""
    from ..specs.workload import load_workload
    from ..reporting.html import build as build_page

    wl = base = None
    p_len = o_len = None
    if workload is not None:
        wl, base = load_workload(workload)
        p_len, o_len = wl.means(base=base)
    elif concurrency:
        raise CrossoverError("--concurrency needs --workload (the prompt and output lengths to simulate)")
    if with_plan and (workload is None or plan_peak_rps is None or plan_slo_tpot_ms is None):
        raise CrossoverError("--plan needs --workload, --plan-peak-rps and --plan-slo-tpot-ms")
    if scenario is None:
        scenario_kwargs.update(prompt_len=p_len, output_len=o_len, workload=wl)
    speculation_kw = {k: v for k, v in scenario_kwargs.items() if k in SPECULATION_KEYWORDS and v is not None}
    sc = _scenario(scenario, scenario_kwargs)
    pred = predict(sc, batches=batches)
    resolved = pred.inputs  # what the scenario resolved to, as predict reports it
    b_max = max(1, min(pred.prediction.max_batch_off, 512))
    policy_text = None
    if sc.speculation.tree is None:
        policy_text = policy(sc, k_max=max(sc.speculation.k, 1), batch_max=b_max).to_text()
    sim = None
    if wl is not None and concurrency:
        sim = simulate(workload, concurrency, run=Run(num_prompts=num_prompts), scenario=sc)
    planned = None
    if with_plan:
        if scenario is not None:  # a built scenario: its own method and k
            speculation_kw = {"method": sc.speculation.method, "k": sc.speculation.k}
        dep = sc.deployment
        planned = plan(dep.model.name if scenario is not None else scenario_kwargs.get("model", dep.model.name),
                       workload, Demand(peak_rps=plan_peak_rps), SLO(tpot_ms=plan_slo_tpot_ms),
                       search=Search(hardware=[dep.hardware.name], weight_dtype=dep.weight_dtype,
                                     kv_dtype=dep.kv_dtype, k_max=max(sc.speculation.k, 1)),
                       verification=Verification(verify=2), speculation=speculation_kw)
    page = build_page(sc, resolved, pred.prediction, pred.to_text(), policy_text, sim.sweep if sim else None,
                      sim.inputs if sim else None, sim.to_text() if sim else None, plan=planned)
    return results.ReportResult(page, resolved)

