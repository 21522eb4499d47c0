"""Benchmark statistics of a simulated run, named as vLLM's serving benchmark names them."""

from __future__ import annotations

import numpy as np

from .simulator import RunLog

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")


def weighted_percentile(values: np.ndarray, weights: np.ndarray, pct: float) -> float:
    """The `pct` percentile (0-100) of values with integer-like weights (inverted CDF)."""
    return weighted_percentiles(values, weights, (pct,))[0]


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, pcts) -> list[float]:
    """`weighted_percentile` at each of `pcts`, sorting once."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return [float("nan")] * len(pcts)
    if weights.min() == weights.max():  # equal weights (counts): the same ranks, by selection instead of a sort
        n = values.size
        cum = weights[0] * np.arange(1, n + 1, dtype=float)  # the cumulative counts, exact for whole counts
        ranks = [min(int(np.searchsorted(cum, pct / 100.0 * cum[-1], side="left")), n - 1) for pct in pcts]
        part = np.partition(values, sorted(set(ranks)))
        return [float(part[k]) for k in ranks]
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    return [float(v[min(int(np.searchsorted(cum, pct / 100.0 * cum[-1], side="left")), len(v) - 1)]) for pct in pcts]


def _stats(name: str, values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    w = np.ones_like(values) if weights is None else weights
    if values.size == 0 or w.sum() == 0:
        nan = float("nan")
        return {f"mean_{name}_ms": nan, f"median_{name}_ms": nan, f"std_{name}_ms": nan, f"p99_{name}_ms": nan}
    mean = float(np.average(values, weights=w))
    std = float(np.sqrt(np.average((values - mean) ** 2, weights=w)))
    median, p99 = weighted_percentiles(values, w, (50, 99))
    return {
        f"mean_{name}_ms": mean * 1e3,
        f"median_{name}_ms": median * 1e3,
        f"std_{name}_ms": std * 1e3,
        f"p99_{name}_ms": p99 * 1e3,
    }


def summarize(log: RunLog, measure_from: int, offered_rate: float | None = None,
              capacity: float | None = None) -> dict[str, float | bool]:
    """vLLM-style results (`vllm bench serve`'s meaning): throughputs are what the completed requests
    delivered over the benchmark's duration, from the first measured request sent to the last request
    completed; latency statistics over the measured requests.

    With the warm-up excluded (`measure_from` > 0) the window opens when the first measured request is
    sent and counts every token emitted after that (the warm-up requests still in flight complete
    inside it); with `measure_from` = 0 it is exactly vLLM's `output_throughput`. An open-loop run
    (`offered_rate` req/s) is `saturated` when the offered rate exceeds the `capacity` (req/s the
    server completes with its running batch at the engine's limit): its queue grows without bound.
    """
    n = len(log.arrival)
    idx = np.arange(n)
    measured = idx >= measure_from
    ends = np.concatenate(log.step_end)
    toks = np.concatenate(log.step_tokens)
    pre = np.concatenate(log.step_prefill)
    t0 = float(log.arrival[measure_from])
    t1 = float(np.nanmax(log.finish))
    in_win = ends > t0
    span = max(t1 - t0, 1e-12)
    fin_in = np.count_nonzero(log.finish > t0)
    out_tokens = float(toks[in_win].sum())
    in_tokens = float(pre[in_win].sum())
    ttft = (log.first_token - log.arrival)[measured]
    e2el = (log.finish - log.arrival)[measured]
    multi = measured & (log.output > 1)
    tpot = ((log.finish - log.first_token) / np.maximum(log.output - 1, 1))[multi]
    itl_v = np.concatenate(log.itl_values) if log.itl_values else np.zeros(0)
    itl_w = np.concatenate(log.itl_counts) if log.itl_counts else np.zeros(0)
    res: dict[str, float | bool] = {
        "completed": int(measured.sum()),
        "duration": t1 - float(np.nanmin(log.arrival)),
        "window_s": span,
        "request_throughput": fin_in / span,
        "achieved_request_rate": fin_in / span,
        "saturated": bool(offered_rate is not None and capacity is not None and offered_rate > capacity),
        "output_throughput": out_tokens / span,
        "total_token_throughput": (out_tokens + in_tokens) / span,
        "total_input_tokens": int(log.prompt[measured].sum()),
        "total_output_tokens": int(log.output[measured].sum()),
    }
    if offered_rate is not None:  # open loop: what was offered and what the server can complete
        res["offered_request_rate"] = float(offered_rate)
        if capacity is not None:
            res["capacity_request_rate"] = float(capacity)
    sent = float(np.max(log.arrival[np.isfinite(log.arrival)]))  # the last request sent: the drain follows
    steady = (ends > t0) & (ends <= sent)
    rel = throughput_noise(ends[steady], toks[steady], t0, sent) if sent > t0 else 0.0
    res["output_throughput_ci_low"] = max(out_tokens / span * (1.0 - rel), 0.0)
    res["output_throughput_ci_high"] = out_tokens / span * (1.0 + rel)
    res.update(_stats("ttft", ttft))
    res.update(_stats("tpot", tpot))
    res.update(_stats("itl", itl_v, itl_w))
    res.update(_stats("e2el", e2el))
    if log.verify_steps:
        res["spec_decode_acceptance_length"] = 1.0 + log.drafts_accepted / log.verify_steps
        res["spec_decode_acceptance_rate"] = 100.0 * log.drafts_accepted / max(log.drafts_proposed, 1e-12)
    return res


# Batch means: the steady part of the measured window (until the last request is sent) cut into
# this many equal spans; the spread of their output rates (Student t, 95%) relative to their mean is
# the run's noise, applied to output_throughput as its 95% interval. The drain after the last send
# (which requests remain in flight) varies too and is not in it: a level with few rounds of its
# clients carries more of it, which is why levels run at least STEADY_COMPLETIONS rounds.
BATCHES = 10
T95 = {9: 2.262}  # two-sided 95% Student t quantile for BATCHES - 1 degrees of freedom


def throughput_noise(ends: np.ndarray, tokens: np.ndarray, t0: float, t1: float) -> float:
    """Relative 95% half-width of the output rate over [t0, t1] by batch means: tokens emitted in
    each of BATCHES equal spans over the span's length."""
    edges = np.linspace(t0, t1, BATCHES + 1)
    span = max((t1 - t0) / BATCHES, 1e-12)
    per = np.bincount(np.clip(np.searchsorted(edges, ends, side="left") - 1, 0, BATCHES - 1), weights=tokens,
                      minlength=BATCHES) / span
    mean = float(per.mean())
    return T95[BATCHES - 1] * float(per.std(ddof=1)) / np.sqrt(BATCHES) / mean if mean > 0 else 0.0


def steady_request_rate(log: RunLog, measure_from: int) -> float:
    """Requests completed per second while the clients keep the server full: from the first measured
    request sent to the last request sent (before the drain), for a closed-loop run at the engine's limit."""
    t0 = float(log.arrival[measure_from])
    t1 = float(np.max(log.arrival[np.isfinite(log.arrival)]))
    if t1 - t0 <= 0:  # every request sent at once: the whole run
        t1 = float(np.nanmax(log.finish))
    done = np.count_nonzero((log.finish > t0) & (log.finish <= t1))
    return done / max(t1 - t0, 1e-12)
