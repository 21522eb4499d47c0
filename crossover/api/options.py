"""Every option of every verb, declared once: its keyword, the default the code uses (from `crossover.defaults`),
its help, unit and flag. The CLI's argparse flags and their help are generated from these records (`cli/parser.py`),
so a flag's help always states the default the library applies; `tests/test_options.py` checks each record against
the API function that takes the keyword. Light on purpose (the parser imports it): nothing here imports the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .. import defaults as d

NO_DISTILLED_HELP = "the generic efficiency defaults, not the GPU's parameters distilled from measured kernel tables"


def shown(value: Any) -> str:
    """A default as the help and the command line write it: 1,2,4,8 for a tuple, 0.7, 1000, bf16."""
    if isinstance(value, (tuple, list)):
        return ",".join(shown(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True)
class Option:
    """One option: `name` is the API keyword and the argparse dest; `default` the value the code uses
    when the option is not given (None: no value, or one `default_text` describes). `kind`: value (the
    flag takes a value), switch (present or not), files (one or more paths), append (repeatable).
    `passed`: the CLI passes the default itself (else it passes nothing and the library decides, as
    for a default that depends on other inputs). `api`: the keyword of the API function, when it is
    not `name` (None: the API has no such keyword)."""

    name: str
    help: str
    default: Any = None
    kind: str = "value"
    unit: str | None = None
    default_text: str | None = None  # a default that is no single value ("the model's own")
    note: str | None = None  # said after the default ("or prompt + output/2 when the lengths are known")
    passed: bool = True
    flag: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    group: str | None = None  # the argparse group's title
    exclusive: str | None = None  # options sharing this name exclude each other
    api: str | None = ""  # "" = name

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def keyword(self) -> str | None:
        return self.name if self.api == "" else self.api

    @property
    def help_text(self) -> str:
        """The help line: what the option is, then its default."""
        if self.default is not None:
            said = f"default {shown(self.default)}" + (f" {self.unit}" if self.unit else "")
        elif self.default_text:
            said = f"default: {self.default_text}"
        else:
            return self.help
        return f"{self.help} ({said}{'; ' + self.note if self.note else ''})"

    @property
    def argparse_default(self) -> str | None:
        return shown(self.default) if self.passed and self.default is not None and self.kind == "value" else None

    def but(self, **changes: Any) -> "Option":
        """This option with other fields (a verb that words or defaults it its own way)."""
        return replace(self, **changes)


O = Option
SPEC_LIBRARY = "(name or YAML path)"

# --- speculation: the method, its draft and its acceptance
SPECULATION = (
    O("method", "draft, eagle, eagle3, medusa, ngram, mtp", d.DEFAULT_METHOD, group="speculation"),
    O("draft", "draft model for --method draft (name or path; `self`: the target itself, as in self-speculation)",
      group="speculation"),
    O("draft_kv_budget", "the draft attends to at most this many cached tokens (StreamingLLM/SnapKV "
      "self-speculation, as in MagicDec)", default_text="the whole context", unit="tokens", group="speculation"),
    O("allow_vocab_mismatch", "let a draft with another vocabulary than the target's through (engines refuse it)",
      kind="switch", group="speculation"),
    O("draft_tp", "draft model TP", default_text="the target's", group="speculation"),
    O("draft_vocab", "eagle3 reduced draft vocabulary", d.DEFAULT_DRAFT_VOCAB, passed=False, group="speculation"),
    O("k", "draft tokens per step", d.DEFAULT_K, passed=False, group="speculation"),
    O("acceptance", "i.i.d. per-token acceptance rate in [0, 1)", d.DEFAULT_ACCEPTANCE, passed=False,
      note="else a calibration's or the workload's, when given", group="speculation", exclusive="acceptance"),
    O("tau", "mean tokens per step, bonus included, as engines report it", group="speculation", exclusive="acceptance"),
    O("acceptance_per_position", "per-position acceptance rates as engines print them, e.g. 0.8,0.6,0.45",
      group="speculation", exclusive="acceptance", api="per_position"),
    O("match_rate", "ngram: share of steps whose context holds a match", d.DEFAULT_NGRAM_MATCH_RATE, passed=False,
      note="the workload's where it gives one; 1 for the other methods", group="speculation"),
    O("tree", "draft tree: node paths as JSON ([[0],[1],[0,0]]: ranks of each node's tokens), a preset (eagle1), "
      "or nodes per depth (4,4,2; 3x4), which places every node under the accepted path (an upper bound on tau); "
      "sets k = depth", group="speculation"),
)

SAMPLING_OPTIONS = ("temperature", "top_p", "top_k", "repetition_penalty", "frequency_penalty", "presence_penalty")
# the scenario's settings of the servers' launch that measured takes beside the files (a launch file gives them too)
LAUNCH_SCENARIO = ("weight_dtype", "kv_dtype", "cuda_graphs", "cuda_graphs_speculating", "cuda_graph_max",
                   "chunked_prefill", "async_scheduling", "mla_verify", "gpu_memory_utilization")
# --- a scenario: model, hardware, deployment, engine, cost mode
SCENARIO = (
    O("model", f"target model {SPEC_LIBRARY}", d.DEFAULT_MODEL, group="scenario"),
    O("hardware", f"accelerator {SPEC_LIBRARY}", d.DEFAULT_HARDWARE, group="scenario"),
    O("tp", "tensor-parallel degree", default_text=f"the smallest of {shown(d.AUTO_TP)} that holds "
      f"{d.MIN_SEQUENCES_FOR_AUTO_TP} sequences at the context", group="scenario"),
    O("data_parallel", "data-parallel ranks of --tp GPUs each, the load balanced over them; a MoE's experts over all "
      "(vLLM -dp; SGLang's --tp T --dp D --enable-dp-attention is --tp T/D --dp D)", 1, flag="--dp", group="scenario"),
    O("context", "tokens in each sequence's KV cache", d.DEFAULT_CONTEXT, passed=False,
      note="or prompt + output/2 when the lengths are known", group="scenario"),
    O("weight_dtype", "bf16, fp8, int8, int4, fp4 (NVFP4), mxfp4", default_text="the model's own", group="scenario"),
    O("kv_dtype", "KV-cache dtype", d.DEFAULT_KV_DTYPE, group="scenario"),
    O("engine", "engine profile: vllm (V1 0.11+), vllm-0.10, vllm-v0, sglang, sglang-0.4, trtllm, hf, or a YAML path "
      "(engines/*.yaml: overheads, verify layout, graph limits, sources)", d.DEFAULT_ENGINE, passed=False, group="scenario"),
    O("cuda_graphs", "the engine's CUDA-graph mode: full (uniform steps replay a full graph), piecewise (vLLM V1: "
      "attention outside the graph every step), none (--enforce-eager / --disable-cuda-graph)",
      default_text="the engine profile's", choices=("full", "none", "piecewise"), group="scenario"),
    O("cuda_graphs_speculating", "the speculating server's CUDA-graph mode where it differs from the other's",
      default_text="--cuda-graphs", choices=("full", "none", "piecewise"), group="scenario"),
    O("cuda_graph_max", "the largest CUDA graph captured (vLLM V1 --max-cudagraph-capture-size: tokens; SGLang "
      "--cuda-graph-max-bs: requests); larger steps run eagerly", default_text="the engine's", metavar="N", group="scenario"),
    O("chunked_prefill", "whether the engine prefills prompt chunks beside decodes", default_text="the engine profile's",
      choices=("off", "on"), group="scenario"),
    O("async_scheduling", "whether the engine schedules the next step while the GPU runs this one: vLLM V1's --[no-]async-"
      "scheduling (kept while speculating with EAGLE-type drafts only), SGLang's and TensorRT-LLM's overlap scheduler (off: "
      "--disable-overlap-schedule; SGLang on: spec v2 keeps it while speculating, 0.5.11+)", choices=("off", "on"),
      default_text="the profile's", group="scenario"),
    O("mla_verify", "how the server's MLA backend runs verify tokens: prefill (vLLM 0.10, CUTLASS or Triton MLA) or "
      "decode (FlashInfer MLA, FlashMLA, SGLang)", default_text="the engine's on this GPU", choices=("decode", "prefill"), group="scenario"),
    O("gpu_memory_utilization", "share of each GPU's memory the engine takes (weights, KV cache, activations)",
      d.DEFAULT_GPU_MEMORY_UTILIZATION, group="scenario"),
    O("temperature", "the requests' sampling temperature (> 0: a random draw; acceptance is given apart)",
      default_text="0, greedy", group="scenario"),
    O("top_p", "the requests' top-p (< 1: vLLM sorts the vocabulary of each row)", default_text="1, off", group="scenario"),
    O("top_k", "the requests' top-k (-1 or 0: off)", default_text="off", group="scenario"),
    *(O(f"{n}_penalty", f"the requests' {n} penalty (any penalty: bin counts over the vocabulary on each row)",
        default_text=off, group="scenario") for n, off in (("repetition", "1, off"), ("frequency", "0, off"),
                                                           ("presence", "0, off"))),
    O("cost", "how a forward is priced: roofline (analytical) or kernels (measured tables, pip install "
      "'crossover[kernels]')", d.DEFAULT_COST, passed=False, choices=("kernels", "roofline"), group="scenario"),
)

EFFICIENCY_GROUP = "efficiency (documented defaults; see docs/guide/engines-and-cost-modes.md)"
EFFICIENCY = tuple(o.but(group=EFFICIENCY_GROUP) for o in (
    O("bandwidth_fraction", "achieved fraction of peak memory bandwidth", default_text="the hardware's, sourced"),
    O("flops_fraction", "achieved fraction of peak dense FLOP/s", default_text="the hardware's, sourced"),
    O("step_overhead_ms", "fixed time per engine step", default_text="the engine profile's", unit="ms"),
    O("transition", "memory/compute transition model", choices=("smooth", "max", "sum"), default_text="the hardware's"),
    O("no_distilled", NO_DISTILLED_HELP, kind="switch", api="distilled"),
    O("expert_parallel", "MoE: experts split whole over the TP group", kind="switch"),
    O("calibration", "apply a fit saved by `crossover calibrate` (flags set here still win)"),
    O("force_calibration", "apply a --calibration fitted on another model, hardware or TP (prints what was "
      "transferred)", kind="switch"),
))

# --- the outputs most verbs share
JSON = O("json", "one JSON object on stdout", kind="switch", api=None)
FORCE_PLOT = O("force", "replace an existing --plot file", kind="switch", api=None)
LENGTHS = (
    O("prompt_len", "mean prompt tokens: the curves carry the prefill share (with --output-len)", unit="tokens"),
    O("output_len", "mean output tokens per request (with --prompt-len)", unit="tokens"),
)

PREDICT = (
    O("batch", "batch sizes, e.g. 1,8,64 or 1..64", d.DEFAULT_BATCHES, passed=False, api="batches"),
    O("breakdown", "per-op and per-term step times off and on at this batch, and which cost mode (roofline, "
      "kernels) priced each op", api=None),
    *LENGTHS, JSON, FORCE_PLOT,
    O("plot", "write a figure (PNG or SVG) of throughput and speedup against batch", api=None),
)

WORKLOADS = "sharegpt, cnn-dailymail, gsm8k, instructcoder, long-context, random-1024-128"
SIMULATE_LOAD = (
    O("concurrency", "closed-loop concurrency levels, e.g. 1,4,16,64", exclusive="load"),
    O("request_rate", "open-loop Poisson request rates (req/s), e.g. 1,2,4,8", exclusive="load"),
)
SIMULATE = (
    O("num_prompts", "requests per level (a concurrency level runs at least 10 rounds of its clients after the "
      "warm-up)", d.DEFAULT_NUM_PROMPTS),
    O("quiet", "no progress line on stderr", kind="switch", api=None),
    O("seed", "random seed", d.DEFAULT_SEED),
    O("burstiness", "gamma shape of inter-arrival times, 1 = Poisson", d.DEFAULT_BURSTINESS),
    O("max_num_seqs", "engine limit on running sequences, both arms", default_text=d.ENGINE_SEQS_TEXT,
      note="SGLang caps its speculating arms at 48 unless this is given"),
    O("max_num_batched_tokens", "engine token budget per step", default_text=d.ENGINE_TOKENS_TEXT, unit="tokens"),
    O("json", "one JSON object on stdout", kind="switch", exclusive="out", api=None),
    O("csv", "write one row per level and arm to this file", exclusive="out", api=None),
    O("force", "replace existing --csv / --plot files", kind="switch", api=None),
    O("plot", "write a figure (PNG or SVG) of throughput and latency against load", api=None),
    O("policy", "add a third arm that applies the best-k schedule step by step (k = 0..--k by running batch)",
      kind="switch"),
    O("hysteresis", "add a third arm that routes by queue length: speculate until the running batch rises above "
      "HIGH, resume when it falls below LOW", metavar="LOW,HIGH"),
)

POLICY = (
    O("k_max", "largest k considered", d.DEFAULT_K_MAX),
    O("batch_max", "schedule up to this batch", default_text="the memory limit, at most 1024"),
    O("prompt_len", "mean prompt tokens (with --output-len): the prefill share counts", unit="tokens"),
    O("output_len", "mean output tokens per request", unit="tokens"),
    O("draft_model_id", "the draft's repository id to write into the engine configs"),
    O("adaptive", "also model adaptive verification (confidence-scheduled, DSpark-style load budget)", kind="switch"),
    O("confidence_threshold", "adaptive: stop drafting below this cumulative confidence",
      d.DEFAULT_CONFIDENCE_THRESHOLD),
    O("confidence_concentration", "adaptive: Beta concentration of the draft's confidences; small = informative",
      d.DEFAULT_CONFIDENCE_CONCENTRATION),
    O("tree_nodes", "also size a draft tree by load: the likeliest tree of each size up to this many nodes "
      "(depth <= --k-max), priced at every batch"),
    JSON, FORCE_PLOT,
    O("plot", "write a figure of every k's throughput and the schedule against batch", api=None),
)

REPORT = (
    O("batch", "batch sizes of the table", d.DEFAULT_BATCHES, passed=False, api=None),
    O("workload", "also simulate this workload (with --concurrency)", api=None),
    O("concurrency", "concurrency levels to simulate, e.g. 1,8,32,128", api=None),
    O("num_prompts", "requests per simulated level (as simulate)", d.DEFAULT_NUM_PROMPTS, api=None),
    O("plan", "add the capacity plan of this model, workload and accelerator (with --plan-peak-rps, "
      "--plan-slo-tpot-ms)", kind="switch", api=None),
    O("plan_peak_rps", "--plan: peak requests per second", api=None),
    O("plan_slo_tpot_ms", "--plan: median TPOT objective", unit="ms", api=None),
    O("force", "replace an existing index.html in --out", kind="switch", api=None),
    O("out", "directory to write index.html into (created if missing)", required=True, api=None),
)

# --- plan: demand, SLOs, the deployments searched, costs, verification
DEMAND_GROUP = "demand (one of)"
SLO_GROUP = "latency SLOs, ms (as vllm bench serve reports them; at least one)"
SLO_METRICS = (("tpot", "time per output token"), ("ttft", "time to first token"), ("itl", "inter-token latency"),
               ("e2e", "end-to-end latency"))
SLO = tuple(opt for name, what in SLO_METRICS for opt in (
    O(f"slo_{name}_ms", f"median (p50) {what}", metavar="MS", group=SLO_GROUP, api=f"{name}_ms"),
    O(f"slo_p99_{name}_ms", f"p99 {what}", metavar="MS", group=SLO_GROUP, api=f"p99_{name}_ms")))
DEPLOY_GROUP = "deployment options (comma lists are searched)"
COST_GROUP = "cost (defaults: hardware/*.yaml prices with their sources)"
VERIFY_GROUP = "verification in the serving simulator"
PLAN = (
    O("model", "target model", d.DEFAULT_MODEL, api=None),
    O("workload", f"prompt/output lengths: a preset ({WORKLOADS}) or a YAML path", required=True, api=None),
    O("peak_rps", "peak requests per second the fleet must serve", metavar="R", group=DEMAND_GROUP),
    O("peak_output_tokens_per_s", "peak output tokens per second (over the workload's mean output length: "
      "requests/s)", metavar="T", group=DEMAND_GROUP),
    O("traffic", "CSV `time,requests` (interval start in seconds or ISO 8601, requests in it; equal intervals): "
      "sized for the peak, costed over the trace", metavar="CSV", group=DEMAND_GROUP),
    *SLO,
    O("hardware", "accelerators (`crossover hardware list`)", d.PLAN_HARDWARE, metavar="LIST", group=DEPLOY_GROUP),
    O("tp", "TP degrees", d.PLAN_TP, metavar="LIST", group=DEPLOY_GROUP),
    O("weight_dtype", "weight dtypes, e.g. bf16,fp8", default_text="the model's own, and fp8 on GPUs with fp8 "
      "tensor cores", metavar="LIST", group=DEPLOY_GROUP),
    O("kv_dtype", "KV-cache dtypes, e.g. bf16,fp8", (d.DEFAULT_KV_DTYPE,), metavar="LIST", group=DEPLOY_GROUP),
    O("max_num_seqs", "max running sequences per replica", default_text=d.ENGINE_SEQS_TEXT,
      metavar="LIST", group=DEPLOY_GROUP),
    O("max_num_batched_tokens", "token budget per step in the simulator", default_text=d.ENGINE_TOKENS_TEXT,
      metavar="N", group=DEPLOY_GROUP),
    O("expert_parallel", "MoE: experts split whole over the TP group", kind="switch", group=DEPLOY_GROUP),
    O("data_parallel", "data-parallel ranks per replica, e.g. 1,8", (1,), flag="--dp", metavar="LIST", group=DEPLOY_GROUP),
    O("k_max", "largest k for the on (best k) and routed arms", default_text="--k", metavar="K", group=DEPLOY_GROUP),
)
PLAN_COSTS = (
    O("price", "rental USD per GPU-hour, e.g. h100-sxm=2.49,b200=5 (repeatable); the output names the GPUs left "
      "unpriced", kind="append", metavar="GPU=USD", group=COST_GROUP),
    O("price_file", "YAML: GPU name -> USD per GPU-hour, or -> {price_per_hour_usd, purchase_usd_per_gpu | "
      "purchase_usd_per_node, tdp_w}", metavar="FILE", group=COST_GROUP),
    O("cost_basis", "rank by renting or owning", d.DEFAULT_COST_BASIS, choices=("rental", "ownership"), group=COST_GROUP),
    O("power_cost", "USD per kWh for ownership's power", default_text="power not priced", metavar="USD",
      group=COST_GROUP),
    O("pue", "power usage effectiveness (1: the board alone)", d.DEFAULT_PUE, metavar="X", group=COST_GROUP),
    O("years", "amortisation period of a purchase (an assumption)", d.DEFAULT_YEARS, metavar="Y", group=COST_GROUP),
    O("verify", "finalists simulated at the planned load (0: none)", d.DEFAULT_VERIFY, metavar="N", group=VERIFY_GROUP),
    O("retry_replicas", "a finalist whose simulated latencies miss an SLO is simulated again with 1, 2, ... more "
      "replicas, up to this many, before it is demoted (0: demote at once)", d.DEFAULT_RETRY_REPLICAS, metavar="N",
      group=VERIFY_GROUP),
    O("num_prompts", "requests per simulated finalist", d.DEFAULT_SIM_PROMPTS, metavar="N", group=VERIFY_GROUP),
    O("burstiness", "gamma shape of inter-arrivals (1 = Poisson, vllm bench serve's default; < 1 burstier)",
      d.DEFAULT_BURSTINESS, metavar="X", group=VERIFY_GROUP),
    O("seed", "random seed", d.DEFAULT_SEED, metavar="N", group=VERIFY_GROUP),
    O("jobs", "processes for the simulations", default_text="all cores", metavar="N", group=VERIFY_GROUP),
    O("quiet", "no progress line on stderr", kind="switch", api=None),
    JSON, FORCE_PLOT,
    O("plot", "write a figure (PNG or SVG): cost per million output tokens and GPUs against the TPOT SLO, per "
      "option", metavar="FILE", api=None),
)

WHATIF = (
    O("x", "x axis, e.g. batch=1..512", d.DEFAULT_WHATIF_X),
    O("y", "y axis, e.g. k=1..8, acceptance=0.4..0.9, context=512..65536, hardware=h100-sxm,a100-80gb-sxm",
      d.DEFAULT_WHATIF_Y),
    O("points", "points on a LOW..HIGH axis", d.DEFAULT_WHATIF_POINTS),
    O("csv", "write x, y, speedup rows to this file", api=None),
    O("force", "replace existing --csv / --plot files", kind="switch", api=None),
    O("plot", "write a heatmap of the speedup with the crossover contour", api=None),
    JSON,
)

# --- measured sweeps
FILES = (
    O("on", "result files or folders, speculation on", kind="files", metavar="FILE"),
    O("off", "result files or folders, speculation off", kind="files", metavar="FILE"),
    O("files", "files whose own fields say the arm (a CSV with an `arm` column, SGLang JSONL)", kind="files",
      metavar="FILE"),
    O("load_axis", "force the load axis", choices=("concurrency", "request_rate", "batch"),
      default_text="from the files"),
)
MEASURED = (
    O("model", "with --hardware: the model's prediction beside each level, and every point checked against the "
      "physical bound", default_text="the files' model_id"),
    O("hardware", f"accelerator of the measurement {SPEC_LIBRARY}"),
    O("tp", "tensor-parallel degree of the measurement"),
    *(o.but(default=None, passed=False, default_text="the launch configuration's, else 1") for o in SCENARIO
      if o.name == "data_parallel"),
    O("method", "speculation method (for the bound and the overlay)",
      default_text=f"the one SGLang files name, else {d.DEFAULT_METHOD}"),
    O("draft", "draft model for --method draft"),
    O("k", "draft tokens per step", default_text=f"the engine metrics' or {d.DEFAULT_K}"),
    O("engine", "engine profile of the measurement: vllm (V1 0.11+), vllm-0.10, vllm-v0, sglang, sglang-0.4, trtllm, hf "
      "(engines/*.yaml)", default_text="vllm, sglang for SGLang bench_serving files"),
    O("engine_metrics", "the server's acceptance: a vLLM log with SpecDecoding metrics lines, or a /metrics scrape "
      "taken after the run (with a second scrape taken before it, subtracted); gives tau, k and, with n-gram, the "
      "match rate (drafts per request step)", metavar="FILE[,BEFORE]"),
    O("no_distilled", NO_DISTILLED_HELP, kind="switch", api="distilled"),
    O("force_calibration", "apply a --calibration fitted on another model, hardware or TP", kind="switch"),
    O("calibration", "predict beside the measurement with a fit saved by `crossover calibrate` (e.g. one made on "
      "another sweep: a hold-out check)"),
    O("prompt_len", "mean prompt tokens the sweep ran (with --output-len): the physics check's bound with the "
      "prefill share and the prediction beside it", unit="tokens", default_text="the files' token counts"),
    O("output_len", "mean output tokens per request the sweep ran (with --prompt-len)", unit="tokens",
      default_text="the files' token counts"),
    O("strict", "exit 2 when a point beats a speed-of-light bound (decode only, or with the prefill share)",
      kind="switch", api=None),
    O("server_args", "the servers' launch configurations: a vLLM or SGLang command line, a --speculative-config "
      "JSON or a server startup log, one file or one per server (the speculating one by its method); what they "
      "say fills every setting not given (method, k, draft, TP, dtypes, CUDA graphs, chunked prefill, memory)",
      kind="files", metavar="FILE"),
    *(o.but(group=None) for o in (*SPECULATION, *EFFICIENCY) if o.name in ("draft_tp", "expert_parallel")),
    *(o.but(group=None, help=o.help + " of the measurement", default=None, passed=False,
            default_text="the launch configuration's (--server-args), else " + (o.default_text or shown(o.default)))
      for o in SCENARIO if o.name in LAUNCH_SCENARIO),
    *(o.but(group=None) for o in SCENARIO if o.name in SAMPLING_OPTIONS),
    JSON, FORCE_PLOT,
    O("plot", "write a figure of the measured points (over the predicted curves with --model)", api=None),
)
CALIBRATE = (
    O("out", "write the fit here as YAML (only a fit that reproduces the sweep, without --force)",
      default_text="print only", api=None),
    O("force", "replace an existing --out file, and write a fit that does not reproduce the sweep", kind="switch",
      api=None),
    O("prompt_len", "mean prompt tokens, when the files do not record total_input_tokens", unit="tokens"),
    O("output_len", "mean output tokens, when the files do not record total_output_tokens", unit="tokens"),
    O("bootstrap", "bootstrap refits for the crossover interval", d.DEFAULT_BOOTSTRAP),
    O("quiet", "no progress line on stderr", kind="switch", api=None),
    JSON,
)
# calibrate has no silent default model: the files' model_id, else an error asking for --model
CALIBRATE_MODEL = SCENARIO[0].but(default=None, default_text="the files' model_id")

# --- sweep-plan: the two-server sweep the model plans (issue 24)
SWEEP_PLAN_CLIENTS = ("vllm-bench", "guidellm", "aiperf")
SWEEP_PLAN = (
    O("prompt_len", "prompt tokens per request the commands send (vllm bench serve --random-input-len)",
      d.DEFAULT_SWEEP_PLAN_PROMPT_LEN, passed=False, unit="tokens", note="or the measured sweep's"),
    O("output_len", "output tokens per request the commands send (--random-output-len, EOS ignored)",
      d.DEFAULT_SWEEP_PLAN_OUTPUT_LEN, passed=False, unit="tokens", note="or the measured sweep's"),
    *(opt.but(help=f"a first measured sweep to refine: {opt.help}") for opt in FILES[:3]),
    O("load_axis", "the load to sweep: concurrency (closed loop, --max-concurrency) or request_rate (open loop, "
      "Poisson arrivals)", d.DEFAULT_SWEEP_PLAN_LOAD_AXIS, passed=False, choices=("concurrency", "request_rate"),
      note="or the measured sweep's"),
    O("peak", "the highest load to measure: your real peak concurrency (requests/s with --load-axis request_rate)",
      default_text="the memory limit, at most --max-num-seqs"),
    O("levels", "load levels to measure, at least half of them inside the crossover interval",
      d.DEFAULT_SWEEP_PLAN_LEVELS),
    O("half_width", "the half-width each level's on/off ratio interval (95 percent; output throughput on concurrency "
      "levels, mean e2e latency on request rates) must reach in the simulator", d.DEFAULT_SWEEP_PLAN_HALF_WIDTH),
    O("min_requests", "requests a level's sizing starts from (a concurrency level runs at least 10 rounds of its "
      "clients)", d.DEFAULT_SWEEP_PLAN_MIN_REQUESTS),
    O("max_requests", "the most requests a level is planned with", d.DEFAULT_SWEEP_PLAN_MAX_REQUESTS),
    *(opt for opt in SIMULATE if opt.name in ("seed", "max_num_seqs", "max_num_batched_tokens")),
    *(opt for opt in POLICY if opt.name == "draft_model_id"),
    O("port", "port each server listens on, one after the other, and the clients send to", d.DEFAULT_SWEEP_PLAN_PORT),
    O("results_dir", "where the client commands write their results, one subfolder per client and arm (this "
      "command writes nothing)", d.DEFAULT_SWEEP_PLAN_RESULTS_DIR),
    O("client", "the client whose commands the text lists (--json lists all three)", d.DEFAULT_SWEEP_PLAN_CLIENT,
      choices=SWEEP_PLAN_CLIENTS),
    O("quiet", "no progress line on stderr", kind="switch", api=None),
    JSON,
)

# the spec verbs' actions (hardware / models list, show, import)
SPEC_JSON = O("json", "one JSON object on stdout", kind="switch", api=None)
MODELS_IMPORT = (
    O("name", "spec name", default_text="the config's folder name", api=None),
    O("out", "write the YAML here", default_text="stdout", api=None),
    O("force", "replace an existing --out file", kind="switch", api=None),
)

MAX_INPUT = O("max_input_mb", "largest input file read", default_text="512, or CROSSOVER_MAX_INPUT_MB", metavar="MB", api=None)


def by_verb() -> dict[str, tuple[Option, ...]]:
    """Every verb's options (what its parser is generated from and what the option test checks)."""
    scenario = (*SCENARIO, *SPECULATION, *EFFICIENCY)
    return {
        "predict": (*scenario, *PREDICT),
        "simulate": (O("workload", f"workload preset or YAML path ({WORKLOADS})", required=True), *SIMULATE_LOAD, *scenario, *SIMULATE),
        "policy": (*scenario, *POLICY),
        "report": (*scenario, *REPORT),
        "plan": (*PLAN, *SPECULATION, *PLAN_COSTS),
        "whatif": (*scenario, *WHATIF),
        "measured": (*FILES, *MEASURED),
        "calibrate": (*FILES, CALIBRATE_MODEL, *scenario[1:], *CALIBRATE),
        "sweep-plan": (*scenario, *SWEEP_PLAN),
    }
