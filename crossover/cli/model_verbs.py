"""Verbs that model a deployment: predict, simulate, policy, report, plan, whatif."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import CrossoverError
from .common import _emit, _lengths, _number, parse_list
from .scenario import scenario_from_args, speculation_from_args


def cmd_predict(args: argparse.Namespace) -> int:
    """`crossover predict`."""
    from ..curves import DEFAULT_BATCHES, predict
    from ..report import prediction_dict, prediction_table

    sc, resolved = scenario_from_args(args, *_lengths(args))
    batches = parse_list(args.batch, "--batch") if args.batch is not None else list(DEFAULT_BATCHES)
    pred = predict(sc, batches)
    if args.plot:
        from ..plots import plot_prediction

        plot_prediction(pred, resolved, args.plot)
    _emit(args, lambda: prediction_dict(pred), lambda: prediction_table(pred, resolved), resolved)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """`crossover simulate`."""
    from ..report import simulation_dict, simulation_rows, simulation_table
    from ..serving.engine import EngineLimits
    from ..serving.sweep import sweep
    from ..workload import load_workload

    workload, base = load_workload(args.workload)
    p_mean, o_mean = workload.means(base=base)
    sc, resolved = scenario_from_args(args, p_mean, o_mean, workload)
    axis = "concurrency" if args.concurrency is not None else "request_rate"
    flag = "--concurrency" if axis == "concurrency" else "--request-rate"
    raw = args.concurrency if axis == "concurrency" else args.request_rate
    levels = parse_list(raw, flag, integer=axis == "concurrency")
    limits = EngineLimits(int(_number(args.max_num_seqs, "--max-num-seqs", integer=True)),
                          int(_number(args.max_num_batched_tokens, "--max-num-batched-tokens", integer=True)))
    num_prompts = int(_number(args.num_prompts, "--num-prompts", integer=True))
    seed = int(_number(args.seed, "--seed", integer=True, positive=False))
    burst = _number(args.burstiness, "--burstiness")
    schedule = None
    if args.policy:
        from ..policy import best_k_policy

        pol = best_k_policy(sc, limits.max_num_seqs, sc.speculation.k)
        schedule = pol.best_k
        resolved["policy_schedule"] = pol.schedule
    res = sweep(sc, workload, axis, levels, num_prompts=num_prompts, seed=seed, burstiness=burst, limits=limits,
                base=base, schedule=schedule)
    resolved.update({"workload": workload.name, "num_prompts": num_prompts, "seed": seed, "burstiness": burst,
                     "max_num_seqs": limits.max_num_seqs, "max_num_batched_tokens": limits.max_num_batched_tokens})
    if args.plot:
        from ..plots import plot_simulation

        plot_simulation(res, resolved, args.plot)
    if args.csv:
        import csv

        rows = simulation_rows(res)
        try:
            with open(args.csv, "w", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        except OSError as exc:
            raise CrossoverError(f"cannot write {args.csv}: {exc.strerror}") from None
        print(f"wrote {args.csv}", file=sys.stderr)
    if args.json:
        out = simulation_dict(res)
        out["inputs"] = resolved
        print(json.dumps(out, indent=2))
    elif not args.csv:
        print(simulation_table(res, resolved))
    return 0


def cmd_policy(args: argparse.Namespace) -> int:
    """`crossover policy`."""
    import numpy as np

    from ..curves import predict
    from ..policy import best_k_policy, engine_configs
    from ..report import policy_dict, policy_table

    sc, resolved = scenario_from_args(args, *_lengths(args))
    k_max = int(_number(args.k_max, "--k-max", integer=True))
    if args.batch_max is not None:
        b_max = int(_number(args.batch_max, "--batch-max", integer=True))
    else:
        limit = predict(sc, [1]).max_batch_off
        b_max = max(1, min(limit, 1024))
    pol = best_k_policy(sc, b_max, k_max)
    configs = engine_configs(pol, args.draft_model_id or (args.draft if args.method == "draft" else None))
    resolved["k_max"], resolved["batch_max"] = k_max, b_max
    if args.plot:
        from ..plots import plot_policy

        plot_policy(pol, resolved, args.plot)
    adaptive = None
    if args.adaptive:
        from ..adaptive import adaptive_throughput

        pts = sorted({int(x) for x in np.geomspace(1, b_max, 12).round()} | {b_max})
        thr = _number(args.confidence_threshold, "--confidence-threshold", positive=False)
        kappa = _number(args.confidence_concentration, "--confidence-concentration")
        res = adaptive_throughput(sc, pts, k_max, threshold=thr, kappa=kappa)
        adaptive = {"batch": pts, "tokens_per_s": [round(float(x), 2) for x in res.tokens_per_s],
                    "verified_drafts_per_seq": [round(float(x), 3) for x in res.window],
                    "best_fixed_k": [int(pol.best_k[p - 1]) for p in pts],
                    "best_fixed_tokens_per_s": [round(float(pol.best_tput[p - 1]), 2) for p in pts],
                    "off_tokens_per_s": [round(float(pol.tput[0][p - 1]), 2) for p in pts],
                    "threshold": thr, "concentration": kappa}
    trees = None
    if args.tree_nodes is not None:
        from ..trees import best_tree_policy

        plan = best_tree_policy(sc, b_max, int(_number(args.tree_nodes, "--tree-nodes", integer=True)), k_max)
        rows = []
        for r in plan.schedule():
            i = plan.sizes.index(r["nodes"])
            b = r["batch_min"]
            rows.append({**r, "tau": round(plan.tau[i], 4), "tokens_per_s": round(float(plan.tput[i][b - 1]), 2),
                         "best_chain_k": int(pol.best_k[b - 1]),
                         "best_chain_tokens_per_s": round(float(pol.best_tput[b - 1]), 2),
                         "paths": [list(x) for x in plan.paths[i]]})
        trees = {"max_nodes": plan.sizes[-1], "max_depth": k_max, "schedule": rows}
    if args.json:
        out = policy_dict(pol, configs)
        out["adaptive"] = adaptive
        out["trees"] = trees
        out["inputs"] = resolved
        print(json.dumps(out, indent=2))
    else:
        print(policy_table(pol, configs, resolved))
        if trees:
            print("")
            print(f"draft trees by load (the likeliest tree of each size up to {trees['max_nodes']} nodes, depth <= "
                  f"{k_max}; at each range's first batch):")
            print(f"{'batches':>11} {'nodes':>6} {'depth':>6} {'topk':>5} {'tau':>6} {'tok/s':>9} "
                  f"{'best chain k':>13} {'tok/s':>9} {'gain':>6}")
            for r in trees["schedule"]:
                rng = f"{r['batch_min']}-{r['batch_max']}"
                gain = r["tokens_per_s"] / r["best_chain_tokens_per_s"]
                print(f"{rng:>11} {r['nodes']:>6} {r['depth']:>6} {r['topk']:>5} {r['tau']:>6.2f} "
                      f"{r['tokens_per_s']:>9.0f} {r['best_chain_k']:>13} {r['best_chain_tokens_per_s']:>9.0f} "
                      f"{gain:>6.3f}")
            print("  SGLang: --speculative-num-steps DEPTH --speculative-eagle-topk TOPK "
                  "--speculative-num-draft-tokens NODES+1; vLLM: speculative_config.speculative_token_tree = the "
                  "node paths (--json)")
        if adaptive:
            print("")
            print("adaptive verification (confidence-scheduled, load budget) vs the best fixed k:")
            print(f"{'batch':>7} {'adaptive tok/s':>15} {'drafts/seq':>11} {'best fixed k':>13} {'tok/s':>10} "
                  f"{'gain':>7} {'vs off':>7}")
            for i, bt in enumerate(adaptive["batch"]):
                a, f, o = (adaptive["tokens_per_s"][i], adaptive["best_fixed_tokens_per_s"][i],
                           adaptive["off_tokens_per_s"][i])
                print(f"{bt:>7} {a:>15.0f} {adaptive['verified_drafts_per_seq'][i]:>11.2f} "
                      f"{adaptive['best_fixed_k'][i]:>13} {f:>10.0f} {a / f:>7.3f} {a / o:>7.3f}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """`crossover report`."""
    from pathlib import Path

    from ..curves import DEFAULT_BATCHES, predict
    from ..html_report import build
    from ..policy import best_k_policy, engine_configs
    from ..report import policy_table, prediction_table, simulation_table

    simulation = sim_inputs = sim_text = None
    p_len = o_len = None
    workload = base = None
    if args.workload:
        from ..workload import load_workload

        workload, base = load_workload(args.workload)
        p_len, o_len = workload.means(base=base)
    elif args.concurrency:
        raise CrossoverError("--concurrency needs --workload (the prompt and output lengths to simulate)")
    sc, resolved = scenario_from_args(args, p_len, o_len, workload)
    batches = parse_list(args.batch, "--batch") if args.batch is not None else list(DEFAULT_BATCHES)
    pred = predict(sc, batches)
    b_max = max(1, min(pred.max_batch_off, 512))
    pol = best_k_policy(sc, b_max, max(sc.speculation.k, 1)) if sc.speculation.tree is None else None
    policy_text = None
    if pol is not None:
        resolved_pol = dict(resolved, k_max=sc.speculation.k, batch_max=b_max)
        policy_text = policy_table(pol, engine_configs(pol), resolved_pol)
    if workload is not None and args.concurrency:
        from ..serving.sweep import sweep

        levels = parse_list(args.concurrency, "--concurrency", integer=True)
        n = int(_number(args.num_prompts, "--num-prompts", integer=True))
        simulation = sweep(sc, workload, "concurrency", levels, num_prompts=n, base=base)
        sim_inputs = dict(resolved, workload=workload.name, num_prompts=n, seed=0)
        sim_text = simulation_table(simulation, sim_inputs)
    page = build(sc, resolved, pred, prediction_table(pred, resolved), policy_text, simulation, sim_inputs, sim_text)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.html").write_text(page, encoding="utf-8")
    except OSError as exc:
        raise CrossoverError(f"cannot write {out / 'index.html'}: {exc.strerror}") from None
    print(f"wrote {out / 'index.html'}", file=sys.stderr)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """`crossover plan`."""
    from ..plan import plan
    from ..report import plan_dict, plan_table
    from ..specs import load_hardware, load_model
    from ..workload import load_workload

    model = load_model(args.model)
    workload, base = load_workload(args.workload)
    p_len, o_len = workload.means(base=base)
    hws = [load_hardware(h.strip()) for h in args.hardware.split(",") if h.strip()]
    if not hws:
        raise CrossoverError("--hardware needs at least one accelerator name")
    tps = tuple(int(x) for x in parse_list(args.tp, "--tp", integer=True))
    spec = speculation_from_args(args, workload, target=model)
    slo_tpot = _number(args.slo_tpot_ms, "--slo-tpot-ms")
    slo_ttft = _number(args.slo_ttft_ms, "--slo-ttft-ms") if args.slo_ttft_ms is not None else None
    k_max = int(_number(args.k_max, "--k-max", integer=True)) if args.k_max else None
    res = plan(model, hws, spec, p_len, o_len, slo_tpot_ms=slo_tpot, slo_ttft_ms=slo_ttft, tps=tps, k_max=k_max)
    inputs = {"model": model.name, "workload": workload.name, "prompt_len": p_len, "output_len": o_len,
              "slo_tpot_ms": slo_tpot, "slo_ttft_ms": slo_ttft, "hardware": [h.name for h in hws], "tp": list(tps),
              "method": spec.method, "k": spec.k, "tau": round(spec.tau, 4)}
    if args.plot:
        from ..plots import plot_plan

        plot_plan(res, inputs, args.plot)
    _emit(args, lambda: plan_dict(res), lambda: plan_table(res, inputs), inputs)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    """`crossover whatif`."""
    from ..whatif import grid, parse_axis

    points = int(_number(args.points, "--points", integer=True))
    if points < 2:
        raise CrossoverError("--points must be >= 2")
    x_axis, xs = parse_axis(args.x, points)
    y_axis, ys = parse_axis(args.y, points)
    sc, resolved = scenario_from_args(args)
    g = grid(sc, x_axis, xs, y_axis, ys)
    crossings = g.crossover_along_x()
    if args.csv:
        import csv

        try:
            with open(args.csv, "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow([x_axis, y_axis, "speedup"])
                for i, yv in enumerate(ys):
                    for j, xv in enumerate(xs):
                        w.writerow([xv, yv, round(float(g.speedup[i, j]), 6)])
        except OSError as exc:
            raise CrossoverError(f"cannot write {args.csv}: {exc.strerror}") from None
        print(f"wrote {args.csv}", file=sys.stderr)
    if args.plot:
        from ..plots import plot_whatif

        plot_whatif(g, resolved, args.plot)
    if args.json:
        print(json.dumps({"x_axis": x_axis, "x": xs, "y_axis": y_axis, "y": ys,
                          "speedup": [[round(float(v), 5) for v in row] for row in g.speedup],
                          f"crossover_{x_axis}_per_{y_axis}": crossings, "inputs": resolved}, indent=2))
    elif not args.csv or args.plot:
        print(f"speedup over {x_axis} x {y_axis} ({len(xs)} x {len(ys)} cells); crossover {x_axis} per {y_axis}:")
        for yv, cx, row in zip(ys, crossings, g.speedup):
            where = f"{cx:.1f}" if cx is not None else ("none (speculation faster throughout)" if row[0] > 1
                                                         else "none (never faster)")
            lab = f"{yv:.3g}" if isinstance(yv, float) else str(yv)
            print(f"  {y_axis} {lab:>10}: {where}   (speedup {row[0]:.2f} at {x_axis} {xs[0]:.3g}, "
                  f"{row[-1]:.2f} at {xs[-1]:.3g})" if x_axis != "hardware" else f"  {y_axis} {lab}: "
                  + ", ".join(f"{h} {v:.2f}" for h, v in zip(xs, row)))
    return 0
