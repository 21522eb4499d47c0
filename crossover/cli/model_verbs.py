"""Verbs that model a deployment: predict, simulate, policy, report, plan, whatif."""

from __future__ import annotations

import argparse
import csv

from ..api import verbs as api
from ..api.records import Run
from ..defaults import DEFAULT_BATCHES
from ..errors import CrossoverError
from ..files import write_atomic
from ..model.memory import batch_ceiling, check_batches
from ..reporting.serving import simulation_rows
from .common import parse_lengths, parse_number, parse_list, print_result, warnings_as_lines
from .outputs import wrote
from .progress import progress_line
from .scenario import scenario_from_args, scenario_kwargs, speculation_kwargs


def _write_csv(path: str, rows: list[list]) -> None:
    """Rows (header first) to a CSV file, atomically, with a one-line error when it cannot be written."""

    def write(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(rows)

    write_atomic(path, write)
    wrote(path)


def _progress(axis: str, quiet: bool = False):
    """simulate's progress line: levels done and the last load (stderr, a terminal only, after 2 s)."""
    what = axis.replace("_", " ")
    return progress_line("simulate", lambda done, total, load: f"{done}/{total} levels ({what} {load:g} done)",
                         quiet)


def cmd_predict(args: argparse.Namespace) -> int:
    """`crossover predict`."""
    sc, _ = scenario_from_args(args, *parse_lengths(args))
    batches = DEFAULT_BATCHES
    if args.batch is not None:  # whole sequences, as an engine runs them
        batches = check_batches(parse_list(args.batch, "--batch"), batch_ceiling(sc.deployment))
    breakdown = None
    if args.breakdown is not None:  # one whole batch, as --batch: the sequences one engine step runs
        if "," in args.breakdown or ".." in args.breakdown:
            raise CrossoverError(f"--breakdown takes one batch (got {args.breakdown!r})")
        breakdown = parse_number(args.breakdown, "--breakdown")  # finite, > 0; the API checks the memory limit
        if breakdown != int(breakdown):
            raise CrossoverError(f"--breakdown takes a whole batch of sequences >= 1, as --batch (got "
                                 f"{args.breakdown}): one engine step runs whole sequences")
    res = api.predict(sc, batches=batches, breakdown=breakdown)
    if args.plot:
        from ..reporting.plots import plot_prediction

        plot_prediction(res.prediction, res.inputs, args.plot)
    print_result(args, res)
    return 0


def _hysteresis(text: str | None) -> tuple[int, int] | None:
    """--hysteresis LOW,HIGH as two whole running batches."""
    if text is None:
        return None
    vals = parse_list(text, "--hysteresis", integer=True)
    if len(vals) != 2:
        raise CrossoverError(f"--hysteresis takes two running batches LOW,HIGH (got {text!r})")
    return int(vals[0]), int(vals[1])


def cmd_simulate(args: argparse.Namespace) -> int:
    """`crossover simulate`."""
    from ..specs.workload import load_workload  # (predict does not need the workload specs)

    workload, base = load_workload(args.workload)
    p_mean, o_mean = workload.means(base=base)
    sc, _ = scenario_from_args(args, p_mean, o_mean, workload)
    axis = "concurrency" if args.concurrency is not None else "request_rate"
    flag = "--concurrency" if axis == "concurrency" else "--request-rate"
    levels = parse_list(args.concurrency if axis == "concurrency" else args.request_rate, flag,
                        integer=axis == "concurrency")
    run = Run(num_prompts=int(parse_number(args.num_prompts, "--num-prompts", integer=True)),
              seed=int(parse_number(args.seed, "--seed", integer=True, positive=False)),
              burstiness=parse_number(args.burstiness, "--burstiness"),
              max_num_seqs=None if args.max_num_seqs is None else int(parse_number(args.max_num_seqs, "--max-num-seqs",
                                                                                  integer=True)),
              max_num_batched_tokens=None if args.max_num_batched_tokens is None else int(
                  parse_number(args.max_num_batched_tokens, "--max-num-batched-tokens", integer=True)))
    hysteresis = _hysteresis(args.hysteresis)
    if args.policy and hysteresis is not None:
        raise CrossoverError("route by the best-k schedule (policy) or by hysteresis, not both")
    res = api.simulate(args.workload, **{axis: levels}, scenario=sc, run=run,
                       routing="policy" if args.policy else hysteresis, progress=_progress(axis, args.quiet))
    if args.plot:
        from ..reporting.plots import plot_simulation

        plot_simulation(res.sweep, res.inputs, args.plot)
    if args.csv:
        rows = simulation_rows(res.sweep)
        _write_csv(args.csv, [list(rows[0])] + [list(r.values()) for r in rows])
    if args.json or not args.csv:
        print_result(args, res)
    return 0


def cmd_policy(args: argparse.Namespace) -> int:
    """`crossover policy`."""
    sc, _ = scenario_from_args(args, *parse_lengths(args))
    res = api.policy(sc, k_max=int(parse_number(args.k_max, "--k-max", integer=True)),
                     batch_max=int(parse_number(args.batch_max, "--batch-max", integer=True))
                     if args.batch_max is not None else None,
                     adaptive=bool(args.adaptive),
                     confidence_threshold=parse_number(args.confidence_threshold, "--confidence-threshold", positive=False),
                     confidence_concentration=parse_number(args.confidence_concentration, "--confidence-concentration"),
                     tree_nodes=int(parse_number(args.tree_nodes, "--tree-nodes", integer=True))
                     if args.tree_nodes is not None else None,
                     draft_model_id=args.draft_model_id or (args.draft if args.method == "draft" else None))
    if args.plot:
        from ..reporting.plots import plot_policy

        plot_policy(res.policy, res.inputs, args.plot)
    print_result(args, res)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """`crossover report`: crossover.report's page, written to --out/index.html."""
    if args.tree is not None:  # reporting/html.py draws speedup for k = 1..N; a tree's k is its depth
        raise CrossoverError("report does not take --tree: its page varies k (the k-and-acceptance figure, the "
                             "best-k policy, the plan), which a draft tree fixes at its depth; price a tree with "
                             "`crossover predict --tree ...`, or size one by load with `crossover policy --tree-nodes N`")
    batches = parse_list(args.batch, "--batch") if args.batch is not None else list(DEFAULT_BATCHES)
    res = api.report(batches=batches,
                     workload=args.workload,
                     concurrency=parse_list(args.concurrency, "--concurrency", integer=True)
                     if args.concurrency is not None else None,
                     num_prompts=int(parse_number(args.num_prompts, "--num-prompts", integer=True)), with_plan=args.plan,
                     plan_peak_rps=_opt(args.plan_peak_rps, "--plan-peak-rps"),
                     plan_slo_tpot_ms=_opt(args.plan_slo_tpot_ms, "--plan-slo-tpot-ms"), **scenario_kwargs(args))
    page = res.write(args.out, force=True)  # check_outputs refused an existing page without --force
    wrote(page)
    return 0


def _opt(value: str | None, flag: str, **kw) -> float | None:
    """A flag's number, or None when not given."""
    return None if value is None else parse_number(value, flag, **kw)


# The fewest requests plan simulates a finalist with. The simulator drops the first 10% of a level's
# requests as warm-up (serving/sweep.py, warmup_frac) and plan compares the medians and p99s of the rest
# with the SLOs: below 50 the warm-up is a handful of requests, so the server is measured while it fills,
# and a p99 is the slowest one or two of the few measured, so a fleet would pass or fail by chance.
PLAN_MIN_PROMPTS = 50


def _plan_prompts(text: str) -> int:
    n = int(parse_number(text, "--num-prompts", integer=True))
    if n < PLAN_MIN_PROMPTS:
        raise CrossoverError(f"--num-prompts {n} is too few requests to verify a fleet: plan needs at least "
                             f"{PLAN_MIN_PROMPTS} (the first 10% warm up the server and the p50 and p99 latencies "
                             f"checked against the SLOs come from the rest)")
    return n


def plan_kwargs(args: argparse.Namespace) -> dict:
    """`crossover plan`'s flags as the arguments of crossover.plan: demand, slo, search, pricing,
    verification and speculation records (api/records.py)."""
    from ..api.records import SLO, Demand, Pricing, Search, Verification

    hardware = [h.strip() for h in args.hardware.split(",") if h.strip()]
    if not hardware:
        raise CrossoverError("--hardware needs at least one accelerator name")
    slo = {}
    for name in ("tpot", "ttft", "itl", "e2e"):
        for stat in ("", "p99_"):
            dest = f"slo_{stat}{name}_ms"
            slo[f"{stat}{name}_ms"] = _opt(getattr(args, dest), "--" + dest.replace("_", "-"))
    speculation = {k: v for k, v in speculation_kwargs(args).items() if v is not None}  # flags read in this order
    search = Search(hardware=hardware, tp=[int(x) for x in parse_list(args.tp, "--tp", integer=True)],
                    weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                    max_num_seqs=None if args.max_num_seqs is None else [
                        int(x) for x in parse_list(args.max_num_seqs, "--max-num-seqs", integer=True)],
                    max_num_batched_tokens=None if args.max_num_batched_tokens is None else int(
                        parse_number(args.max_num_batched_tokens, "--max-num-batched-tokens", integer=True)),
                    expert_parallel=bool(args.expert_parallel),
                    data_parallel=[int(x) for x in parse_list(args.data_parallel, "--dp", integer=True)],
                    k_max=int(parse_number(args.k_max, "--k-max", integer=True)) if args.k_max is not None else None)
    demand = Demand(peak_rps=_opt(args.peak_rps, "--peak-rps"),
                    peak_output_tokens_per_s=_opt(args.peak_output_tokens_per_s, "--peak-output-tokens-per-s"),
                    traffic=args.traffic)
    pricing = Pricing(price=args.price, price_file=args.price_file, cost_basis=args.cost_basis,
                      power_cost=_opt(args.power_cost, "--power-cost"), pue=parse_number(args.pue, "--pue"),
                      years=parse_number(args.years, "--years"))
    verification = Verification(
        verify=int(parse_number(args.verify, "--verify", integer=True, positive=False)),
        retry_replicas=int(parse_number(args.retry_replicas, "--retry-replicas", integer=True, positive=False)),
        num_prompts=_plan_prompts(args.num_prompts),
        burstiness=parse_number(args.burstiness, "--burstiness"),
        seed=int(parse_number(args.seed, "--seed", integer=True, positive=False)),
        jobs=int(parse_number(args.jobs, "--jobs", integer=True)) if args.jobs is not None else None)
    return dict(demand=demand, slo=SLO(**slo), search=search, pricing=pricing, verification=verification,
                speculation=speculation)


def cmd_plan(args: argparse.Namespace) -> int:
    """`crossover plan`: the result, or one line (exit 2) with the closest option when no option meets the SLO."""
    with warnings_as_lines():
        res = api.plan(args.model, args.workload, **plan_kwargs(args),
                       progress=progress_line("plan", lambda done, total, what: f"{done}/{total} {what}", args.quiet))
    if not res.plan.ranked:
        raise CrossoverError(f"plan: {res.recommendation}")
    if args.plot:
        from ..reporting.plots import plot_plan

        plot_plan(res.plan, res.inputs, args.plot)
    print_result(args, res)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    """`crossover whatif`."""
    sc, _ = scenario_from_args(args)
    res = api.whatif(args.x, args.y, points=int(parse_number(args.points, "--points", integer=True)), scenario=sc)
    if args.csv:
        _write_csv(args.csv, res.csv_rows())
    if args.plot:
        from ..reporting.plots import plot_whatif

        plot_whatif(res.grid, res.inputs, args.plot)
    if args.json or not args.csv or args.plot:
        print_result(args, res)
    return 0
