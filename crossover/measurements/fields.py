"""The fields of one measured record: numbers with one-line errors, latency metrics, the load
axis and level, the arm (speculation on or off) and the acceptance an engine reports (vLLM and
SGLang names). Used by readers.py; input files are only read.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..errors import CrossoverError
from .limits import MAX_K, implausible, implausible_load, shown_number

# Keys that must hold a number (or null) wherever they appear: a string there is an error.
_NUMERIC_KEYS = frozenset({
    "output_throughput", "duration", "completed", "failed", "num_prompts", "total_input_tokens",
    "total_output_tokens", "request_throughput", "request_goodput", "total_token_throughput",
    "max_output_tokens_per_s", "max_concurrent_requests", "rtfx", "burstiness", "max_concurrency",
    "input_throughput", "total_input_text_tokens", "total_input_vision_tokens",
    "total_output_tokens_retokenized", "output_throughput_retokenized", "total_throughput_retokenized",
    "concurrency", "accept_length", "spec_accept_length", "acc_length", "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
})
_LATENCY_KEY = re.compile(r"^(?:mean|median|std|max|min|p\d+(?:\.\d+)?)_\w+_ms$")
# Run configuration, not measurements: never copied into `metrics`.
_CONFIG_KEYS = frozenset({
    "request_rate", "burstiness", "max_concurrency", "ramp_up_start_rps", "ramp_up_end_rps", "run_number",
    "random_input_len", "random_output_len", "random_range_ratio", "random_prefix_len",
    "sharegpt_output_len", "sharegpt_context_len", "seed", "num_warmups",
})
# Keys that become fields of MeasuredPoint rather than entries of `metrics`.
_OWN_KEYS = frozenset({
    "output_throughput", "spec_decode_acceptance_length", "spec_decode_acceptance_rate",
    "spec_decode_per_position_acceptance_rates", "accept_length", "spec_accept_length", "acc_length",
})

# --------------------------------------------------------------------------- values

def described(value: Any) -> str:
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def _number(src: str, key: str, value: Any) -> float | None:
    """A JSON number as float; None for null or absent; a one-line error for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CrossoverError(f"{src}: key {key!r} must be a number, got {described(value)}")
    try:
        return float(value)
    except OverflowError:  # a JSON integer past the largest double (~1.8e308)
        raise CrossoverError(f"{src}: key {key!r} is {shown_number(value)}, past the largest number "
                             f"(~1.8e308)") from None


def number(src: str, key: str, value: Any) -> float | None:
    """A JSON number as float (None: null or absent); for anything else a one-line error naming the key."""
    return _number(src, key, value)


def _float_or_inf(value: int | float) -> float:
    """A JSON number as float; an integer past the largest double as inf (not finite: not a measurement)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def whole_count(src: str, key: str, value: Any) -> int | None:
    """A whole number >= 0 from a JSON number or a digit string (vLLM --metadata values are strings)."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        if len(value.strip()) > 100:  # int() refuses more than 4300 digits (a ValueError)
            raise CrossoverError(f"{src}: key {key!r} must be a count, got a number of {len(value.strip())} digits")
        return int(value.strip())
    num = _number(src, key, value)
    if num is None or not math.isfinite(num) or num != int(num) or num < 0:
        raise CrossoverError(f"{src}: key {key!r} must be a whole number >= 0, got {shown_number(value)}")
    return int(num)


def k_count(src: str, key: str, value: Any) -> int | None:
    """Draft tokens per step from a file: a whole number 0..MAX_K (None: not reported)."""
    k = whole_count(src, key, value)
    if k is not None and k > MAX_K:
        raise CrossoverError(f"{src}: key {key!r} is {shown_number(value)}; no engine drafts more than {MAX_K} "
                             f"tokens per step (k)")
    return k


def check_throughput(src: str, key: str, value: float | None) -> float:
    if value is None:
        raise CrossoverError(f"{src}: key {key!r} is empty; expected output tokens/s")
    if math.isnan(value):
        raise CrossoverError(f"{src}: key {key!r} is NaN; expected a finite output tokens/s >= 0")
    if math.isinf(value):
        raise CrossoverError(f"{src}: key {key!r} is infinite; expected a finite output tokens/s >= 0")
    if value < 0:
        raise CrossoverError(f"{src}: key {key!r} is negative ({value:g}); expected output tokens/s >= 0")
    if why := implausible(key, value):
        raise CrossoverError(f"{src}: {why}")
    return value


def throughput_of(src: str, obj: dict) -> float:
    if "output_throughput" not in obj:
        raise CrossoverError(f"{src}: missing required key 'output_throughput' (output tokens/s)")
    return check_throughput(src, "output_throughput", _number(src, "output_throughput", obj["output_throughput"]))


def metrics_of(src: str, obj: dict, aliases: dict[str, str], pattern: re.Pattern | None) -> dict[str, float]:
    """Every numeric measurement of a result object under its vLLM name; config and lists are left out."""
    out: dict[str, float] = {}
    for canonical in (True, False):  # the canonical spelling wins over an alias of the same metric
        for key, value in obj.items():
            name = aliases.get(key, key)
            if pattern is not None and (m := pattern.match(key)):
                name = f"{m.group(1)}_e2el_ms"
            if (name == key) != canonical or name in _CONFIG_KEYS or key in _OWN_KEYS:
                continue
            if name in _NUMERIC_KEYS or _LATENCY_KEY.match(name):
                num = _number(src, key, value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                num = _float_or_inf(value)
            else:
                continue  # strings (--metadata), lists (latencies), objects (server_info): not metrics
            if num is not None and math.isfinite(num):  # null / NaN: not measured
                out.setdefault(name, num)
    return out


def quality_warnings(metrics: dict[str, float]) -> list[str]:
    out = []
    failed = metrics.get("failed")
    if failed is not None and failed > 0:
        out.append(f"failed > 0 (failed={failed:g})")
    completed, prompts = metrics.get("completed"), metrics.get("num_prompts")
    if completed is not None and prompts is not None and completed != prompts:
        out.append(f"completed != num_prompts ({completed:g} of {prompts:g})")
    return out


# --------------------------------------------------------------------------- load axis

def _request_rate(src: str, obj: dict) -> tuple[float | None, str]:
    """(finite request rate or None, how the file states it)."""
    value = obj.get("request_rate")
    if value is None:
        return None, "absent" if "request_rate" not in obj else "null"
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("inf", "+inf", "infinity", "+infinity"):
            return None, "inf"
        if word == "trace":
            return None, '"trace"'
        raise CrossoverError(f"{src}: key 'request_rate' must be a number or \"inf\", got {described(value)}")
    rate = _number(src, "request_rate", value)
    if math.isinf(rate) and rate > 0:
        return None, "inf"
    if not (math.isfinite(rate) and rate > 0):
        raise CrossoverError(f"{src}: key 'request_rate' must be > 0 requests/s or inf, got {value!r}")
    return rate, f"{rate:g}"


def _positive(src: str, key: str, value: Any) -> float | None:
    num = _number(src, key, value)
    if num is not None and not (math.isfinite(num) and num > 0):
        raise CrossoverError(f"{src}: key {key!r} must be a finite number > 0, got {value!r}")
    return num


def load_of(src: str, obj: dict, forced: str | None) -> tuple[str, float, list[str]]:
    """(axis, level, warnings) in order: the configured concurrency cap, a finite request rate, then what was measured."""
    axis, level, warnings, key = _load_of(src, obj, forced)
    if why := implausible_load(axis, level):
        raise CrossoverError(f"{src}: {key}: {why}")
    return axis, level, warnings


def _load_of(src: str, obj: dict, forced: str | None) -> tuple[str, float, list[str], str]:
    """load_of's (axis, level, warnings) and the key (or rule) the level came from."""
    if forced == "batch":
        batch = _positive(src, "batch", obj.get("batch"))
        if batch is None:
            raise CrossoverError(
                f"{src}: load_axis 'batch' was asked for but the file has no 'batch' key (serving "
                f"benchmarks measure against max_concurrency or request_rate)")
        return "batch", batch, [], "key 'batch'"
    cap = _positive(src, "max_concurrency", obj.get("max_concurrency"))
    rate, rate_text = _request_rate(src, obj)
    if forced == "request_rate":
        if rate is None:
            raise CrossoverError(
                f"{src}: load_axis 'request_rate' was asked for but key 'request_rate' is {rate_text}")
        return "request_rate", rate, [], "key 'request_rate'"
    if cap is not None:
        return "concurrency", cap, [], "key 'max_concurrency'"
    if forced is None and rate is not None:
        return "request_rate", rate, [], "key 'request_rate'"
    why = "max_concurrency is null" if "max_concurrency" in obj else "no max_concurrency"
    if forced is None:
        why += f" and request_rate is {rate_text}"
    for key in ("max_concurrent_requests", "concurrency"):
        measured = _number(src, key, obj.get(key))
        if measured is not None and math.isfinite(measured) and measured > 0:
            return ("concurrency", measured, [f"load: {why}; using the measured {key}={measured:g} as the concurrency"],
                    f"key {key!r}")
    lat, dur = obj.get("latencies"), _number(src, "duration", obj.get("duration"))
    if isinstance(lat, list) and lat and dur and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in lat):
        little = sum(map(_float_or_inf, lat)) / dur
        if math.isfinite(little) and little > 0:
            return "concurrency", little, [
                f"load: {why}; using sum(latencies)/duration={little:.4g} (Little's law) as the concurrency"], \
                "sum(latencies)/duration"
    raise CrossoverError(
        f"{src}: cannot tell the load level: {why}, and there is no measured 'max_concurrent_requests' "
        f"or 'concurrency' key")


# --------------------------------------------------------------------------- arm

def resolve_arm(src: str, file_arm: str | None, evidence: str, flag: str | None, hint: str) -> str:
    if flag is None:
        if file_arm is None:
            raise CrossoverError(
                f"{src}: cannot tell whether speculation was on; pass it under --on or --off ({hint})")
        return file_arm
    if file_arm is not None and file_arm != flag:
        raise CrossoverError(
            f"{src}: passed under --{flag} but {evidence}, so speculation was {file_arm}; "
            f"pass this file under --{file_arm}")
    return flag


def vllm_arm(obj: dict) -> tuple[str | None, str]:
    spec = sorted(k for k in obj if k.startswith("spec_decode_"))
    if spec:
        return "on", f"the file has key {spec[0]!r}"
    if obj.get("speculative_config") not in (None, "", {}, "null"):
        return "on", "the file has key 'speculative_config'"
    return None, ""


def sglang_server_info(obj: dict) -> tuple[dict | None, str]:
    """(server_info, its key): with PD disaggregation the decode server's, server_info.decode[0],
    where it holds what the top level does not (as bench_serving reads the acceptance length)."""
    info = obj.get("server_info")
    if not isinstance(info, dict):
        return None, "server_info"
    decode = info.get("decode")
    if "speculative_algorithm" not in info and isinstance(decode, list) and decode and isinstance(decode[0], dict):
        return decode[0], "server_info.decode[0]"
    return info, "server_info"


def sglang_arm(obj: dict) -> tuple[str | None, str]:
    """The arm an SGLang record states: its server's speculative_algorithm, else an acceptance length
    (bench_serving's accept_length is null with speculation off), else bench_one_batch_server's
    acc_length (-1 without speculation). By key, never by version."""
    info, at = sglang_server_info(obj)
    if info is not None and "speculative_algorithm" in info:
        algo = info["speculative_algorithm"]
        if algo is None or (isinstance(algo, str) and algo.strip().upper() in ("", "NONE")):
            return "off", f"{at}.speculative_algorithm is {json.dumps(algo)}"
        return "on", f"{at}.speculative_algorithm is {json.dumps(algo)}"
    for key in ("accept_length", "spec_accept_length", "acc_length"):
        v = obj.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            if key == "acc_length" and v == -1:
                return "off", "key 'acc_length' is -1 (no speculation)"
            return "on", f"the file has an acceptance length (key {key!r} is {v:g})"
    return None, ""


# --------------------------------------------------------------------------- acceptance and k

def tau_of(src: str, key: str, value: Any) -> float | None:
    tau = _number(src, key, value)
    if tau is None or not math.isfinite(tau):
        return None
    if tau < 1:
        raise CrossoverError(f"{src}: key {key!r} is {tau:g}; an acceptance length counts the bonus token, so it is >= 1")
    return tau


def vllm_acceptance(src: str, obj: dict) -> tuple[float | None, float | None, tuple[float, ...] | None]:
    tau = tau_of(src, "spec_decode_acceptance_length", obj.get("spec_decode_acceptance_length"))
    accepted = _number(src, "spec_decode_accepted_tokens", obj.get("spec_decode_accepted_tokens"))
    drafted = _number(src, "spec_decode_draft_tokens", obj.get("spec_decode_draft_tokens"))
    drafts = _number(src, "spec_decode_num_drafts", obj.get("spec_decode_num_drafts"))
    if tau is None and accepted is not None and drafts:
        tau = 1 + accepted / drafts
        if not math.isfinite(tau):  # finite counts, an overflowing quotient (1e308 / 1e-300)
            raise CrossoverError(f"{src}: 1 + spec_decode_accepted_tokens / spec_decode_num_drafts "
                                 f"({accepted:g} / {drafts:g}) is no acceptance length")
    pct = _number(src, "spec_decode_acceptance_rate", obj.get("spec_decode_acceptance_rate"))
    rate = None
    if pct is not None and math.isfinite(pct):
        if not 0 <= pct <= 100:
            raise CrossoverError(
                f"{src}: key 'spec_decode_acceptance_rate' is {pct:g}; vLLM writes it as a percentage 0-100")
        rate = pct / 100
    elif accepted is not None and drafted:
        rate = accepted / drafted
        if not 0 <= rate <= 1:
            raise CrossoverError(f"{src}: spec_decode_accepted_tokens / spec_decode_draft_tokens ({accepted:g} / "
                                 f"{drafted:g}) is no acceptance rate (a fraction 0-1)")
    key = "spec_decode_per_position_acceptance_rates"
    raw = obj.get(key)
    per_pos = None
    if raw is not None:
        if not isinstance(raw, list):
            raise CrossoverError(f"{src}: key {key!r} must be a list of fractions 0-1, got {described(raw)}")
        vals = [_number(src, f"{key}[{i}]", v) for i, v in enumerate(raw)]
        for i, v in enumerate(vals):
            if v is None or not 0 <= v <= 1:
                raise CrossoverError(f"{src}: key '{key}[{i}]' must be a fraction 0-1, got {raw[i]!r}")
        if len(vals) > MAX_K:
            raise CrossoverError(f"{src}: key {key!r} lists {len(vals)} positions; no engine drafts more than "
                                 f"{MAX_K} tokens per step (k)")
        per_pos = tuple(vals) if vals else None
    return tau, rate, per_pos


def _speculative_config(obj: dict) -> dict:
    conf = obj.get("speculative_config")
    if isinstance(conf, str):
        try:
            conf = json.loads(conf)
        except (json.JSONDecodeError, RecursionError):
            return {}
    return conf if isinstance(conf, dict) else {}


def vllm_k(src: str, obj: dict, per_pos: tuple[float, ...] | None) -> int | None:
    """K from the sweep's speculative_config override or --metadata; else the per-position list length."""
    conf = _speculative_config(obj)
    if conf.get("num_speculative_tokens") is not None:
        return k_count(src, "speculative_config.num_speculative_tokens", conf["num_speculative_tokens"])
    for key in ("speculative_config.num_speculative_tokens", "num_speculative_tokens"):
        if obj.get(key) is not None:
            return k_count(src, key, obj[key])
    return len(per_pos) if per_pos else None


def sglang_acceptance(src: str, obj: dict) -> float | None:
    """tau an SGLang record carries: accept_length (bench_serving), spec_accept_length or acc_length
    (bench_one_batch_server; -1: none), else its server's avg_spec_accept_length."""
    for key in ("accept_length", "spec_accept_length", "acc_length"):
        if obj.get(key) is not None and not (key == "acc_length" and obj[key] == -1):
            return tau_of(src, key, obj[key])
    info, at = sglang_server_info(obj)
    if info is None:
        return None
    states = info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        value = states[0].get("avg_spec_accept_length")
        if value is not None:
            return tau_of(src, f"{at}.internal_states[0].avg_spec_accept_length", value)
    if info.get("avg_spec_accept_length") is not None:
        return tau_of(src, f"{at}.avg_spec_accept_length", info["avg_spec_accept_length"])
    return None


def sglang_k(src: str, obj: dict) -> int | None:
    """K for a chain (topk 1): speculative_num_draft_tokens - 1; None for trees, n-gram or no speculation."""
    info, at = sglang_server_info(obj)
    if info is None or sglang_arm(obj)[0] != "on":
        return None
    if str(info.get("speculative_algorithm", "")).upper() == "NGRAM":
        return None
    tokens = whole_count(src, f"{at}.speculative_num_draft_tokens", info.get("speculative_num_draft_tokens"))
    topk = whole_count(src, f"{at}.speculative_eagle_topk", info.get("speculative_eagle_topk"))
    steps = whole_count(src, f"{at}.speculative_num_steps", info.get("speculative_num_steps"))
    if tokens is None or tokens < 1:
        return None
    chain = topk == 1 or (topk is None and steps is not None and tokens == steps + 1)
    if not chain:
        return None
    return k_count(src, f"{at}.speculative_num_draft_tokens", tokens - 1)
