"""The argument parser of the `crossover` command. Each verb's flags are added when that verb is
parsed or its help is shown (`_Parser(flags=...)`): a command builds only its own, so `measured`
never imports the step model for --cost's choices."""

from __future__ import annotations

import argparse

from ..api.build import (  # constants only: crossover.build imports the model stack when it builds
    DEFAULT_ACCEPTANCE,
    DEFAULT_CONTEXT,
    DEFAULT_HARDWARE,
    DEFAULT_K,
    DEFAULT_METHOD,
    DEFAULT_MODEL,
    MIN_SEQUENCES_FOR_AUTO_TP,
)
from .common import _Parser
from .serve_verb import SERVE_HELP, add_serve_flags


NO_DISTILLED_HELP = "the generic efficiency defaults, not the GPU's parameters distilled from measured kernel tables"


def _add_speculation_flags(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("speculation")
    s.add_argument("--method", default=DEFAULT_METHOD, help="draft, eagle, eagle3, medusa, ngram, mtp (default eagle)")
    s.add_argument("--draft", help="draft model for --method draft (name or path; `self`: the target itself, "
                                   "as in self-speculation)")
    s.add_argument("--draft-kv-budget", help="the draft attends to at most this many cached tokens (StreamingLLM/"
                                             "SnapKV self-speculation, as in MagicDec; default: the whole context)")
    s.add_argument("--allow-vocab-mismatch", action="store_true",
                   help="let a draft with another vocabulary than the target's through (engines refuse it)")
    s.add_argument("--draft-tp", help="draft model TP (default: the target's)")
    s.add_argument("--draft-vocab", default="32000", help="eagle3 reduced draft vocabulary (default 32000)")
    s.add_argument("--k", help=f"draft tokens per step (default {DEFAULT_K})")
    a = s.add_mutually_exclusive_group()
    a.add_argument("--acceptance", help=f"i.i.d. per-token acceptance rate in [0, 1) (default {DEFAULT_ACCEPTANCE})")
    a.add_argument("--tau", help="mean tokens per step, bonus included, as engines report it")
    a.add_argument("--acceptance-per-position", help="per-position acceptance rates as engines print them, e.g. 0.8,0.6,0.45")
    s.add_argument("--match-rate", help="ngram: share of steps whose context holds a match (default 1)")
    s.add_argument("--tree", help="draft tree: node paths as JSON ([[0],[1],[0,0]]: ranks of each node's tokens), "
                   "a preset (eagle1), or nodes per depth (4,4,2; 3x4), which places every node under the accepted "
                   "path (an upper bound on tau); sets k = depth")


def _add_scenario_flags(p: argparse.ArgumentParser) -> None:
    from ..model.step import COST_MODES

    g = p.add_argument_group("scenario")
    g.add_argument("--model", default=DEFAULT_MODEL, help=f"target model name or YAML path (default {DEFAULT_MODEL})")
    g.add_argument("--hardware", default=DEFAULT_HARDWARE, help=f"accelerator name or YAML path (default {DEFAULT_HARDWARE})")
    g.add_argument("--tp", help="tensor-parallel degree (default: the smallest of 1,2,4,8 that holds "
                                f"{MIN_SEQUENCES_FOR_AUTO_TP} sequences at the context)")
    g.add_argument("--context", help=f"tokens in each sequence's KV cache (default {DEFAULT_CONTEXT}, or "
                                     "prompt + output/2 when the lengths are known)")
    g.add_argument("--weight-dtype", help="bf16, fp8, int8, int4, mxfp4 (default: the model's own)")
    g.add_argument("--kv-dtype", default="bf16", help="KV-cache dtype (default bf16)")
    _add_speculation_flags(p)
    g.add_argument("--engine", help="engine profile: vllm (V1 0.11+, default), vllm-0.10, vllm-v0, sglang, trtllm, "
                                    "hf, or a YAML path (engines/*.yaml: per-step overheads, verify layout, CUDA-graph "
                                    "limits, sources)")
    g.add_argument("--cost", choices=sorted(COST_MODES), help="how a forward is priced: roofline (analytical, default) "
                                                             "or kernels (measured tables, pip install 'crossover[kernels]')")
    e = p.add_argument_group("efficiency (documented defaults; see README)")
    e.add_argument("--bandwidth-fraction", help="achieved fraction of peak memory bandwidth")
    e.add_argument("--flops-fraction", help="achieved fraction of peak dense FLOP/s")
    e.add_argument("--step-overhead-ms", help="fixed time per engine step")
    e.add_argument("--transition", choices=["smooth", "max", "sum"], help="memory/compute transition model")
    e.add_argument("--no-distilled", action="store_true", help=NO_DISTILLED_HELP)
    e.add_argument("--expert-parallel", action="store_true", help="MoE: experts split whole over the TP group")
    e.add_argument("--calibration", help="apply a fit saved by `crossover calibrate` (flags set here still win)")
    e.add_argument("--force-calibration", action="store_true", help="apply a --calibration fitted on another model, "
                                                                      "hardware or TP (prints what was transferred)")


def _add_measured_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on", nargs="+", metavar="FILE", help="result files or folders, speculation on")
    p.add_argument("--off", nargs="+", metavar="FILE", help="result files or folders, speculation off")
    p.add_argument("--files", nargs="+", metavar="FILE", help="files whose own fields say the arm (a CSV with an "
                                                               "`arm` column, SGLang JSONL)")
    p.add_argument("--load-axis", choices=["concurrency", "request_rate", "batch"],
                   help="force the load axis (default: from the files)")


def _add_list_show(p: argparse.ArgumentParser, what: str):
    """`crossover VERB list|show NAME`; returns the action subparsers for more actions."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.add_parser("list", help=f"names of all known {what}s").add_argument("--json", action="store_true")
    show = actions.add_parser("show", help=f"one {what}'s spec")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    return actions


def _predict_flags(pr: argparse.ArgumentParser) -> None:
    _add_scenario_flags(pr)
    pr.add_argument("--batch", help="batch sizes, e.g. 1,8,64 or 1..64 (default 1..512 in steps)")
    pr.add_argument("--breakdown", help="per-op and per-term step times off and on at this batch, and which cost "
                                        "mode (roofline, kernels) priced each op")
    pr.add_argument("--prompt-len", help="mean prompt tokens: the curves carry the prefill share (with --output-len)")
    pr.add_argument("--output-len", help="mean output tokens per request (with --prompt-len)")
    pr.add_argument("--json", action="store_true", help="one JSON object on stdout")
    pr.add_argument("--force", action="store_true", help="replace an existing --plot file")
    pr.add_argument("--plot", help="write a figure (PNG or SVG) of throughput and speedup against batch")


def _simulate_flags(sm: argparse.ArgumentParser) -> None:
    sm.add_argument("--workload", required=True, help="workload preset or YAML path (sharegpt, cnn-dailymail, "
                                                       "gsm8k, instructcoder, long-context, random-1024-128)")
    load = sm.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", help="closed-loop concurrency levels, e.g. 1,4,16,64")
    load.add_argument("--request-rate", help="open-loop Poisson request rates (req/s), e.g. 1,2,4,8")
    _add_scenario_flags(sm)
    sm.add_argument("--num-prompts", default="1000", help="requests per level (default 1000; a concurrency level "
                                                          "runs at least 10 rounds of its clients after the warm-up)")
    sm.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    sm.add_argument("--seed", default="0", help="random seed (default 0)")
    sm.add_argument("--burstiness", default="1", help="gamma shape of inter-arrival times, 1 = Poisson (default 1)")
    sm.add_argument("--max-num-seqs", default=None, help="engine limit on running sequences, both arms (default 256; "
                    "SGLang caps its speculating arms at 48 unless this is given)")
    sm.add_argument("--max-num-batched-tokens", default="8192", help="engine token budget per step (default 8192)")
    out = sm.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object on stdout")
    out.add_argument("--csv", help="write one row per level and arm to this file")
    sm.add_argument("--force", action="store_true", help="replace existing --csv / --plot files")
    sm.add_argument("--plot", help="write a figure (PNG or SVG) of throughput and latency against load")
    sm.add_argument("--policy", action="store_true",
                    help="add a third arm that applies the best-k schedule step by step (k = 0..--k by running batch)")
    sm.add_argument("--hysteresis", metavar="LOW,HIGH",
                    help="add a third arm that routes by queue length: speculate until the running batch rises "
                         "above HIGH, resume when it falls below LOW")


def _policy_flags(po: argparse.ArgumentParser) -> None:
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
    po.add_argument("--tree-nodes", help="also size a draft tree by load: the likeliest tree of each size up to "
                                         "this many nodes (depth <= --k-max), priced at every batch")
    po.add_argument("--json", action="store_true", help="one JSON object on stdout")
    po.add_argument("--force", action="store_true", help="replace an existing --plot file")
    po.add_argument("--plot", help="write a figure of every k's throughput and the schedule against batch")


def _report_flags(rp: argparse.ArgumentParser) -> None:
    _add_scenario_flags(rp)
    rp.add_argument("--batch", help="batch sizes of the table (default 1..512 in steps)")
    rp.add_argument("--workload", help="also simulate this workload (with --concurrency)")
    rp.add_argument("--concurrency", help="concurrency levels to simulate, e.g. 1,8,32,128")
    rp.add_argument("--num-prompts", default="1000", help="requests per simulated level (default 1000, as simulate)")
    rp.add_argument("--plan", action="store_true", help="add the capacity plan of this model, workload and "
                                                        "accelerator (with --plan-peak-rps, --plan-slo-tpot-ms)")
    rp.add_argument("--plan-peak-rps", help="--plan: peak requests per second")
    rp.add_argument("--plan-slo-tpot-ms", help="--plan: median TPOT objective, ms")
    rp.add_argument("--force", action="store_true", help="replace an existing index.html in --out")
    rp.add_argument("--out", required=True, help="directory to write index.html into (created if missing)")


def _plan_flags(pl: argparse.ArgumentParser) -> None:
    pl.add_argument("--model", default=DEFAULT_MODEL, help=f"target model (default {DEFAULT_MODEL})")
    pl.add_argument("--workload", required=True, help="prompt/output lengths: a preset (sharegpt, gsm8k, "
                                                      "cnn-dailymail, instructcoder, long-context, random-1024-128) "
                                                      "or a YAML path")
    dm = pl.add_argument_group("demand (one of)")
    dm.add_argument("--peak-rps", metavar="R", help="peak requests per second the fleet must serve")
    dm.add_argument("--peak-output-tokens-per-s", metavar="T", help="peak output tokens per second (over the "
                                                                    "workload's mean output length: requests/s)")
    dm.add_argument("--traffic", metavar="CSV", help="CSV `time,requests` (interval start in seconds or ISO 8601, "
                                                     "requests in it; equal intervals): sized for the peak, costed "
                                                     "over the trace")
    sl = pl.add_argument_group("latency SLOs, ms (as vllm bench serve reports them; at least one)")
    for name, what in (("tpot", "time per output token"), ("ttft", "time to first token"),
                       ("itl", "inter-token latency"), ("e2e", "end-to-end latency")):
        sl.add_argument(f"--slo-{name}-ms", metavar="MS", help=f"median (p50) {what}")
        sl.add_argument(f"--slo-p99-{name}-ms", metavar="MS", help=f"p99 {what}")
    dp = pl.add_argument_group("deployment options (comma lists are searched)")
    dp.add_argument("--hardware", metavar="LIST", default="h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x",
                    help="accelerators (default h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x; `crossover hardware "
                         "list` names them all)")
    dp.add_argument("--tp", metavar="LIST", default="1,2,4,8", help="TP degrees (default 1,2,4,8)")
    dp.add_argument("--weight-dtype", metavar="LIST", help="weight dtypes, e.g. bf16,fp8 (default: the model's own)")
    dp.add_argument("--kv-dtype", metavar="LIST", default="bf16", help="KV-cache dtypes, e.g. bf16,fp8 (default bf16)")
    dp.add_argument("--max-num-seqs", metavar="LIST", default="256", help="max running sequences per replica "
                                                                         "(default 256, vLLM's)")
    dp.add_argument("--max-num-batched-tokens", metavar="N", default="8192", help="token budget per step in the "
                                                                                  "simulator (default 8192)")
    dp.add_argument("--expert-parallel", action="store_true", help="MoE: experts split whole over the TP group")
    dp.add_argument("--k-max", metavar="K", help="largest k for the on (best k) and routed arms (default --k)")
    _add_speculation_flags(pl)
    pr_ = pl.add_argument_group("cost (defaults: hardware/*.yaml prices with their sources)")
    pr_.add_argument("--price", metavar="GPU=USD", action="append",
                     help="rental USD per GPU-hour, e.g. h100-sxm=2.49,b200=5 (repeatable); the output names the "
                          "GPUs left unpriced")
    pr_.add_argument("--price-file", metavar="FILE", help="YAML: GPU name -> USD per GPU-hour, or -> "
                                                          "{price_per_hour_usd, purchase_usd_per_gpu | "
                                                          "purchase_usd_per_node, tdp_w}")
    pr_.add_argument("--cost-basis", default="rental", choices=["rental", "ownership"],
                     help="rank by renting or owning (default rental)")
    pr_.add_argument("--power-cost", metavar="USD", help="USD per kWh for ownership's power (default: power not "
                                                         "priced)")
    pr_.add_argument("--pue", metavar="X", default="1.0", help="power usage effectiveness (default 1.0: the board "
                                                               "alone)")
    pr_.add_argument("--years", metavar="Y", default="5", help="amortisation period of a purchase (default 5, an "
                                                               "assumption)")
    sv = pl.add_argument_group("verification in the serving simulator")
    sv.add_argument("--verify", metavar="N", default="5", help="finalists simulated at the planned load (default 5; "
                                                               "0: none)")
    sv.add_argument("--retry-replicas", metavar="N", default="2", help="a finalist whose simulated latencies miss an SLO is "
                                                          "simulated again with 1, 2, ... more replicas, up to this "
                                                          "many, before it is demoted (default 2; 0: demote at once)")
    sv.add_argument("--num-prompts", metavar="N", default="600", help="requests per simulated finalist (default "
                                                                      "600)")
    sv.add_argument("--burstiness", metavar="X", default="1.0", help="gamma shape of inter-arrivals (1 = Poisson, "
                                                                     "vllm bench serve's default; < 1 burstier)")
    sv.add_argument("--seed", metavar="N", default="0", help="random seed (default 0)")
    sv.add_argument("--jobs", metavar="N", help="processes for the simulations (default: all cores)")
    pl.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    pl.add_argument("--json", action="store_true", help="one JSON object on stdout")
    pl.add_argument("--force", action="store_true", help="replace an existing --plot file")
    pl.add_argument("--plot", metavar="FILE", help="write a figure (PNG or SVG): cost per million output tokens and "
                                                   "GPUs against the TPOT SLO, per option")


def _whatif_flags(wi: argparse.ArgumentParser) -> None:
    _add_scenario_flags(wi)
    wi.add_argument("--x", default="batch=1..512", help="x axis, e.g. batch=1..512 (default)")
    wi.add_argument("--y", default="k=1..8", help="y axis, e.g. k=1..8 (default), acceptance=0.4..0.9, "
                                                  "context=512..65536, hardware=h100-sxm,a100-80gb-sxm")
    wi.add_argument("--points", default="64", help="points on a LOW..HIGH axis (default 64)")
    wi.add_argument("--csv", help="write x, y, speedup rows to this file")
    wi.add_argument("--force", action="store_true", help="replace existing --csv / --plot files")
    wi.add_argument("--plot", help="write a heatmap of the speedup with the crossover contour")
    wi.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _measured_flags(me: argparse.ArgumentParser) -> None:
    _add_measured_flags(me)
    me.add_argument("--model", help="with --hardware: the model's prediction beside each level, and every point "
                                    "checked against the physical bound (default: the files' model_id)")
    me.add_argument("--hardware", help="accelerator of the measurement (name or path)")
    me.add_argument("--tp", help="tensor-parallel degree of the measurement")
    me.add_argument("--method", help="speculation method (for the bound and the overlay; default: the one SGLang "
                                     f"files name, else {DEFAULT_METHOD})")
    me.add_argument("--draft", help="draft model for --method draft")
    me.add_argument("--k", default=None, help=f"draft tokens per step (default: the engine metrics' or {DEFAULT_K})")
    me.add_argument("--engine", help="engine profile of the measurement: vllm (V1 0.11+; the default, sglang for SGLang "
                                     "bench_serving files), vllm-0.10, vllm-v0, sglang, trtllm, hf (engines/*.yaml)")
    me.add_argument("--engine-metrics", metavar="FILE[,BEFORE]",
                    help="the server's acceptance: a vLLM log with SpecDecoding metrics lines, or a /metrics "
                         "scrape taken after the run (with a second scrape taken before it, subtracted); gives tau, "
                         "k and, with n-gram, the match rate (drafts per request step)")
    me.add_argument("--no-distilled", action="store_true", help=NO_DISTILLED_HELP)
    me.add_argument("--force-calibration", action="store_true", help="apply a --calibration fitted on another "
                                                                       "model, hardware or TP")
    me.add_argument("--calibration", help="predict beside the measurement with a fit saved by `crossover calibrate` "
                                          "(e.g. one made on another sweep: a hold-out check)")
    me.add_argument("--strict", action="store_true", help="exit 2 when a point beats the speed-of-light bound")
    me.add_argument("--json", action="store_true", help="one JSON object on stdout")
    me.add_argument("--force", action="store_true", help="replace an existing --plot file")
    me.add_argument("--plot", help="write a figure of the measured points (over the predicted curves with --model)")


def _calibrate_flags(ca: argparse.ArgumentParser) -> None:
    _add_measured_flags(ca)
    _add_scenario_flags(ca)
    ca.add_argument("--out", help="write the fit here as YAML (default: print only)")
    ca.add_argument("--force", action="store_true", help="replace an existing --out file")
    ca.add_argument("--prompt-len", help="mean prompt tokens, when the files do not record total_input_tokens")
    ca.add_argument("--output-len", help="mean output tokens, when the files do not record total_output_tokens")
    ca.add_argument("--bootstrap", default="60", help="bootstrap refits for the crossover interval (default 60)")
    ca.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    ca.set_defaults(model=None)  # no silent default: the files' model_id, else an error asking for --model
    model_flag = next(a for a in ca._actions if a.dest == "model")
    model_flag.help = "target model name or YAML path (default: the files' model_id)"
    ca.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _hardware_flags(p: argparse.ArgumentParser) -> None:
    _add_list_show(p, "accelerator")


def _models_flags(p: argparse.ArgumentParser) -> None:
    mds = _add_list_show(p, "model")
    im = mds.add_parser("import", help="turn a Hugging Face config.json into a model spec (offline)")
    im.add_argument("config")
    im.add_argument("--name", help="spec name (default: the config's folder name)")
    im.add_argument("--out", help="write the YAML here (default stdout)")
    im.add_argument("--force", action="store_true", help="replace an existing --out file")
    _add_max_input(im)


def _add_max_input(p: argparse.ArgumentParser) -> None:
    """Every verb reads its inputs through crossover.files."""
    p.add_argument("--max-input-mb", metavar="MB", help="largest input file read, in MB (default 512, or "
                                                        "CROSSOVER_MAX_INPUT_MB)")


# The verbs in the order `crossover --help` lists them: name, keywords of add_parser, the function
# that adds the verb's flags (run when the verb is parsed or its help shown; --max-input-mb last).
VERBS = (
    ("predict", dict(help="on/off throughput over batch and the crossover batch"), _predict_flags),
    ("simulate", dict(help="simulate a serving benchmark sweep, speculation off and on"), _simulate_flags),
    ("policy", dict(help="the best k at each batch, as a schedule and engine configs"), _policy_flags),
    ("report", dict(help="one self-contained HTML page of a scenario, for a design review"), _report_flags),
    ("plan", dict(
        help="how many GPUs of which kind, deployed how, at what cost, speculation on or off",
        description="Which accelerators to buy or rent, how many, deployed how, and whether to turn speculation on. "
                    "Every --hardware x --tp x dtype x speculation arm (off, on at its best k, routed by load) is "
                    "sized for the demand under the SLOs, priced and ranked; the best --verify are checked in the "
                    "serving simulator. The first line of the output is the answer. Give a --workload, one demand "
                    "and at least one SLO.",
        epilog="example: crossover plan --model llama-3.1-70b --workload sharegpt --peak-rps 50 --slo-tpot-ms 50 "
               "--hardware h100-sxm,h200,b200 --weight-dtype bf16,fp8 --price b200=5"), _plan_flags),
    ("whatif", dict(help="speedup over two axes (batch, k, acceptance, context, hardware)"), _whatif_flags),
    ("measured", dict(help="the measured on/off table and crossover of benchmark result files"), _measured_flags),
    ("calibrate", dict(help="fit efficiencies, overheads and acceptance to a measured sweep"), _calibrate_flags),
    ("serve", dict(help=SERVE_HELP), add_serve_flags),
    ("hardware", dict(help="list or show accelerator specs"), _hardware_flags),
    ("models", dict(help="list or show model specs"), _models_flags),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `crossover` command."""
    p = _Parser(prog="crossover", description="Predict where speculative decoding stops paying off.")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name, kw, flags in VERBS:
        sub.add_parser(name, flags=(flags, _add_max_input), **kw)
    return p
