"""Every default a user can override, declared once: the value each verb uses when its option is not
given. The API's signatures, the CLI's flags and help (`crossover.api.options`), the web page and the
layers below all read them from here; nothing here imports anything (invariant 5, docs/architecture.md).

Physics defaults with their sources (efficiency fractions, engine overheads) live with the specs they
belong to (specs/deployment.py, engines/*.yaml); these are the choices of a scenario or a run.
"""

from __future__ import annotations

# --- a scenario: what is predicted when nothing is said
DEFAULT_MODEL = "llama-3.1-70b"
DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_METHOD = "eagle"
DEFAULT_K = 3
DEFAULT_ACCEPTANCE = 0.7
# The plausible range of an assumed i.i.d. acceptance rate, over which every output says whether its
# answer flips: the published rates of validation/published_points.csv (alpha 0.53, 0.65, 0.75, 0.82),
# rounded outward.
ACCEPTANCE_RANGE = (0.5, 0.85)
# ... and of an assumed n-gram match rate: the published proposal rate (~55% of
# steps on code editing, vLLM PR #24344) to the summaries that copy most spans (0.8, workloads/cnn-dailymail).
MATCH_RATE_RANGE = (0.3, 0.9)
DEFAULT_CONTEXT = 2048
DEFAULT_KV_DTYPE = "bf16"
DEFAULT_DRAFT_VOCAB = 32000  # EAGLE-3 / SpecForge draft heads keep the 32,000 most frequent tokens
DEFAULT_COST = "roofline"
# The share of GPU memory the engine takes (vLLM's --gpu-memory-utilization default 0.9: vllm/engine/arg_utils.py;
# SGLang sizes its pool by --mem-fraction-static, its own default per GPU size)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.90
DEFAULT_ENGINE = "vllm"  # engines/vllm.yaml: vLLM V1 0.11+
# Share of n-gram steps whose context holds a match (a proposal) when neither the user nor the
# workload says: the one published proposal rate, vLLM V1 n-gram (k = 5, lookup 2-5) on code
# editing, 993 drafted steps of 1,814 (vllm PR #24344: 993 drafted steps + 821 no-draft tokens).
# Chat sits lower, summarisation higher; n-gram's crossover moves with it (--match-rate).
DEFAULT_NGRAM_MATCH_RATE = 0.55
# Automatic TP: the smallest of 1, 2, 4, 8 GPUs whose KV cache holds this many sequences.
MIN_SEQUENCES_FOR_AUTO_TP = 16
AUTO_TP = (1, 2, 4, 8)

# --- predict: the batches of a curve
DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)

# --- simulate (vllm bench serve's defaults where it has one)
DEFAULT_NUM_PROMPTS = 1000
DEFAULT_SEED = 0
DEFAULT_BURSTINESS = 1.0  # gamma shape of inter-arrival times: 1 = Poisson
DEFAULT_MAX_NUM_SEQS = 256  # an engine profile that names none (engines/*.yaml; vLLM's on GPUs under 70 GiB and A100s)
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # likewise (vLLM V1's for online serving on large GPUs)
# What the engine runs with when the user sets no limit (serving/engine.py default_limits), as help says it
ENGINE_SEQS_TEXT = "the engine's on the GPU: vLLM V1 1024 on a GPU of >= 70 GiB other than an A100, else 256"
ENGINE_TOKENS_TEXT = ("the engine's on the GPU: vLLM V1 8192 on a GPU of >= 70 GiB other than an A100, else 2048; "
                      "without chunked prefill at least the model's length")

# --- policy
DEFAULT_K_MAX = 8
DEFAULT_CONFIDENCE_THRESHOLD = 0.0
DEFAULT_CONFIDENCE_CONCENTRATION = 2.0

# --- whatif
DEFAULT_WHATIF_X = "batch=1..512"
DEFAULT_WHATIF_Y = "k=1..8"
DEFAULT_WHATIF_POINTS = 64

# --- plan
PLAN_HARDWARE = ("h100-sxm", "h200", "b200", "a100-80gb-sxm", "l40s", "mi300x")
PLAN_TP = (1, 2, 4, 8)
DEFAULT_VERIFY = 5  # finalists simulated at the planned load
DEFAULT_SIM_PROMPTS = 600  # requests per simulated finalist (the first 10% warm-up)
DEFAULT_RETRY_REPLICAS = 2  # a finalist that misses in simulation is re-simulated with up to this many more replicas
DEFAULT_COST_BASIS = "rental"
# Ownership. PUE 1.0 counts the board alone (no cooling or power-delivery overhead): set your
# facility's with --pue. The amortisation period is a planning assumption, not a sourced figure:
# set --years to your depreciation schedule.
DEFAULT_PUE = 1.0
DEFAULT_YEARS = 5.0

# --- calibrate
DEFAULT_BOOTSTRAP = 60  # refits for the crossover's interval

# --- sweep-plan: the two-server sweep the model plans (issue 24)
DEFAULT_SWEEP_PLAN_LEVELS = 12  # load levels to measure, at least half of them inside the crossover interval
# The half-width each level's on/off ratio 95% interval must reach in the simulator (output throughput
# on concurrency levels, mean e2e latency on request rates): a crossing at 1 +- 0.05 is readable.
DEFAULT_SWEEP_PLAN_HALF_WIDTH = 0.05
DEFAULT_SWEEP_PLAN_MIN_REQUESTS = 200  # requests a level starts its sizing from (more at high concurrency)
DEFAULT_SWEEP_PLAN_MAX_REQUESTS = 20_000  # the most requests a level is planned with
# The lengths the commands send when no measured sweep says (vllm bench serve --dataset-name random's
# defaults: --random-input-len 1024, --random-output-len 128, vllm/benchmarks/datasets.py)
DEFAULT_SWEEP_PLAN_PROMPT_LEN = 1024
DEFAULT_SWEEP_PLAN_OUTPUT_LEN = 128
DEFAULT_SWEEP_PLAN_LOAD_AXIS = "concurrency"
# A given (not assumed) acceptance rate is varied by this much either way for the crossover interval
SWEEP_PLAN_ACCEPTANCE_SPREAD = 0.05
DEFAULT_SWEEP_PLAN_PORT = 8000  # vllm serve's default port; both servers run on it, one after the other
DEFAULT_SWEEP_PLAN_RESULTS_DIR = "results"
DEFAULT_SWEEP_PLAN_CLIENT = "vllm-bench"  # the client whose commands the text lists (--json: all three)
