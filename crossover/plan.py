"""Capacity planning: per hardware and TP degree, the best throughput per GPU under latency SLOs,
with speculation off, on, and by the best-k schedule; cost per million output tokens; ranked."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import memory
from .curves import Scenario, draft_memory, evaluate
from .errors import CrossoverError
from .specs.deployment import Deployment, tp_problem
from .specs.hardware import Hardware
from .specs.model import Model
from .speculation import Speculation

ARMS = ("off", "on", "policy")


@dataclass
class Option:
    """One serving option: a hardware, a TP degree and an arm, at its best batch under the SLOs."""

    hardware: str
    tp: int
    arm: str
    batch: int | None = None
    k: int | None = None
    tokens_per_s: float = 0.0
    tpot_ms: float = float("nan")
    ttft_ms: float = float("nan")
    price_per_hour: float | None = None
    dropped: str | None = None

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens/s per GPU."""
        return self.tokens_per_s / self.tp

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Cost of a million output tokens at the hardware's hourly price (None without a price)."""
        if self.price_per_hour is None or self.tokens_per_s <= 0:
            return None
        return self.price_per_hour * self.tp / (self.tokens_per_s * 3600.0) * 1e6


@dataclass
class PlanResult:
    """All options, ranked best first, and the dropped ones with reasons."""

    options: list[Option] = field(default_factory=list)

    @property
    def ranked(self) -> list[Option]:
        """Feasible options, highest throughput per GPU first."""
        return sorted([o for o in self.options if o.dropped is None], key=lambda o: -o.tokens_per_s_per_gpu)

    @property
    def dropped(self) -> list[Option]:
        """Options that do not fit or miss the SLO."""
        return [o for o in self.options if o.dropped is not None]


def _latencies(sc: Scenario, batches: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(output tokens/s, TPOT ms, TTFT ms) at each batch; k None = speculation off."""
    c = evaluate(sc, batches)
    if k is None:
        step, y, tput = c.step_off, 1.0, c.tokens_per_s_off
    else:
        step, y, tput = c.step_on, sc.speculation.tau, c.tokens_per_s_on
    tpot = step / y * 1e3
    ttft = (c.ttft_off if k is None else c.ttft_on) * 1e3  # a prefill step plus half a step of waiting
    return tput, tpot, ttft


def plan(model: Model, hardware: list[Hardware], spec: Speculation, prompt_len: float, output_len: float, *,
         slo_tpot_ms: float, slo_ttft_ms: float | None = None, tps: tuple[int, ...] = (1, 2, 4, 8),
         k_max: int | None = None, max_batch: int = 1024, efficiency=None) -> PlanResult:
    """Every (hardware, TP) that holds the model, each arm at its largest batch meeting the SLOs."""
    if slo_tpot_ms <= 0 or (slo_ttft_ms is not None and slo_ttft_ms <= 0):
        raise CrossoverError("SLOs must be > 0 ms")
    res = PlanResult()
    k_max = k_max or spec.k
    for hw in hardware:
        for tp in tps:
            kw = {"efficiency": efficiency} if efficiency is not None else {}
            problem = tp_problem(model, hw, tp)
            if problem is not None:
                res.options.append(Option(hw.name, tp, "all", dropped=f"tp {tp} refused: an engine cannot shard "
                                                                       f"{model.name} {tp} ways on {hw.name}"))
                continue
            dep = Deployment(model=model, hardware=hw, tp=tp, **kw)
            peak = prompt_len + output_len
            limit_off = memory.max_batch(dep, peak, slack_tokens=1)
            if limit_off < 1:
                need = memory.weight_bytes_per_gpu(dep) / 1e9
                res.options.append(Option(hw.name, tp, "all", dropped=f"does not fit: {need:.0f} GB of weights per "
                                                                         f"GPU on {hw.memory_gb:g} GB"))
                continue
            ctx = prompt_len + output_len / 2.0
            sc = Scenario(dep, spec, ctx, prompt_len, output_len)
            w, kv = draft_memory(sc)
            limit_on = memory.max_batch(dep, peak, extra_weights_per_gpu=w, extra_kv_per_seq_per_gpu=kv,
                                        slack_tokens=spec.k + 1)
            for arm in ARMS:
                limit = min(limit_off if arm == "off" else limit_on, max_batch)
                opt = Option(hw.name, tp, arm, price_per_hour=hw.price_per_hour_usd)
                if limit < 1:
                    opt.dropped = "does not fit with the draft's weights and KV cache"
                    res.options.append(opt)
                    continue
                b = np.arange(1, limit + 1, dtype=float)
                if arm == "policy":
                    cand = [(None, *_latencies(sc, b, None))]
                    for k in range(1, k_max + 1):
                        s = Scenario(dep, spec.with_k(k), ctx, prompt_len, output_len)
                        cand.append((k, *_latencies(s, b, k)))
                else:
                    cand = [(None if arm == "off" else spec.k, *_latencies(sc, b, None if arm == "off" else spec.k))]
                best = None
                for k, tput, tpot, ttft in cand:
                    ok = tpot <= slo_tpot_ms
                    if slo_ttft_ms is not None:
                        ok &= ttft <= slo_ttft_ms
                    if not ok.any():
                        continue
                    i = int(np.argmax(np.where(ok, tput, -1.0)))
                    if best is None or tput[i] > best[1]:
                        best = (k, float(tput[i]), int(b[i]), float(tpot[i]), float(ttft[i]))
                if best is None:
                    t1 = min(float(c[2][0]) for c in cand)
                    opt.dropped = (f"misses the TPOT SLO: {t1:.1f} ms even at batch 1 (SLO {slo_tpot_ms:g} ms)"
                                   if t1 > slo_tpot_ms else "misses the TTFT SLO at every batch")
                else:
                    opt.k, opt.tokens_per_s, opt.batch, opt.tpot_ms, opt.ttft_ms = best
                    opt.k = opt.k or 0  # the policy may choose not to speculate at its best batch
                res.options.append(opt)
    return res
