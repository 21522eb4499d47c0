"""The `crossover` command: predict, hardware, models. A leaf: nothing imports it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from .errors import CrossoverError

DEFAULT_MODEL = "llama-3.1-70b"
DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_METHOD = "eagle"
DEFAULT_K = 3
DEFAULT_ACCEPTANCE = 0.7
DEFAULT_CONTEXT = 2048
MIN_SEQUENCES_FOR_AUTO_TP = 16


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CrossoverError(f"{message} (see `{self.prog} --help`)")


# ------------------------------------------------------------------------------ value parsing

def _number(text: str, what: str, *, integer: bool = False, positive: bool = True) -> float:
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise CrossoverError(f"{what} must be {kind} (got {text!r})") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise CrossoverError(f"{what} must be finite (got {text!r})")
    if positive and v <= 0:
        raise CrossoverError(f"{what} must be > 0 (got {text})")
    return v


def parse_list(text: str, what: str, *, integer: bool = False) -> list[float]:
    """'1,2,4' or '1..64' (every integer) or a mix; each > 0."""
    items: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if ".." in part:
            a, b = part.split("..", 1)
            lo = int(_number(a, what, integer=True))
            hi = int(_number(b, what, integer=True))
            if hi < lo:
                raise CrossoverError(f"{what} range {part!r} runs backwards; write LOW..HIGH")
            items += list(range(lo, hi + 1))
        else:
            items.append(_number(part, what, integer=integer))
    if not items:
        raise CrossoverError(f"{what} list is empty; give e.g. 1,8,64 or 1..64")
    return items


# ------------------------------------------------------------------------------ parser

def _add_scenario_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scenario")
    g.add_argument("--model", default=DEFAULT_MODEL, help=f"target model name or YAML path (default {DEFAULT_MODEL})")
    g.add_argument("--hardware", default=DEFAULT_HARDWARE, help=f"accelerator name or YAML path (default {DEFAULT_HARDWARE})")
    g.add_argument("--tp", help="tensor-parallel degree (default: the smallest of 1,2,4,8 that holds "
                                f"{MIN_SEQUENCES_FOR_AUTO_TP} sequences at the context)")
    g.add_argument("--context", help=f"tokens in each sequence's KV cache (default {DEFAULT_CONTEXT}, or "
                                     "prompt + output/2 when the lengths are known)")
    g.add_argument("--weight-dtype", help="bf16, fp8, int8, int4, mxfp4 (default: the model's own)")
    g.add_argument("--kv-dtype", default="bf16", help="KV-cache dtype (default bf16)")
    s = p.add_argument_group("speculation")
    s.add_argument("--method", default=DEFAULT_METHOD, help="draft, eagle, eagle3, medusa, ngram, mtp (default eagle)")
    s.add_argument("--draft", help="draft model for --method draft (name or path)")
    s.add_argument("--draft-tp", help="draft model TP (default: the target's)")
    s.add_argument("--draft-vocab", default="32000", help="eagle3 reduced draft vocabulary (default 32000)")
    s.add_argument("--k", default=str(DEFAULT_K), help=f"draft tokens per step (default {DEFAULT_K})")
    a = s.add_mutually_exclusive_group()
    a.add_argument("--acceptance", help=f"i.i.d. per-token acceptance rate in [0, 1) (default {DEFAULT_ACCEPTANCE})")
    a.add_argument("--tau", help="mean tokens per step, bonus included, as engines report it")
    a.add_argument("--acceptance-per-position", help="per-position acceptance rates as engines print them, e.g. 0.8,0.6,0.45")
    s.add_argument("--match-rate", help="ngram: share of steps whose context holds a match (default 1)")
    s.add_argument("--tree", help="draft tree: DEPTHxBRANCHING (3x4) or nodes per depth (4,4,2); sets k = depth")
    e = p.add_argument_group("efficiency (documented defaults; see README)")
    e.add_argument("--bandwidth-fraction", help="achieved fraction of peak memory bandwidth")
    e.add_argument("--flops-fraction", help="achieved fraction of peak dense FLOP/s")
    e.add_argument("--step-overhead-ms", help="fixed time per engine step")
    e.add_argument("--transition", choices=["smooth", "max", "sum"], help="memory/compute transition model")
    e.add_argument("--expert-parallel", action="store_true", help="MoE: experts split whole over the TP group")
    e.add_argument("--calibration", help="apply a fit saved by `crossover calibrate` (flags set here still win)")


def _add_measured_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on", nargs="+", metavar="FILE", help="result files or folders, speculation on")
    p.add_argument("--off", nargs="+", metavar="FILE", help="result files or folders, speculation off")
    p.add_argument("--files", nargs="+", metavar="FILE", help="files whose own fields say the arm (a CSV with an "
                                                               "`arm` column, SGLang JSONL)")
    p.add_argument("--load-axis", choices=["concurrency", "request_rate", "batch"],
                   help="force the load axis (default: from the files)")


def _add_list_show(sub, verb: str, what: str):
    """`crossover VERB list|show NAME`; returns the action subparsers for more actions."""
    p = sub.add_parser(verb, help=f"list or show {what} specs")
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.add_parser("list", help=f"names of all known {what}s").add_argument("--json", action="store_true")
    show = actions.add_parser("show", help=f"one {what}'s spec")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    return actions


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `crossover` command."""
    p = _Parser(prog="crossover", description="Predict where speculative decoding stops paying off.")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    pr = sub.add_parser("predict", help="on/off throughput over batch and the crossover batch")
    _add_scenario_flags(pr)
    pr.add_argument("--batch", help="batch sizes, e.g. 1,8,64 or 1..64 (default 1..512 in steps)")
    pr.add_argument("--prompt-len", help="mean prompt tokens: the curves carry the prefill share (with --output-len)")
    pr.add_argument("--output-len", help="mean output tokens per request (with --prompt-len)")
    pr.add_argument("--json", action="store_true", help="one JSON object on stdout")
    pr.add_argument("--plot", help="write a figure (PNG or SVG) of throughput and speedup against batch")
    sm = sub.add_parser("simulate", help="simulate a serving benchmark sweep, speculation off and on")
    sm.add_argument("--workload", required=True, help="workload preset or YAML path (sharegpt, cnn-dailymail, "
                                                       "gsm8k, instructcoder, long-context, random-1024-128)")
    load = sm.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", help="closed-loop concurrency levels, e.g. 1,4,16,64")
    load.add_argument("--request-rate", help="open-loop Poisson request rates (req/s), e.g. 1,2,4,8")
    _add_scenario_flags(sm)
    sm.add_argument("--num-prompts", default="1000", help="requests per level (default 1000)")
    sm.add_argument("--seed", default="0", help="random seed (default 0)")
    sm.add_argument("--burstiness", default="1", help="gamma shape of inter-arrival times, 1 = Poisson (default 1)")
    sm.add_argument("--max-num-seqs", default="256", help="engine limit on running sequences (default 256)")
    sm.add_argument("--max-num-batched-tokens", default="8192", help="engine token budget per step (default 8192)")
    out = sm.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object on stdout")
    out.add_argument("--csv", help="write one row per level and arm to this file")
    sm.add_argument("--plot", help="write a figure (PNG or SVG) of throughput and latency against load")
    sm.add_argument("--policy", action="store_true",
                    help="add a third arm that applies the best-k schedule step by step (k = 0..--k by running batch)")
    po = sub.add_parser("policy", help="the best k at each batch, as a schedule and engine configs")
    _add_scenario_flags(po)
    po.add_argument("--k-max", default="8", help="largest k considered (default 8)")
    po.add_argument("--batch-max", help="schedule up to this batch (default: the memory limit, at most 1024)")
    po.add_argument("--prompt-len", help="mean prompt tokens (with --output-len): the prefill share counts")
    po.add_argument("--output-len", help="mean output tokens per request")
    po.add_argument("--draft-model-id", help="the draft's repository id to write into the engine configs")
    po.add_argument("--adaptive", action="store_true",
                    help="also model adaptive verification (confidence-scheduled, DSpark-style load budget)")
    po.add_argument("--confidence-threshold", default="0", help="adaptive: stop drafting below this cumulative "
                                                                 "confidence (default 0)")
    po.add_argument("--confidence-concentration", default="2", help="adaptive: Beta concentration of the draft's "
                                                                     "confidences; small = informative (default 2)")
    po.add_argument("--json", action="store_true", help="one JSON object on stdout")
    po.add_argument("--plot", help="write a figure of every k's throughput and the schedule against batch")
    rp = sub.add_parser("report", help="one self-contained HTML page of a scenario, for a design review")
    _add_scenario_flags(rp)
    rp.add_argument("--batch", help="batch sizes of the table (default 1..512 in steps)")
    rp.add_argument("--workload", help="also simulate this workload (with --concurrency)")
    rp.add_argument("--concurrency", help="concurrency levels to simulate, e.g. 1,8,32,128")
    rp.add_argument("--num-prompts", default="400", help="requests per simulated level (default 400)")
    rp.add_argument("--out", required=True, help="directory to write index.html into (created if missing)")
    pl = sub.add_parser("plan", help="which hardware, how many, speculation on or off: ranked under SLOs")
    pl.add_argument("--model", default=DEFAULT_MODEL, help=f"target model (default {DEFAULT_MODEL})")
    pl.add_argument("--workload", required=True, help="workload preset or YAML path (prompt/output lengths)")
    pl.add_argument("--slo-tpot-ms", required=True, help="time-per-output-token objective, ms")
    pl.add_argument("--slo-ttft-ms", help="time-to-first-token objective, ms")
    pl.add_argument("--hardware", default="h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x",
                    help="comma-separated accelerators (default h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x)")
    pl.add_argument("--tp", default="1,2,4,8", help="TP degrees to consider (default 1,2,4,8)")
    pl.add_argument("--k-max", help="largest k for the policy arm (default --k)")
    sp = pl.add_argument_group("speculation")
    sp.add_argument("--method", default=DEFAULT_METHOD)
    sp.add_argument("--draft")
    sp.add_argument("--draft-tp")
    sp.add_argument("--draft-vocab", default="32000")
    sp.add_argument("--k", default=str(DEFAULT_K))
    ag = sp.add_mutually_exclusive_group()
    ag.add_argument("--acceptance")
    ag.add_argument("--tau")
    ag.add_argument("--acceptance-per-position")
    sp.add_argument("--match-rate")
    sp.add_argument("--tree")
    pl.add_argument("--json", action="store_true", help="one JSON object on stdout")
    pl.add_argument("--plot", help="bar chart of throughput per GPU (and cost) per option")
    wi = sub.add_parser("whatif", help="speedup over two axes (batch, k, acceptance, context, hardware)")
    _add_scenario_flags(wi)
    wi.add_argument("--x", default="batch=1..512", help="x axis, e.g. batch=1..512 (default)")
    wi.add_argument("--y", default="k=1..8", help="y axis, e.g. k=1..8 (default), acceptance=0.4..0.9, "
                                                  "context=512..65536, hardware=h100-sxm,a100-80gb-sxm")
    wi.add_argument("--points", default="64", help="points on a LOW..HIGH axis (default 64)")
    wi.add_argument("--csv", help="write x, y, speedup rows to this file")
    wi.add_argument("--plot", help="write a heatmap of the speedup with the crossover contour")
    wi.add_argument("--json", action="store_true", help="one JSON object on stdout")
    me = sub.add_parser("measured", help="the measured on/off table and crossover of benchmark result files")
    _add_measured_flags(me)
    me.add_argument("--model", help="with --hardware: check every point against the physical bound")
    me.add_argument("--hardware", help="accelerator of the measurement (name or path)")
    me.add_argument("--tp", help="tensor-parallel degree of the measurement")
    me.add_argument("--method", default=DEFAULT_METHOD, help="speculation method (for the bound and the overlay)")
    me.add_argument("--draft", help="draft model for --method draft")
    me.add_argument("--k", default=str(DEFAULT_K), help="draft tokens per step")
    me.add_argument("--json", action="store_true", help="one JSON object on stdout")
    me.add_argument("--plot", help="write a figure of the measured points (over the predicted curves with --model)")
    ca = sub.add_parser("calibrate", help="fit efficiencies, overheads and acceptance to a measured sweep")
    _add_measured_flags(ca)
    _add_scenario_flags(ca)
    ca.add_argument("--out", help="write the fit here as YAML (never overwrites; default: print only)")
    ca.add_argument("--prompt-len", help="mean prompt tokens, when the files do not record total_input_tokens")
    ca.add_argument("--output-len", help="mean output tokens, when the files do not record total_output_tokens")
    ca.add_argument("--bootstrap", default="60", help="bootstrap refits for the crossover interval (default 60)")
    ca.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _add_list_show(sub, "hardware", "accelerator")
    mds = _add_list_show(sub, "models", "model")
    im = mds.add_parser("import", help="turn a Hugging Face config.json into a model spec (offline)")
    im.add_argument("config")
    im.add_argument("--name", help="spec name (default: the config's folder name)")
    im.add_argument("--out", help="write the YAML here (refuses to overwrite an existing file); default stdout")
    return p


# ------------------------------------------------------------------------------ scenario

def speculation_from_args(args: argparse.Namespace, workload_acceptance=None,
                          calibrated: dict[str, float] | None = None):
    """The speculation flags (method, k, tree, acceptance, draft) as a Speculation."""
    from .speculation import Acceptance, Speculation
    from .specs import load_model

    calibrated = calibrated or {}
    k = int(_number(args.k, "--k", integer=True, positive=False))
    if k < 1:
        raise CrossoverError(f"--k must be >= 1 (got {args.k}); speculation off is the baseline itself")
    tree = parse_tree(args.tree) if getattr(args, "tree", None) else None
    if tree is not None:
        if args.k != str(DEFAULT_K) and int(args.k) != len(tree):
            raise CrossoverError(f"--k {args.k} disagrees with --tree {args.tree} (depth {len(tree)}); drop --k")
        k = len(tree)
    wa = workload_acceptance
    if args.match_rate is not None:
        match = _number(args.match_rate, "--match-rate", positive=False)
    elif wa is not None and wa.ngram_match_rate is not None and args.method == "ngram":
        match = wa.ngram_match_rate
    else:
        match = 1.0
    if args.tau is not None:
        acc = Acceptance.mean_length(_number(args.tau, "--tau"), match)
    elif args.acceptance_per_position is not None:
        rates = parse_list(args.acceptance_per_position, "--acceptance-per-position")
        acc = Acceptance.per_position(rates, match)
    elif args.acceptance is not None:
        acc = Acceptance.rate(_number(args.acceptance, "--acceptance", positive=False), match)
    elif "acceptance" in calibrated:
        acc = Acceptance.rate(calibrated["acceptance"], match)
    elif wa is not None and wa.tau is not None:
        acc = Acceptance.mean_length(wa.tau, match)
    elif wa is not None and wa.per_position is not None:
        acc = Acceptance.per_position(wa.per_position, match)
    elif wa is not None and wa.rate is not None:
        acc = Acceptance.rate(wa.rate, match)
    else:
        acc = Acceptance.rate(DEFAULT_ACCEPTANCE, match)
    draft = load_model(args.draft) if args.draft else None
    draft_tp = int(_number(args.draft_tp, "--draft-tp", integer=True)) if args.draft_tp is not None else None
    spec = Speculation(args.method, k, acc, draft=draft, draft_tp=draft_tp,
                       draft_vocab=int(_number(args.draft_vocab, "--draft-vocab", integer=True)), tree=tree)
    if acc.kind == "tau" and spec.tau > k + 1:
        raise CrossoverError(f"--tau {acc.value:g} exceeds k+1 = {k + 1}")
    return spec


def scenario_from_args(args: argparse.Namespace, prompt_len: float | None = None, output_len: float | None = None,
                       workload_acceptance=None):
    """Resolve the scenario flags into a curves.Scenario plus a dict of resolved inputs.

    With mean prompt and output lengths the scenario carries the prefill share, and the context
    defaults to prompt + output / 2 (the mean KV length over a request's decode).
    """
    from . import memory
    from .curves import Scenario
    from .speculation import Acceptance, Speculation
    from .specs import Deployment, Efficiency, load_hardware, load_model

    model = load_model(args.model)
    hardware = load_hardware(args.hardware)
    if args.context is not None:
        context = _number(args.context, "--context", integer=True, positive=False)
        if context < 0:
            raise CrossoverError(f"--context must be >= 0 tokens (got {args.context})")
    elif prompt_len is not None:
        context = prompt_len + output_len / 2.0  # type: ignore[operator]
    else:
        context = DEFAULT_CONTEXT
    peak = context if prompt_len is None else max(context, prompt_len + output_len)  # type: ignore[operator]
    eff_changes = {}
    if args.bandwidth_fraction is not None:
        eff_changes["bandwidth_fraction"] = _fraction(args.bandwidth_fraction, "--bandwidth-fraction")
    if args.flops_fraction is not None:
        eff_changes["flops_fraction"] = _fraction(args.flops_fraction, "--flops-fraction")
    if args.step_overhead_ms is not None:
        eff_changes["step_overhead_s"] = _number(args.step_overhead_ms, "--step-overhead-ms", positive=False) / 1e3
        if eff_changes["step_overhead_s"] < 0:
            raise CrossoverError("--step-overhead-ms must be >= 0")
    if args.transition:
        eff_changes["transition"] = args.transition
    calibrated: dict[str, float] = {}
    if getattr(args, "calibration", None):
        from .calibration import PARAMETERS, load_calibration

        calibrated = load_calibration(args.calibration)
        for name, value in calibrated.items():
            field = PARAMETERS[name][0]
            if field != "acceptance" and field not in eff_changes:
                eff_changes[field] = value / 1e3 if name.endswith("_ms") else value
    efficiency = Efficiency(**eff_changes)
    common = dict(model=model, hardware=hardware, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                  efficiency=efficiency, expert_parallel=bool(getattr(args, "expert_parallel", False)))
    tp_auto = args.tp is None
    if tp_auto:
        for tp in (1, 2, 4, 8):
            dep = Deployment(tp=tp, **common)
            if memory.max_batch(dep, peak) >= MIN_SEQUENCES_FOR_AUTO_TP:
                break
        else:
            raise CrossoverError(
                f"{model.name} does not hold {MIN_SEQUENCES_FOR_AUTO_TP} sequences of {context:g} tokens on 8 x "
                f"{hardware.name}; set --tp, a smaller --context or --weight-dtype fp8")
    else:
        tp = int(_number(args.tp, "--tp", integer=True))
        dep = Deployment(tp=tp, **common)
        if memory.max_batch(dep, peak) < 1:
            need = memory.weight_bytes_per_gpu(dep) / 1e9
            raise CrossoverError(
                f"{model.name} does not fit on {tp} x {hardware.name}: {need:.1f} GB of weights per GPU plus one "
                f"sequence of {context:g} tokens exceed {hardware.memory_gb:g} GB x {dep.memory_utilization:g}; "
                f"use a larger --tp, a smaller --context or --weight-dtype fp8")
    spec = speculation_from_args(args, workload_acceptance, calibrated)
    k, tree, acc, draft = spec.k, spec.tree, spec.acceptance, spec.draft
    sc = Scenario(dep, spec, float(context), prompt_len, output_len)
    resolved = {
        "model": model.name, "hardware": hardware.name, "tp": tp, "tp_auto": tp_auto,
        "weight_dtype": dep.wdtype, "kv_dtype": dep.kv_dtype, "context": context, "prompt_len": prompt_len,
        "output_len": output_len, "method": spec.method,
        "draft": draft.name if draft else None, "k": k, "acceptance_kind": acc.kind,
        "acceptance": acc.value if acc.kind != "per_position" else list(acc.value),  # type: ignore[arg-type]
        "match_rate": acc.match_rate, "alpha_equivalent": round(acc.alpha(k), 6), "tau": round(spec.tau, 6),
        "tree": list(tree) if tree else None, "verify_width": spec.verify_width,
        "efficiency": dep.efficiency.model_dump(),
    }
    return sc, resolved


def parse_tree(text: str) -> tuple[int, ...]:
    """'3x4' (depth 3, 4 nodes per depth) or '4,4,2' (nodes per depth)."""
    t = text.strip().lower()
    try:
        if "x" in t:
            depth, branch = (int(x) for x in t.split("x", 1))
            widths = (branch,) * depth
        else:
            widths = tuple(int(x) for x in t.split(",") if x.strip())
    except ValueError:
        raise CrossoverError(f"--tree {text!r}: write DEPTHxBRANCHING (e.g. 3x4) or nodes per depth (e.g. 4,4,2)") from None
    if not widths or any(w < 1 for w in widths) or len(widths) > 32:
        raise CrossoverError(f"--tree {text!r}: depth 1..32 and at least one node per depth")
    return widths


def _fraction(text: str, what: str) -> float:
    v = _number(text, what)
    if v > 1:
        raise CrossoverError(f"{what} must lie in (0, 1] (got {text})")
    return v


# ------------------------------------------------------------------------------ verbs

def _lengths(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """--prompt-len and --output-len (mean tokens per request), both or neither."""
    if (args.prompt_len is None) != (args.output_len is None):
        raise CrossoverError("give --prompt-len and --output-len together (mean tokens per request)")
    if args.prompt_len is None:
        return None, None
    return _number(args.prompt_len, "--prompt-len"), _number(args.output_len, "--output-len")


def _emit(args: argparse.Namespace, as_dict, as_text, inputs: dict | None = None) -> None:
    """Print one JSON object (--json, with the resolved inputs) or the readable text."""
    if getattr(args, "json", False):
        out = as_dict()
        if inputs is not None:
            out["inputs"] = inputs
        print(json.dumps(out, indent=2))
    else:
        print(as_text())


def cmd_predict(args: argparse.Namespace) -> int:
    """`crossover predict`."""
    from .curves import DEFAULT_BATCHES, predict
    from .report import prediction_dict, prediction_table

    sc, resolved = scenario_from_args(args, *_lengths(args))
    batches = parse_list(args.batch, "--batch") if args.batch is not None else list(DEFAULT_BATCHES)
    pred = predict(sc, batches)
    if args.plot:
        from .plots import plot_prediction

        plot_prediction(pred, resolved, args.plot)
    _emit(args, lambda: prediction_dict(pred), lambda: prediction_table(pred, resolved), resolved)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """`crossover simulate`."""
    from .report import simulation_dict, simulation_rows, simulation_table
    from .serving.engine import EngineLimits
    from .serving.sweep import sweep
    from .workload import load_workload

    workload, base = load_workload(args.workload)
    p_mean, o_mean = workload.means(base=base)
    sc, resolved = scenario_from_args(args, p_mean, o_mean, workload.acceptance)
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
        from .policy import best_k_policy

        pol = best_k_policy(sc, limits.max_num_seqs, sc.speculation.k)
        schedule = pol.best_k
        resolved["policy_schedule"] = pol.schedule
    res = sweep(sc, workload, axis, levels, num_prompts=num_prompts, seed=seed, burstiness=burst, limits=limits,
                base=base, schedule=schedule)
    resolved.update({"workload": workload.name, "num_prompts": num_prompts, "seed": seed, "burstiness": burst,
                     "max_num_seqs": limits.max_num_seqs, "max_num_batched_tokens": limits.max_num_batched_tokens})
    if args.plot:
        from .plots import plot_simulation

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

    from .curves import predict
    from .policy import best_k_policy, engine_configs
    from .report import policy_dict, policy_table

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
        from .plots import plot_policy

        plot_policy(pol, resolved, args.plot)
    adaptive = None
    if args.adaptive:
        from .adaptive import adaptive_throughput

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
    if args.json:
        out = policy_dict(pol, configs)
        out["adaptive"] = adaptive
        out["inputs"] = resolved
        print(json.dumps(out, indent=2))
    else:
        print(policy_table(pol, configs, resolved))
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

    from .curves import DEFAULT_BATCHES, predict
    from .html_report import build
    from .policy import best_k_policy, engine_configs
    from .report import policy_table, prediction_table, simulation_table

    simulation = sim_inputs = sim_text = None
    p_len = o_len = None
    workload = base = None
    if args.workload:
        from .workload import load_workload

        workload, base = load_workload(args.workload)
        p_len, o_len = workload.means(base=base)
    elif args.concurrency:
        raise CrossoverError("--concurrency needs --workload (the prompt and output lengths to simulate)")
    sc, resolved = scenario_from_args(args, p_len, o_len, workload.acceptance if workload else None)
    batches = parse_list(args.batch, "--batch") if args.batch is not None else list(DEFAULT_BATCHES)
    pred = predict(sc, batches)
    b_max = max(1, min(pred.max_batch_off, 512))
    pol = best_k_policy(sc, b_max, max(sc.speculation.k, 1)) if sc.speculation.tree is None else None
    policy_text = None
    if pol is not None:
        resolved_pol = dict(resolved, k_max=sc.speculation.k, batch_max=b_max)
        policy_text = policy_table(pol, engine_configs(pol), resolved_pol)
    if workload is not None and args.concurrency:
        from .serving.sweep import sweep

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
    from .plan import plan
    from .report import plan_dict, plan_table
    from .specs import load_hardware, load_model
    from .workload import load_workload

    model = load_model(args.model)
    workload, base = load_workload(args.workload)
    p_len, o_len = workload.means(base=base)
    hws = [load_hardware(h.strip()) for h in args.hardware.split(",") if h.strip()]
    if not hws:
        raise CrossoverError("--hardware needs at least one accelerator name")
    tps = tuple(int(x) for x in parse_list(args.tp, "--tp", integer=True))
    spec = speculation_from_args(args, workload.acceptance)
    slo_tpot = _number(args.slo_tpot_ms, "--slo-tpot-ms")
    slo_ttft = _number(args.slo_ttft_ms, "--slo-ttft-ms") if args.slo_ttft_ms is not None else None
    k_max = int(_number(args.k_max, "--k-max", integer=True)) if args.k_max else None
    res = plan(model, hws, spec, p_len, o_len, slo_tpot_ms=slo_tpot, slo_ttft_ms=slo_ttft, tps=tps, k_max=k_max)
    inputs = {"model": model.name, "workload": workload.name, "prompt_len": p_len, "output_len": o_len,
              "slo_tpot_ms": slo_tpot, "slo_ttft_ms": slo_ttft, "hardware": [h.name for h in hws], "tp": list(tps),
              "method": spec.method, "k": spec.k, "tau": round(spec.tau, 4)}
    if args.plot:
        from .plots import plot_plan

        plot_plan(res, inputs, args.plot)
    _emit(args, lambda: plan_dict(res), lambda: plan_table(res, inputs), inputs)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    """`crossover whatif`."""
    from .whatif import grid, parse_axis

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
        from .plots import plot_whatif

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


def _read_arms(args: argparse.Namespace):
    from .measurements import MeasuredTable, read_measurements

    if not args.files and not (args.on and args.off):
        raise CrossoverError("give --on FILES and --off FILES (or --files whose own fields name the arm)")
    points = read_measurements(args.off, arm="off", load_axis=args.load_axis) if args.off else []
    points += read_measurements(args.on, arm="on", load_axis=args.load_axis) if args.on else []
    points += read_measurements(args.files, arm=None, load_axis=args.load_axis) if args.files else []
    table = MeasuredTable(points)
    if not table.pairs():
        raise CrossoverError("no load level is measured in both arms; give --on and --off files of the same sweep")
    return table


def _measured_scenario(args: argparse.Namespace, table):
    """A scenario for the bound check and overlay of `crossover measured` (None without --model)."""
    if not args.model:
        return None
    if not args.hardware:
        raise CrossoverError("--model needs --hardware (and usually --tp) to check the points against physics")
    ns = argparse.Namespace(model=args.model, hardware=args.hardware, tp=args.tp, context=None, weight_dtype=None,
                            kv_dtype="bf16", method=args.method, draft=args.draft, draft_tp=None, draft_vocab="32000",
                            k=args.k, acceptance=None, tau=None, acceptance_per_position=None, match_rate=None,
                            bandwidth_fraction=None, flops_fraction=None, step_overhead_ms=None, transition=None,
                            expert_parallel=False, calibration=None)
    p_len, o_len = table.mean_lengths()
    return scenario_from_args(ns, p_len, o_len)


def cmd_measured(args: argparse.Namespace) -> int:
    """`crossover measured`."""
    from .physics import LIKELY_CAUSES, check
    from .report import measured_dict, measured_table

    table = _read_arms(args)
    scenario = _measured_scenario(args, table)
    checks = check(scenario[0], table.points) if scenario else []
    if args.plot:
        from .plots import plot_measured

        plot_measured(table, scenario, args.plot)
    _emit(args, lambda: measured_dict(table, checks), lambda: measured_table(table, checks, LIKELY_CAUSES))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """`crossover calibrate`."""
    import yaml

    from .calibration import Observation, calibrate
    from .report import calibration_dict, calibration_table

    table = _read_arms(args)
    if table.load_axis == "request_rate":
        raise CrossoverError("calibrate needs a concurrency or batch sweep: at a fixed request rate both arms deliver "
                             "the offered load (use --load-axis concurrency when the files record it)")
    p_len, o_len = table.mean_lengths()
    if args.prompt_len is not None or args.output_len is not None:
        p_len, o_len = _lengths(args)
    taus = [p.acceptance_length for p in table.arm("on") if p.acceptance_length]
    fit_acc = not taus and args.acceptance is None and args.tau is None and args.acceptance_per_position is None
    if taus and args.tau is None and args.acceptance is None and args.acceptance_per_position is None:
        args.tau = str(sum(taus) / len(taus))  # the files report it: use it, do not fit it
    sc, resolved = scenario_from_args(args, p_len, o_len)
    obs = [Observation(load, off.output_throughput, on.output_throughput, off.metrics.get("mean_tpot_ms"),
                       on.metrics.get("mean_tpot_ms"), f"{off.source} | {on.source}")
           for load, off, on in table.pairs()]
    fit = calibrate(sc, obs, fit_acceptance=fit_acc, load_axis=table.load_axis,
                    bootstrap=int(_number(args.bootstrap, "--bootstrap", integer=True, positive=False)))
    if args.out:
        if os.path.exists(args.out):
            raise CrossoverError(f"{args.out} exists; choose another --out (files are never overwritten)")
        try:
            with open(args.out, "x", encoding="utf-8") as fh:
                yaml.safe_dump(fit.to_yaml_dict(), fh, sort_keys=False)
        except OSError as exc:
            raise CrossoverError(f"cannot write {args.out}: {exc.strerror}") from None
        print(f"wrote {args.out}", file=sys.stderr)
    _emit(args, lambda: calibration_dict(fit), lambda: calibration_table(fit, resolved), resolved)
    return 0


def cmd_hardware(args: argparse.Namespace) -> int:
    """`crossover hardware list|show`."""
    return _spec_verb(args, "hardware")


def cmd_models(args: argparse.Namespace) -> int:
    """`crossover models list|show|import`."""
    if args.action == "import":
        import yaml

        from .specs.hf_import import import_config

        spec = import_config(args.config, args.name)
        text = yaml.safe_dump(spec, sort_keys=False)
        if args.out:
            if os.path.exists(args.out):
                raise CrossoverError(f"{args.out} exists; choose another --out (files are never overwritten)")
            try:
                with open(args.out, "x", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                raise CrossoverError(f"cannot write {args.out}: {exc.strerror}") from None
            print(f"wrote {args.out}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    return _spec_verb(args, "models")


def _spec_verb(args: argparse.Namespace, kind: str) -> int:
    from .report import spec_listing, spec_text
    from .specs.loader import available, resolve

    if args.action == "list":
        names = available(kind)  # type: ignore[arg-type]
        specs = [resolve(str(path), kind) for path in names.values()]  # type: ignore[arg-type]
        if args.json:
            print(json.dumps([s.model_dump(mode="json") for s in specs], indent=2))
        else:
            print(spec_listing(specs, kind))
        return 0
    if args.action == "show":
        spec = resolve(args.name, kind)  # type: ignore[arg-type]
        print(json.dumps(spec.model_dump(mode="json"), indent=2) if args.json else spec_text(spec))
        return 0
    raise CrossoverError(f"`crossover {kind}` needs an action: list, show" + (", import" if kind == "models" else ""))


def _validation_line(exc) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{field}: {msg}" if field else msg


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a verb; bad input gives one line on stderr and exit status 2."""
    from pydantic import ValidationError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.verb is None:
            parser.print_help()
            return 2
        verb = {"predict": cmd_predict, "simulate": cmd_simulate, "policy": cmd_policy, "whatif": cmd_whatif,
                "plan": cmd_plan, "report": cmd_report,
                "measured": cmd_measured,
                "calibrate": cmd_calibrate, "hardware": cmd_hardware, "models": cmd_models}[args.verb]
        return verb(args)
    except CrossoverError as exc:
        print(f"crossover: error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"crossover: error: {_validation_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
