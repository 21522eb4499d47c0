"""What a verb is asked, as typed records instead of long keyword lists. `crossover.plan`: the demand,
the latency objectives, the deployments searched, how they are priced and how the finalists are
verified; `crossover.simulate`: how each level is run (`Run`).

    crossover.plan("llama-3.1-70b", "sharegpt", Demand(peak_rps=50), SLO(tpot_ms=50),
                   search=Search(hardware=("h100-sxm", "h200"), weight_dtype=("bf16", "fp8")))

Each record also takes a plain mapping of its fields (`slo={"tpot_ms": 50}`). Defaults come from
`crossover.defaults`; the CLI's flags for them are the `plan` records of `crossover.api.options`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

from .. import defaults as d
from ..errors import InputError


def _record(cls, value, what: str, also: tuple[str, ...] = ()):
    """`value` as a `cls` record: the record itself, a mapping of its fields, or None (the defaults);
    `also`: the caller's other keywords, named beside the fields when one is unknown."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise InputError(f"{what}: unknown {'option' if also else 'field'} {unknown[0]!r} (known: "
                             f"{', '.join([*also, *sorted(names)])})", parameter=unknown[0] if also else what)
        return cls(**value)
    raise InputError(f"{what} must be a {cls.__name__} or a mapping of its fields (got {type(value).__name__})",
                     parameter=what)


class Record:
    """A request record: `of(value)` takes the record, a mapping of its fields, or None (the defaults)."""

    _what = "record"  # the keyword it is given as (an error names it)
    _also: tuple[str, ...] = ()  # the caller's other keywords, named beside the fields

    @classmethod
    def of(cls, value):
        return _record(cls, value, cls._what, cls._also)


@dataclass(frozen=True)
class Demand(Record):
    """The load the fleet must serve, one of: a peak in requests/s, a peak in output tokens/s (over
    the workload's mean output length), or a traffic CSV (`time,requests` per interval)."""

    peak_rps: float | None = None
    peak_output_tokens_per_s: float | None = None
    traffic: Any = None  # a CSV path or a planning.traffic.Traffic

    _what = "demand"


@dataclass(frozen=True)
class SLO(Record):
    """Latency objectives in ms, p50 and p99 of TPOT, TTFT, ITL and end-to-end latency, as vLLM's
    benchmark reports them; at least one."""

    tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    itl_ms: float | None = None
    p99_itl_ms: float | None = None
    e2e_ms: float | None = None
    p99_e2e_ms: float | None = None

    _what = "slo"

    def by_metric(self) -> dict[str, float | None]:
        """The objectives by the metric each bounds (vLLM's names)."""
        return {"median_tpot_ms": self.tpot_ms, "p99_tpot_ms": self.p99_tpot_ms, "median_ttft_ms": self.ttft_ms,
                "p99_ttft_ms": self.p99_ttft_ms, "median_itl_ms": self.itl_ms, "p99_itl_ms": self.p99_itl_ms,
                "median_e2el_ms": self.e2e_ms, "p99_e2el_ms": self.p99_e2e_ms}


@dataclass(frozen=True)
class Search(Record):
    """The deployments searched: every accelerator x TP x weight dtype x KV dtype x max running
    sequences (comma text or sequences), speculation up to `k_max` (None: the speculation's k)."""

    hardware: str | Sequence[str] = d.PLAN_HARDWARE
    tp: str | Sequence[int] = d.PLAN_TP
    weight_dtype: str | Sequence[str] | None = None  # None: the model's own
    kv_dtype: str | Sequence[str] = (d.DEFAULT_KV_DTYPE,)
    max_num_seqs: str | Sequence[int] | None = None  # None: each deployment's engine default on its GPU
    max_num_batched_tokens: int | None = None  # None: likewise (serving/engine.py default_limits)
    expert_parallel: bool = False
    data_parallel: str | Sequence[int] = (1,)  # data-parallel ranks per replica (Deployment.data_parallel)
    k_max: int | None = None

    _what = "search"


@dataclass(frozen=True)
class Pricing(Record):
    """How options are priced: rental prices per GPU-hour (`price`: 'gpu=usd' texts or a mapping;
    `price_file`: YAML) over the hardware library's sourced ones, or ownership (purchase over
    `years`, power at `power_cost` USD/kWh times `pue`)."""

    price: str | Sequence[str] | Mapping[str, float] | None = None
    price_file: str | None = None
    cost_basis: str = d.DEFAULT_COST_BASIS
    power_cost: float | None = None
    pue: float = d.DEFAULT_PUE
    years: float = d.DEFAULT_YEARS

    _what = "pricing"


@dataclass(frozen=True)
class Verification(Record):
    """The best `verify` options simulated at the planned load (`num_prompts` requests each, inter-
    arrivals of gamma shape `burstiness`, `seed`, in `jobs` processes); a finalist that misses an SLO
    is simulated again with up to `retry_replicas` more replicas before it is demoted."""

    verify: int = d.DEFAULT_VERIFY
    num_prompts: int = d.DEFAULT_SIM_PROMPTS
    burstiness: float = d.DEFAULT_BURSTINESS
    seed: int = d.DEFAULT_SEED
    jobs: int | None = None
    retry_replicas: int = d.DEFAULT_RETRY_REPLICAS

    _what = "verification"


@dataclass(frozen=True)
class Run(Record):
    """How `crossover.simulate` runs each level, as `vllm bench serve` would: `num_prompts` requests
    (a concurrency level runs at least 10 rounds of its clients after the warm-up), inter-arrivals of
    gamma shape `burstiness` (1: Poisson), `seed`, and the engine's limits: `max_num_seqs` running
    sequences (with the engine's own cap when speculating, SGLang's 48, unless given) and
    `max_num_batched_tokens` per step (None: the engine's defaults on the GPU, serving/engine.py)."""

    num_prompts: int = d.DEFAULT_NUM_PROMPTS
    seed: int = d.DEFAULT_SEED
    burstiness: float = d.DEFAULT_BURSTINESS
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None

    _what = "run"


@dataclass(frozen=True)
class ScenarioOptions(Record):
    """Every option of `crossover.scenario` besides the model and the hardware, with its default (the
    way vLLM's EngineArgs gathers LLM(**kwargs)): the TP (None: the smallest of 1, 2, 4, 8 that holds
    16 sequences), the speculation (method, k, the acceptance as a rate, tau or per-position rates, the
    n-gram match rate, the draft and its TP, vocabulary and KV budget, a draft tree), the context or the
    prompt and output lengths (or a workload's), dtypes, efficiency overrides, a calibration file, the
    engine profile, the cost mode and whether the GPU's distilled kernel parameters apply. The CLI's
    flags for them are the scenario, speculation and efficiency records of `crossover.api.options`."""

    tp: int | None = None
    method: str = d.DEFAULT_METHOD
    k: int | None = None  # None: DEFAULT_K, or the tree's depth
    acceptance: float | None = None  # None: a calibration's, else the workload's, else DEFAULT_ACCEPTANCE
    tau: float | None = None
    per_position: Sequence[float] | None = None
    match_rate: float | None = None  # n-gram: None: the workload's, else DEFAULT_NGRAM_MATCH_RATE
    draft: Any = None  # a model name, spec or "self"
    draft_tp: int | None = None
    draft_vocab: int | None = None  # eagle3: None: DEFAULT_DRAFT_VOCAB, at most the target's vocabulary
    draft_kv_budget: int | None = None
    tree: Any = None
    context: float | None = None  # None: DEFAULT_CONTEXT, or prompt + output / 2 with lengths
    prompt_len: float | None = None
    output_len: float | None = None
    weight_dtype: str | None = None  # None: the model's own
    kv_dtype: str = d.DEFAULT_KV_DTYPE
    expert_parallel: bool = False
    data_parallel: int = 1
    bandwidth_fraction: float | None = None
    flops_fraction: float | None = None
    step_overhead_ms: float | None = None
    transition: str | None = None
    calibration: Any = None  # a path
    workload: Any = None  # a name, path or specs.workload.Workload
    allow_vocab_mismatch: bool = False
    force_calibration: bool = False
    engine: Any = None  # None: DEFAULT_ENGINE
    cuda_graphs: str | None = None  # full, piecewise, none; None: the engine's default
    cuda_graphs_speculating: str | None = None  # the speculating server's, where it differs; None: the same
    cuda_graph_max: int | None = None  # the largest graph captured (engine's unit); None: the engine's on the GPU
    chunked_prefill: bool | None = None  # None: the engine's default
    async_scheduling: bool | None = None  # vLLM V1's async scheduling; None: the engine's default
    mla_verify: str | None = None  # decode or prefill: the server's MLA backend; None: the engine's on the GPU
    gpu_memory_utilization: float = d.DEFAULT_GPU_MEMORY_UTILIZATION
    # the requests' sampling parameters (None: not set; temperature None is greedy, the clients' default)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None  # None: off (1), as the penalties below (0)
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    cost: str = d.DEFAULT_COST
    distilled: bool = True

    _what = "scenario"
    _also = ("model", "hardware")

