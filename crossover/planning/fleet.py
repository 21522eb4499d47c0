"""One replica's capacity under latency SLOs, analytically, and the fleet that serves a demand.

A replica (one engine on `tp` GPUs) running `b` requests at a time delivers the closed form's output
tokens/s at `b` (curves.evaluate with the prompt/output mix) with mean latencies: TPOT = mean step /
tokens per step, ITL = mean step (a speculative step streams its tokens as one chunk), TTFT = half a
step of waiting plus the step carrying the prompt, E2E = TTFT + (output - 1) x TPOT. Its capacity is
the most requests/s it completes at the largest load whose latencies meet every SLO (a p99 SLO is
screened against the mean here, a necessary condition; the simulator checks the p99). A fleet is
the fewest replicas whose capacity covers the peak demand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..model import memory
from ..model.scenario import Scenario, draft_memory
from ..analysis.curves import evaluate
from ..errors import CrossoverError
from ..analysis.policy import ranges
from ..specs.deployment import Deployment
from ..model.speculation import Speculation

# The SLO metrics, named as `vllm bench serve` names them (and the simulator reports them).
SLO_KEYS = ("median_tpot_ms", "p99_tpot_ms", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms",
            "median_e2el_ms", "p99_e2el_ms")
LABEL = {"tpot": "TPOT", "ttft": "TTFT", "itl": "ITL", "e2el": "E2E"}


def family(key: str) -> str:
    """'p99_tpot_ms' -> 'tpot'."""
    return key.split("_")[1]


def slo_label(key: str) -> str:
    """'p99_tpot_ms' -> 'p99 TPOT'."""
    stat = key.split("_")[0]
    return f"{'p50' if stat == 'median' else stat} {LABEL[family(key)]}"


@dataclass
class Curve:
    """One arm of a deployment over batches 1..limit: k per batch (0 = off), tokens/s, mean latencies (ms)."""

    batch: np.ndarray
    k: np.ndarray
    tokens_per_s: np.ndarray
    latency: dict[str, np.ndarray]

    def ok(self, slo: dict[str, float], scale: float = 1.0) -> np.ndarray:
        """Batches whose mean latencies meet every SLO (each SLO x `scale`)."""
        good = np.isfinite(self.tokens_per_s)
        for key, limit in slo.items():
            good &= self.latency[family(key)] <= limit * scale
        return good

    def take(self, mask: np.ndarray) -> "Curve":
        """The batches where `mask` holds."""
        return Curve(self.batch[mask], self.k[mask], self.tokens_per_s[mask],
                     {f: v[mask] for f, v in self.latency.items()})


def _curve(sc: Scenario, k: int, limit: int) -> tuple[Curve, Curve | None]:
    """(off, on at k) over batches 1..limit; on is None for k = 0."""
    b = np.arange(1, limit + 1, dtype=float)
    c = evaluate(sc, b)
    o_len = float(sc.output_len)  # type: ignore[arg-type]

    def arm(step: np.ndarray, y: float, ttft: np.ndarray, tput: np.ndarray, kk: int) -> Curve:
        tpot = step / y * 1e3
        ttft_ms = ttft * 1e3
        return Curve(b.astype(int), np.full(b.size, kk), tput,
                     {"tpot": tpot, "itl": step * 1e3, "ttft": ttft_ms, "e2el": ttft_ms + (o_len - 1.0) * tpot})

    off = arm(c.step_off, 1.0, c.ttft_off, c.tokens_per_s_off, 0)  # type: ignore[arg-type]
    on = arm(c.step_on, sc.speculation.tau, c.ttft_on, c.tokens_per_s_on, k) if k else None  # type: ignore[arg-type]
    return off, on


@dataclass
class Screened:
    """One arm of one deployment at its capacity under the SLOs (analytic), or why it has none."""

    arm: str  # off, on, routed
    k: int | None = None  # on: the best fixed k; routed: the largest k its schedule uses
    batch: int | None = None  # running sequences per replica at capacity
    tokens_per_s: float = 0.0  # output tokens/s per replica at capacity
    requests_per_s: float = 0.0
    latency: dict[str, float] = field(default_factory=dict)  # mean latencies at capacity, ms, by family
    schedule: list[dict[str, int]] | None = None  # routed: k by running batch up to capacity
    speculate_below: int | None = None  # routed: speculation on below this many running sequences
    curve: Curve | None = None  # the arm's feasible curve (k as chosen), for SLO sweeps
    dropped_because: str | None = None
    miss: float = 0.0  # how far the best load misses the SLO (worst latency / its SLO; 0 when it meets it)


def _best(curve: Curve, slo: dict[str, float]) -> int | None:
    """Index of the most throughput among batches meeting the SLOs."""
    ok = curve.ok(slo)
    if not ok.any():
        return None
    return int(np.argmax(np.where(ok, curve.tokens_per_s, -np.inf)))


def _miss(curve: Curve, slo: dict[str, float]) -> tuple[float, str]:
    """At batch 1 (the lowest latencies a replica has): the worst latency / SLO ratio and the reason."""
    worst, why = 0.0, ""
    for key, limit in slo.items():
        v = float(curve.latency[family(key)][0])
        if v / limit > worst:
            worst, why = v / limit, f"{slo_label(key)} {v:.1f} ms at batch 1 > SLO {limit:g} ms"
    return worst, why


def _at(curve: Curve, i: int, output_len: float, arm: str) -> Screened:
    lat = {f: float(v[i]) for f, v in curve.latency.items()}
    tput = float(curve.tokens_per_s[i])
    return Screened(arm, int(curve.k[i]) if arm != "off" else None, int(curve.batch[i]), tput, tput / output_len, lat,
                    curve=curve.take(curve.batch <= curve.batch[i]))


def screen(dep: Deployment, spec: Speculation, prompt_len: float, output_len: float, slo: dict[str, float], *,
           k_max: int, max_num_seqs: int) -> list[Screened]:
    """The off, on (best fixed k in 1..k_max) and routed (best k per running batch, k = 0 included) arms of
    one deployment at their capacity under `slo`. A routed arm that never speculates, or always uses one
    k, is the off or on arm again and is left out. Arms that cannot run or meet the SLO say why."""
    ctx = prompt_len + output_len / 2.0
    peak = prompt_len + output_len
    limit_off = min(memory.max_batch(dep, peak, slack_tokens=1), max_num_seqs)
    ks = [spec.k] if spec.tree is not None else list(range(1, k_max + 1))
    offs: Curve | None = None
    ons: dict[int, Curve] = {}
    for k in ks:
        s = spec if k == spec.k else spec.with_k(k)
        sc = Scenario(dep, s, ctx, prompt_len, output_len)
        w, kv = draft_memory(sc)
        limit_on = min(memory.max_batch(dep, peak, extra_weights_per_gpu=w, extra_kv_per_seq_per_gpu=kv,
                                        slack_tokens=k + 1), max_num_seqs)
        top = max(limit_off, limit_on)
        if top < 1:
            continue
        off, on = _curve(sc, k, top)
        if offs is None:
            offs = off.take(off.batch <= limit_off)
        if on is not None and limit_on >= 1:
            ons[k] = on.take(on.batch <= limit_on)
    out: list[Screened] = []
    if offs is None or offs.batch.size == 0:
        gb = memory.weight_bytes_per_gpu(dep) / 1e9
        return [Screened("all", dropped_because=f"does not fit: {gb:.0f} GB of weights per GPU on "
                                                f"{dep.hardware.memory_gb:g} GB, no room for one request's KV cache")]
    # off
    i = _best(offs, slo)
    if i is None:
        m, why = _miss(offs, slo)
        out.append(Screened("off", dropped_because=f"misses the SLO at every load: {why}", miss=m, curve=offs))
    else:
        out.append(_at(offs, i, output_len, "off"))
    # on: the best fixed k
    if not ons:
        out.append(Screened("on", dropped_because="does not fit with the draft's weights and KV cache"))
        return out
    best_on = None
    for k, c in ons.items():
        j = _best(c, slo)
        if j is not None and (best_on is None or c.tokens_per_s[j] > best_on.tokens_per_s):
            best_on = _at(c, j, output_len, "on")
    if best_on is None:
        m, why = min(_miss(c, slo) for c in ons.values())
        out.append(Screened("on", dropped_because=f"misses the SLO at every load with k 1..{max(ks)}: {why}", miss=m,
                            curve=next(iter(ons.values()))))
    else:
        out.append(best_on)
    # routed: per running batch, the k of most throughput among those meeting the SLO
    n = max(offs.batch.size, max(c.batch.size for c in ons.values()))
    table = np.full((len(ks) + 1, n), -np.inf)
    for row, c in enumerate([offs, *ons.values()]):
        table[row, :c.batch.size] = np.where(c.ok(slo), c.tokens_per_s, -np.inf)
    if not np.isfinite(table).any():
        return out  # the off and on rows already say why
    kk = np.array([0, *ons.keys()])
    pick = np.argmax(table, axis=0)
    best = table[pick, np.arange(n)]
    cap = int(np.argmax(best))
    b = np.arange(1, cap + 2)
    chosen = kk[pick[:cap + 1]]
    feasible = np.isfinite(best[:cap + 1])
    if len(set(chosen[feasible].tolist())) < 2:
        return out  # never speculates, or one k throughout: the off or on arm again
    curves = [offs, *ons.values()]
    lat = {f: np.array([curves[pick[j]].latency[f][j] for j in range(cap + 1)]) for f in offs.latency}
    curve = Curve(b, np.where(feasible, chosen, 0), best[:cap + 1], lat).take(feasible)
    r = _at(curve, curve.batch.size - 1, output_len, "routed")
    r.k = int(chosen[feasible].max())
    r.schedule = ranges(curve.batch, curve.k)
    # "on below N" only where speculation is off in one run to the capacity; where it pays again above
    # an off run (beyond a CUDA-graph limit) the schedule says the bands
    off_runs = [x for x in r.schedule if x["k"] == 0]
    r.speculate_below = (off_runs[0]["batch_min"] if len(off_runs) == 1 and r.schedule[-1]["k"] == 0 else None)
    out.append(r)
    return out


def replicas_for(peak_rps: float, capacity_rps: float) -> int:
    """The fewest replicas whose capacity covers the peak (capacity x replicas >= peak)."""
    return max(1, math.ceil(peak_rps / capacity_rps - 1e-9))


def autoscaled_replicas(rates: np.ndarray, capacity_rps: float) -> np.ndarray:
    """Replicas each interval of a trace needs (at least one stays up)."""
    return np.maximum(1, np.ceil(rates / capacity_rps - 1e-9)).astype(int)


def check_slo(slo: dict[str, float | None]) -> dict[str, float]:
    """The SLOs given (None: not given), each a finite number of ms > 0; at least one."""
    out = {}
    for key, v in slo.items():
        if key not in SLO_KEYS:
            raise CrossoverError(f"unknown SLO {key!r}; expected one of {', '.join(SLO_KEYS)}")
        if v is None:
            continue
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise CrossoverError(f"SLO {slo_label(key)} must be a finite number of ms > 0 (got {v})")
        out[key] = float(v)
    if not out:
        raise CrossoverError("give at least one latency SLO (e.g. --slo-tpot-ms 50)")
    return out
