"""Acceptance as vLLM reports it outside the bench JSON: SpecDecoding log lines and Prometheus counters.

Both parsers return the same keys: acceptance_length (tau, bonus token included), acceptance_rate
(accepted / drafted tokens, a fraction), per_position (fractions), accepted and drafted (token counts),
num_drafts (verify steps with a draft) and k (draft tokens per step), each None when not reported.
What they return is checked (`_checked`): counters are finite counts, rates fractions and tau in
[1, k + 1] (>= 1 when k is unknown); anything else is a one-line error naming the file and the counter.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..errors import CrossoverError, FileError
from ..files import read_text
from .limits import MAX_COUNT, MAX_K  # a counter's largest plausible value (1e18); a larger one is garbage
_TOL = 1e-9  # relative slack of the range checks (rounded log values, float sums)

# Log lines: V1 "SpecDecoding metrics: ..." (three versions) and V0 "Speculative metrics: ...".
_LOG_LINE = re.compile(r"(SpecDecoding metrics|Speculative metrics):(.*)")
_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf)"
_FIELDS = {
    "length": re.compile(r"Mean acceptance length:\s*" + _NUM),
    "accepted": re.compile(r"\bAccepted:\s*(\d+)"),
    "drafted": re.compile(r"\bDrafted:\s*(\d+)"),
    "per_position": re.compile(r"Per-position acceptance rate:\s*((?:" + _NUM + r"\s*,?\s*)+)"),
    "v0_k": re.compile(r"Number of speculative tokens:\s*(\d+)"),
    "v0_accepted": re.compile(r"Number of accepted tokens:\s*(\d+)"),
    "v0_drafted": re.compile(r"Number of draft tokens:\s*(\d+)"),
    "v0_emitted": re.compile(r"Number of emitted tokens:\s*(\d+)"),
}

_PROM_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_PROM_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_PROM_PREFIX = re.compile(r"^vllm[:_]spec_decode_")


def _empty() -> dict:
    return {"acceptance_length": None, "acceptance_rate": None, "per_position": None, "accepted": None,
            "drafted": None, "num_drafts": None, "k": None}


def parse_spec_decode_log(text: str, origin: str = "log") -> dict:
    """Acceptance over every vLLM SpecDecoding / Speculative metrics line in `text` (all four formats).

    Counts are summed over lines and the rate recomputed from the sums. The mean acceptance length
    is the logged per-line value averaged with weights = drafts in that line (drafted tokens / k,
    k = positions listed, or V0's "Number of speculative tokens"); V0 lines give tau = emitted * k /
    drafted. Per-position rates are averaged the same way over the lines that list them (a line
    with fewer positions counts 0 at the missing ones). V0 counts every matching draft token as
    accepted, not only the accepted prefix, so its rate reads higher than V1's for the same drafts.
    """
    accepted = drafted = 0
    n_lines = 0
    len_sum = len_weight = 0.0
    pos_sums: list[float] = []
    pos_weight = 0.0
    ks: set[int] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _LOG_LINE.search(line)
        if not m:
            continue
        body = m.group(2)
        f = {name: rx.search(body) for name, rx in _FIELDS.items()}
        v0 = m.group(1) == "Speculative metrics"
        acc_m, dr_m = (f["v0_accepted"], f["v0_drafted"]) if v0 else (f["accepted"], f["drafted"])
        if acc_m is None or dr_m is None:
            want = "'Number of accepted tokens' and 'Number of draft tokens'" if v0 else "'Accepted' and 'Drafted'"
            raise CrossoverError(f"{origin}:{lineno}: a {m.group(1)} line without {want} counts")
        n_acc, n_dr = (_log_count(origin, lineno, what, m_.group(1)) for what, m_ in
                       (("Accepted" if not v0 else "Number of accepted tokens", acc_m),
                        ("Drafted" if not v0 else "Number of draft tokens", dr_m)))
        if n_acc > n_dr:
            raise FileError(f"{origin}:{lineno}: {n_acc} accepted of {n_dr} drafted tokens; no more tokens are "
                            "accepted than were drafted")
        n_lines += 1
        accepted += n_acc
        drafted += n_dr
        per_pos = None
        if f["per_position"] is not None:
            per_pos = [float(x) for x in re.split(r"\s*,\s*", f["per_position"].group(1).strip(" ,")) if x]
        k = len(per_pos) if per_pos else None
        if v0 and f["v0_k"] is not None:
            k = _log_count(origin, lineno, "Number of speculative tokens", f["v0_k"].group(1))
        if k is not None and k > MAX_K:
            raise FileError(f"{origin}:{lineno}: {k} draft positions; no engine drafts more than {MAX_K} tokens "
                            "per step (k)")
        if k:
            ks.add(k)
        weight = n_dr / k if k else float(n_dr)  # drafts in this line (drafted tokens if k unknown)
        length = None
        if f["length"] is not None:
            length = float(f["length"].group(1))
            what = "Mean acceptance length"
        elif v0 and f["v0_emitted"] is not None and k and n_dr:
            emitted = _log_count(origin, lineno, "Number of emitted tokens", f["v0_emitted"].group(1))
            length, what = emitted * k / n_dr, "Number of emitted tokens x k / Number of draft tokens"
        if weight > 0:  # a line with drafts: what it reports is a measurement (NaN only where nothing was drafted)
            if length is not None:
                _check_tau(f"{origin}:{lineno}", length, k, what)
            for i, rate in enumerate(per_pos or ()):
                _check_fraction(f"{origin}:{lineno}", rate, f"Per-position acceptance rate at position {i + 1}")
        if length is not None and math.isfinite(length) and weight > 0:
            len_sum += weight * length
            len_weight += weight
        if per_pos and weight > 0:
            if len(per_pos) > len(pos_sums):
                pos_sums += [0.0] * (len(per_pos) - len(pos_sums))
            for i, p in enumerate(per_pos):
                pos_sums[i] += weight * p
            pos_weight += weight
    if n_lines == 0:
        raise CrossoverError(f"{origin}: no vLLM 'SpecDecoding metrics' or 'Speculative metrics' lines found")
    out = _empty()
    out.update(
        accepted=accepted, drafted=drafted, lines=n_lines,
        acceptance_rate=accepted / drafted if drafted else None,
        acceptance_length=len_sum / len_weight if len_weight else None,
        per_position=tuple(s / pos_weight for s in pos_sums) if pos_weight else None,
        k=ks.pop() if len(ks) == 1 else None,
    )
    return _checked(out, origin, tau="the mean acceptance length of its lines", rate="Accepted / Drafted",
                    per_position="Per-position acceptance rate")


def _log_count(origin: str, lineno: int, what: str, digits: str) -> int:
    """A token count of a log line (digits), at most MAX_COUNT."""
    if len(digits) > 19 or int(digits) > MAX_COUNT:
        shown = digits if len(digits) <= 30 else f"a number of {len(digits)} digits"
        raise FileError(f"{origin}:{lineno}: {what} {shown} is no count (at most 1e18 tokens)")
    return int(digits)


def _check_tau(where: str, tau: float, k: int | None, what: str) -> None:
    """tau counts the bonus token: in [1, k + 1], >= 1 when k is unknown; finite."""
    if math.isfinite(tau) and tau >= 1 - _TOL and (not k or tau <= (k + 1) * (1 + _TOL)):
        return
    bounds = f"[1, k + 1] = [1, {k + 1}] for k = {k}" if k else "[1, k + 1] (>= 1)"
    raise FileError(f"{where}: acceptance length (tau) {tau:g} from {what} is impossible: it counts the bonus "
                    f"token, so it lies in {bounds}")


def _check_fraction(where: str, value: float, what: str) -> None:
    if not (math.isfinite(value) and -_TOL <= value <= 1 + _TOL):
        raise FileError(f"{where}: {what} {value:g} is no acceptance rate (a fraction 0-1)")


def _checked(out: dict, origin: str, *, tau: str, rate: str, per_position: str) -> dict:
    """`out` once its tau (in [1, k + 1]), rate and per-position rates (fractions) are possible; the
    names say where each came from, for the error line."""
    if out["acceptance_length"] is not None:
        _check_tau(origin, out["acceptance_length"], out["k"], tau)
    if out["acceptance_rate"] is not None:
        _check_fraction(origin, out["acceptance_rate"], f"acceptance rate ({rate})")
    for i, value in enumerate(out["per_position"] or ()):
        _check_fraction(origin, value, f"acceptance rate at position {i + 1} ({per_position})")
    return out


# Serving counters beside the speculative ones: output tokens and finished requests give the number
# of request steps, so an n-gram server's drafts per request step (its match rate).
_SERVING = {"vllm:generation_tokens": "generation_tokens", "vllm:request_success": "requests_finished"}


def _prom_samples(text: str, origin: str) -> list[tuple[str, dict[str, str], float, int]]:
    """(name, labels, value, line) of every sample of a vllm:spec_decode_* metric (named
    vllm:spec_decode_*, either separator) or of a serving counter in _SERVING (named by its value)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _PROM_LINE.match(s)
        if not m:
            continue
        raw = m.group(1)
        if _PROM_PREFIX.match(raw):
            name = "vllm:" + _PROM_PREFIX.sub("spec_decode_", raw)
        else:
            name = _SERVING.get(raw[: -len("_total")] if raw.endswith("_total") else raw, "")
            if not name:
                continue
        try:
            value = float(m.group(3))
        except ValueError:
            raise CrossoverError(f"{origin}:{lineno}: {raw} has a value that is not a number: "
                                 f"{m.group(3)!r}") from None
        out.append((name, dict(_PROM_LABEL.findall(m.group(2) or "")), value, lineno))
    return out


def _count(x: float) -> int | float:
    return int(x) if math.isfinite(x) and x == int(x) else x


def _prom_counters(text: str, origin: str, model_name: str | None) -> dict:
    """Raw sums of one scrape: spec-decode counters, accepted tokens per position, gauges and the
    serving counters (summed over engines and label sets)."""
    samples = _prom_samples(text, origin)
    serving = [x for x in samples if x[0] in _SERVING.values()]
    samples = [x for x in samples if x[0] not in _SERVING.values()]
    models = sorted({lab["model_name"] for _, lab, _, _ in samples if "model_name" in lab})
    if model_name is not None:
        samples = [s for s in samples if s[1].get("model_name") == model_name]
        if not samples:
            raise CrossoverError(f"{origin}: no vllm:spec_decode_* metrics for model_name {model_name!r}")
    elif len(models) > 1:
        raise CrossoverError(f"{origin}: vllm:spec_decode_* metrics for several models "
                             f"({', '.join(models)}); pick one with model_name")
    if not samples:
        raise CrossoverError(f"{origin}: no vllm:spec_decode_* Prometheus metrics found")
    totals: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    per_pos: dict[int, float] = {}
    for name, labels, value, lineno in samples:
        base = name[: -len("_total")] if name.endswith("_total") else name
        if base == "vllm:spec_decode_num_accepted_tokens_per_pos":
            if "position" not in labels or not labels["position"].isdigit():
                raise CrossoverError(f"{origin}:{lineno}: {name} without a numeric position label")
            if len(labels["position"]) > 6 or int(labels["position"]) >= MAX_K:
                raise FileError(f"{origin}:{lineno}: {name} at position {labels['position'][:20]}; no engine "
                                f"drafts more than {MAX_K} tokens per step (k)")
            pos = int(labels["position"])
            per_pos[pos] = per_pos.get(pos, 0.0) + _prom_count(origin, lineno, name, value)
        elif base in ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency"):
            if math.isfinite(value) and (value < 0 or (base.endswith("rate") and value > 1 + _TOL)):
                raise FileError(f"{origin}:{lineno}: gauge {name} is {value:g}; expected a fraction 0-1")
            gauges.setdefault(base, []).append(value)  # NaN: nothing drafted yet (V0), not measured
        elif base in _COUNTERS:
            totals[base] = totals.get(base, 0.0) + _prom_count(origin, lineno, name, value)
        else:
            totals[base] = totals.get(base, 0.0) + value
    model = model_name if model_name is not None else (models[0] if models else None)
    for name, labels, value, lineno in serving:
        if model is None or labels.get("model_name", model) == model:
            totals[name] = totals.get(name, 0.0) + _prom_count(origin, lineno, name, value)
    return {"totals": totals, "gauges": gauges, "per_pos": per_pos}


# The counters acceptance is computed from (summed over engines): each must be a count.
_COUNTERS = frozenset({"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                       "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_emitted_tokens"})


def _prom_count(origin: str, lineno: int, name: str, value: float) -> float:
    """A counter sample: a finite count 0..MAX_COUNT (a NaN or Inf counter made NaN acceptance, exit 0)."""
    if not (math.isfinite(value) and 0 <= value <= MAX_COUNT):
        raise FileError(f"{origin}:{lineno}: counter {name} is {value:g}; a counter is a finite count from 0 "
                        "to 1e18")
    return value


def _acceptance_of(raw: dict, origin: str) -> dict:
    totals, gauges, per_pos = raw["totals"], raw["gauges"], raw["per_pos"]
    drafts = totals.get("vllm:spec_decode_num_drafts")
    drafted = totals.get("vllm:spec_decode_num_draft_tokens")
    accepted = totals.get("vllm:spec_decode_num_accepted_tokens")
    emitted = totals.get("vllm:spec_decode_num_emitted_tokens")
    out = _empty()
    out.update(
        accepted=_count(accepted) if accepted is not None else None,
        drafted=_count(drafted) if drafted is not None else None,
        num_drafts=_count(drafts) if drafts is not None else None,
        emitted=_count(emitted) if emitted is not None else None,
    )
    if accepted is not None and drafted:
        out["acceptance_rate"] = accepted / drafted
    elif gauges.get("vllm:spec_decode_draft_acceptance_rate"):
        vals = [v for v in gauges["vllm:spec_decode_draft_acceptance_rate"] if math.isfinite(v)]
        out["acceptance_rate"] = sum(vals) / len(vals) if vals else None
    if drafts:
        if accepted is not None:
            out["acceptance_length"] = 1 + accepted / drafts
        if per_pos:
            k = max(per_pos) + 1
            out["per_position"] = tuple(per_pos.get(i, 0.0) / drafts for i in range(k))
            out["k"] = k
        elif drafted:
            ratio = drafted / drafts
            out["k"] = round(ratio) if abs(ratio - round(ratio)) < 1e-9 and round(ratio) <= MAX_K else None
    elif emitted is not None and drafted and len(gauges.get("vllm:spec_decode_efficiency", [])) == 1:
        eff = gauges["vllm:spec_decode_efficiency"][0]
        denom = emitted - eff * drafted
        if math.isfinite(eff) and eff > 0 and denom > 0:
            k_est = eff * drafted / denom
            if 1 <= round(k_est) <= MAX_K and abs(k_est - round(k_est)) < 0.05:
                k = round(k_est)
                out["k"] = k
                out["num_drafts"] = _count(drafted / k)
                out["acceptance_length"] = emitted * k / drafted
    if gauges.get("vllm:spec_decode_efficiency") and math.isfinite(gauges["vllm:spec_decode_efficiency"][0]):
        out["system_efficiency"] = gauges["vllm:spec_decode_efficiency"][0]
    gen, done = totals.get("generation_tokens"), totals.get("requests_finished")
    out["generation_tokens"] = _count(gen) if gen is not None else None
    out["requests_finished"] = _count(done) if done is not None else None
    out["match_rate"] = None
    if drafts is not None and accepted is not None and gen is not None and done is not None:
        out["match_rate"] = match_rate(drafts, gen, done, accepted)
    v1 = bool(drafts)
    return _checked(out, origin, tau=("1 + vllm:spec_decode_num_accepted_tokens / vllm:spec_decode_num_drafts" if v1
                                      else "vllm:spec_decode_num_emitted_tokens and the efficiency gauge"),
                    rate=("vllm:spec_decode_num_accepted_tokens / vllm:spec_decode_num_draft_tokens"
                          if accepted is not None and drafted else "the vllm:spec_decode_draft_acceptance_rate gauge"),
                    per_position="vllm:spec_decode_num_accepted_tokens_per_pos / vllm:spec_decode_num_drafts")


def match_rate(drafts: float, generated: float, finished: float, accepted: float) -> float | None:
    """The share of request steps that carried a draft (an n-gram server's proposal rate): each
    request's first token comes from its prefill and every later step emits 1 + its accepted drafts,
    so steps = output tokens - finished requests - accepted tokens; None when that is not positive."""
    steps = generated - finished - accepted
    return float(min(max(drafts / steps, 0.0), 1.0)) if steps > 0 else None


def parse_prometheus(text: str, origin: str = "metrics", model_name: str | None = None,
                     before: str | None = None, before_origin: str | None = None) -> dict:
    """Acceptance from one scrape of vLLM's /metrics: vllm:spec_decode_* counters summed over engines.

    V1: rate = accepted / draft tokens, tau = 1 + accepted / drafts, per-position = accepted at each
    position / drafts, k = number of positions. V0 (no drafts counter): the rate from the counters
    (else the draft_acceptance_rate gauge); k and tau from the efficiency gauge, which is
    emitted / (drafts x (k+1)) with drafts = draft tokens / k, when that gives a whole k.
    With vllm:generation_tokens and vllm:request_success, the share of request steps that carried a
    draft (`match_rate`: drafts / (output tokens - finished requests - accepted tokens), an n-gram
    server's proposal rate). Counters run from server start: `before`, a scrape taken before the
    run, is subtracted for per-run values (`before_origin` names it in errors).
    """
    raw = _prom_counters(text, origin, model_name)
    if before is not None:
        base = _prom_counters(before, before_origin or origin + " (before)", model_name)
        for key in ("totals", "per_pos"):
            for name, v in base[key].items():
                left = raw[key].get(name, 0.0) - v
                if left < 0:
                    raise CrossoverError(f"{origin}: counter {name} fell from {v:g} to {raw[key].get(name, 0.0):g} "
                                         "between the scrapes: give the scrape taken before the run second")
                raw[key][name] = left
    return _acceptance_of(raw, origin)


def read_acceptance(path: str | Path, before: str | Path | None = None) -> dict:
    """Acceptance from a vLLM server log or a Prometheus /metrics scrape, picked by content (`before`:
    a scrape taken before the run, subtracted)."""
    path = Path(path)
    text = read_text(path, "a vLLM log or a /metrics scrape", errors="replace")
    if any(_PROM_PREFIX.match(line.strip()) for line in text.splitlines()):
        prior = None if before is None else read_text(Path(before), "a /metrics scrape", errors="replace")
        return parse_prometheus(text, origin=str(path), before=prior, before_origin=None if before is None else
                                f"{before} (the scrape before the run)")
    if before is not None:
        raise CrossoverError(f"{path}: a scrape taken before the run applies to Prometheus scrapes, not to logs")
    if _LOG_LINE.search(text):
        return parse_spec_decode_log(text, origin=str(path))
    raise CrossoverError(f"{path}: neither a vLLM log with SpecDecoding metrics lines nor a Prometheus scrape "
                         f"with vllm:spec_decode_* metrics")
