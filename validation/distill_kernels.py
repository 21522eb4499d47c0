"""Distil the roofline's per-hardware parameters from measured kernel tables (issue 11 item 3).

Run: pip install "crossover[kernels]"; python validation/distill_kernels.py [--framework vllm] [--no-write]

For every GPU with tables in aiconfigurator-core's data files (read as data; the package's code is
never run), each op class's measured shapes are split in two halves (alternate values of its main
axis, `split`). On one half we fit the op-level roofline's parameters, in log space (robust soft-L1 loss):

  GEMM (bf16, fp8)     t = floor + combine(bytes / (BW fb u), FLOPs / (R ff u), p), u = T / (T + T0)
                       with T = ceil(m / 64) ceil(n / 128) output tiles (fp8: + the activations'
                       quantisation, a second kernel)
  decode attention     t = floor + combine(KV bytes (1 + L0 / L) / (BW fb), FLOPs / (R ff), p)
  context attention    t = floor + combine(bytes / (BW fb), FLOPs / (R ff d / (d + d0)), p), d head size
  MoE                  t = floor + combine(expert bytes / (BW fb), FLOPs / (R ff), p)
  all-reduce           t = base + 2 (g - 1) hop + bytes 2 (g - 1) / g / (link fl)

(BW, R, link: the datasheet peaks of hardware/<gpu>.yaml; m tokens, L KV length, g GPUs; combine is roofline.combine's smooth transition). On the other half we report the median
op-level |ln error| of (a) that roofline with the distilled parameters, (b) the kernels mode's own
log-space interpolation of the fitting half (crossover.kernel_tables.make_grid), and (c) the
roofline with today's defaults (no floor, 0.80 of peak bandwidth, the chip's matmul fraction,
p = 1.5). Writes validation/kernels.md and, unless --no-write, a `distilled:` block per GPU into
hardware/<gpu>.yaml with its source (package, version, framework and table versions, date).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import re
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crossover.kernel_tables import (GPU_FOLDERS, PACKAGE, Columns, make_grid, pick_version,  # noqa: E402
                                     read_table, require_package)
from crossover.roofline import combine  # noqa: E402
from crossover.specs import load_hardware  # noqa: E402
from crossover.specs.deployment import DEFAULT_BANDWIDTH_FRACTION, DEFAULT_FLOPS_FRACTION  # noqa: E402

KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0}
SEED = 0


def _load(root: Path, gpu: str, folder: str, framework: str, stem: str) -> tuple[Columns, str] | None:
    v = pick_version(root, gpu, folder, framework, stem)
    if v is None:
        return None
    cols = read_table(root / gpu / folder / framework / v / stem)
    return (cols, f"{framework} {v}") if cols is not None and cols.rows else None


def _main_kernel(cols: Columns, mask: np.ndarray) -> np.ndarray:
    if "kernel_source" not in cols or not mask.any():
        return mask
    codes = cols.codes("kernel_source")
    return mask & (codes == np.bincount(codes[mask]).argmax())


def op_samples(root: Path, gpu: str, framework: str, hw) -> dict[str, dict]:
    """Per op class: shapes (coordinates for interpolation), bytes, FLOPs, peaks, seconds."""
    out = {}
    got = _load(root, gpu, "gemm", framework, "gemm_perf")
    if got:
        c, src = got
        for dt, label, wb in (("bfloat16", "gemm bf16", 2.0), ("fp8", "gemm fp8", 1.0)):
            mask = _main_kernel(c, c.is_("gemm_dtype", (dt,)))
            rate_dt = "bf16" if dt == "bfloat16" else "fp8"
            if not mask.any() or (rate_dt == "fp8" and hw.fp8_dense_tflops is None):
                continue
            m, n, k = c.num("m")[mask], c.num("n")[mask], c.num("k")[mask]
            tiles = np.ceil(m / 64.0) * np.ceil(n / 128.0)  # output tiles: the kernel's parallelism
            out[label] = dict(coords=[m, n, k], bytes=n * k * wb + m * k * wb + m * n * 2.0, flops=2 * m * n * k, act=m * k,
                              rate=hw.peak_flops(rate_dt), x=m, xm=tiles, t=c.num("latency")[mask] * 1e-3, src=src)
    for stem, label in (("generation_attention_perf", "decode attention"), ("context_attention_perf", "context attention")):
        got = _load(root, gpu, "attention", framework, stem)
        if not got:
            continue
        c, src = got
        mask = c.is_("kv_cache_dtype", ("bfloat16",))
        if "window_size" in c:
            mask &= c.num("window_size") == 0
        mask = _main_kernel(c, mask)
        b, h, kvh, hd = (c.num(x)[mask] for x in ("batch_size", "num_heads", "num_key_value_heads", "head_dim"))
        if label.startswith("decode"):
            length = c.num("step")[mask] + c.num("isl")[mask]
            nbytes, flops, x = b * length * kvh * hd * 2 * 2.0, 4.0 * b * length * h * hd, length
        else:
            length = c.num("isl")[mask]
            nbytes = 2.0 * b * length * (h + 2 * kvh) * hd * 2.0
            flops, x = 4.0 * h * hd * b * length * (length + 1) / 2.0, length
        out[label] = dict(coords=[h, kvh, hd, b, length], bytes=nbytes, flops=flops, rate=hw.peak_flops("bf16"),
                          x=x, xm=x if label.startswith("decode") else hd, t=c.num("latency")[mask] * 1e-3, src=src)
    got = _load(root, gpu, "moe", framework, "moe_perf")
    if got:
        c, src = got
        mask = _main_kernel(c, c.is_("moe_dtype", ("bfloat16",)) & c.is_("distribution", ("balanced",))
                            & (c.num("moe_ep_size") == 1))
        if mask.any():
            t, hid, inter, topk, e, tp = (c.num(x)[mask] for x in ("num_tokens", "hidden_size", "inter_size", "topk",
                                                                     "num_experts", "moe_tp_size"))
            distinct = e * (1.0 - np.power(1.0 - topk / e, t))  # ops.expected_distinct_experts
            nbytes = distinct * 3 * hid * inter / tp * 2.0 + t * topk * (2 * hid + 2 * inter / tp) * 2.0
            out["moe bf16"] = dict(coords=[hid, inter, topk, e, tp, t], bytes=nbytes, flops=2.0 * t * topk * 3 * hid * inter / tp,
                                   rate=hw.peak_flops("bf16"), x=t, t=c.num("latency")[mask] * 1e-3, src=src)
    got = _load(root, gpu, "comm", framework, "custom_allreduce_perf") or _load(root, gpu, "comm", "nccl", "nccl_perf")
    if got:
        c, src = got
        mask = c.is_("op_name", ("all_reduce",))
        for col in ("allreduce_dtype", "nccl_dtype"):
            if col in c:
                mask &= c.is_(col, ("bfloat16", "half"))
        if "kernel_source" in c.text:
            graph = c.is_("kernel_source", [s for s in c.text["kernel_source"][0] if "graph" in str(s)])
            mask = mask & graph if (mask & graph).any() else mask
        g, size = c.num("num_gpus")[mask], c.num("message_size")[mask] * 2.0
        out["all-reduce"] = dict(coords=[g, size], bytes=size, flops=np.zeros_like(size), gpus=g,
                                 rate=1.0, x=size, t=c.num("latency")[mask] * 1e-3, src=src)
    return out


# ------------------------------------------------------------------ models

def _model(label: str, s: dict, hw, params: np.ndarray) -> np.ndarray:
    """Seconds of each shape under the op-level roofline with `params` (log-space parameters)."""
    bw = hw.bandwidth_bytes_s
    if label == "all-reduce":
        base, hop, fl = np.exp(params)
        g = s["gpus"]
        return base + 2 * (g - 1) * hop + s["bytes"] * 2 * (g - 1) / g / (hw.interconnect_bytes_s * fl)
    floor, fb, ff, p1, x0 = np.exp(params[:5])
    p = 1.0 + p1
    mem, comp = s["bytes"] / (bw * fb), s["flops"] / (s["rate"] * ff)
    extra = 0.0
    if label.startswith("gemm"):  # few output tiles: few SMs stream and multiply (efficiency min(1, T / T0))
        slow = np.maximum(1.0, x0 / s["xm"])
        mem, comp = mem * slow, comp * slow
    elif label.startswith("context"):
        comp = comp * (1.0 + x0 / s["xm"])  # narrow heads use the tensor cores less well
    elif label.startswith("decode"):
        mem = mem * (1.0 + x0 / s["x"])  # per-sequence work as x0 extra tokens read
    if label == "gemm fp8":  # the activations are quantised to fp8 by a kernel of their own first:
        extra = floor + s["act"] * 3.0 / (bw * np.exp(params[5]))  # another launch, bf16 read + fp8 write
    return floor + combine(mem, comp, "smooth", p) + extra


def _start(label: str, hw) -> np.ndarray:
    if label == "all-reduce":
        return np.log([5e-6, 1e-6, 0.8])
    start = [5e-6, 0.85, hw.achieved_flops_fraction or DEFAULT_FLOPS_FRACTION, 0.5, 16.0]
    return np.log(start + ([0.3] if label == "gemm fp8" else []))


def fit(label: str, s: dict, hw, idx: np.ndarray) -> np.ndarray:
    sub = {k: (v[idx] if isinstance(v, np.ndarray) else v) for k, v in s.items() if k != "coords"}
    y = np.log(sub["t"])
    x0 = _start(label, hw)
    if label == "all-reduce":  # base, hop: any; the link fraction at most 1
        lo, hi = [-30, -30, np.log(1e-3)], [0, 0, 0.0]
    else:  # floor, fractions of peak (at most 1), p - 1 (p in [1, 9]), the half-efficiency point
        lo, hi = [-30, np.log(1e-3), np.log(1e-3), np.log(1e-3), -30], [0, 0.0, 0.0, np.log(8.0), np.log(1e6)]
        if label == "gemm fp8":  # the quantisation kernel's fraction of peak bandwidth
            lo, hi = lo + [np.log(1e-3)], hi + [0.0]
    res = least_squares(lambda q: np.log(_model(label, sub, hw, q)) - y, np.clip(x0, np.add(lo, 1e-6), np.subtract(hi, 1e-6)),
                        bounds=(lo, hi), loss="soft_l1", f_scale=0.05, max_nfev=400)
    return res.x


def default_roofline(label: str, s: dict, hw) -> np.ndarray:
    """Today's roofline op time (no per-call floor; the layer overhead is not an op cost)."""
    if label == "all-reduce":
        g = s["gpus"]
        return 5e-6 + 2 * (g - 1) * hw.allreduce_hop_latency_s + s["bytes"] * 2 * (g - 1) / g / (hw.interconnect_bytes_s * 0.8)
    fb = hw.achieved_bandwidth_fraction or DEFAULT_BANDWIDTH_FRACTION
    ff = hw.achieved_flops_fraction or DEFAULT_FLOPS_FRACTION
    return combine(s["bytes"] / (hw.bandwidth_bytes_s * fb), s["flops"] / (s["rate"] * ff), "smooth", 1.5)


def interpolate(s: dict, fit_idx: np.ndarray, test_idx: np.ndarray) -> np.ndarray:
    """The kernels mode's interpolation of the fitting half at the held-out shapes (NaN: not covered)."""
    coords = s["coords"]
    # Categorical axes (heads, kv heads, head dim, experts...) must match exactly; the continuous ones
    # (m, n, k; batch and length; tokens; bytes) interpolate. Group by the exact ones.
    exact = {"gemm": [], "decode": [1, 2], "context": [1, 2], "moe": [0, 1, 2, 3, 4], "all-reduce": [0]}
    kind = next(k for k in exact if s["label"].startswith(k))
    keys = np.stack([coords[i] for i in exact[kind]], axis=1) if exact[kind] else np.zeros((len(s["t"]), 0))
    cont = [i for i in range(len(coords)) if i not in exact[kind]]
    out = np.full(len(test_idx), np.nan)
    for key in np.unique(keys[fit_idx], axis=0):
        f = fit_idx[np.all(keys[fit_idx] == key, axis=1)]
        tmask = np.all(keys[test_idx] == key, axis=1)
        if not tmask.any():
            continue
        grid = make_grid([coords[i][f] for i in cont], s["t"][f])
        out[tmask] = grid.at(*[coords[i][test_idx[tmask]] for i in cont])
    return out


def split(x: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Half the shapes to fit, half held out: alternate measured values of the op's main axis (m,
    KV length, prompt length, tokens, message size) from a seeded start, so every held-out shape
    lies between fitted ones (or beyond them) and neither mode has seen it."""
    vals = np.unique(x)
    held = vals[int(rng.integers(2))::2]
    test = np.isin(x, held)
    return np.nonzero(~test)[0], np.nonzero(test)[0]


def distil(framework: str) -> tuple[list[dict], dict[str, dict], str]:
    root, version = require_package()
    rows, params = [], {}
    rng = np.random.default_rng(SEED)
    for hw_name, gpu in GPU_FOLDERS.items():
        if not (root / gpu / "gemm").is_dir():
            continue
        hw = load_hardware(hw_name)
        samples = op_samples(root, gpu, framework, hw)
        gp = {}
        for label, s in samples.items():
            s["label"] = label
            fit_idx, test_idx = split(s["x"], rng)
            q = fit(label, s, hw, fit_idx)
            test = {k: (v[test_idx] if isinstance(v, np.ndarray) else v) for k, v in s.items() if k != "coords"}
            y = test["t"]
            e_roof = np.abs(np.log(_model(label, test, hw, q) / y))
            e_def = np.abs(np.log(default_roofline(label, test, hw) / y))
            interp = interpolate(s, fit_idx, test_idx)
            ok = np.isfinite(interp)
            e_kern = np.abs(np.log(interp[ok] / y[ok]))
            sol = (s["bytes"] / hw.bandwidth_bytes_s if label != "all-reduce" else 0.0)
            below = int(np.sum(s["t"] < np.maximum(sol, s["flops"] / s["rate"]) * (1 - 1e-9))) if label != "all-reduce" else 0
            rows.append(dict(gpu=hw_name, op=label, source=s["src"], n_fit=len(fit_idx), n_test=len(test_idx),
                             roof=float(np.median(e_roof)), roof_p90=float(np.quantile(e_roof, 0.9)),
                             kern=float(np.median(e_kern)) if ok.any() else float("nan"), cover=float(ok.mean()),
                             default=float(np.median(e_def)), below_sol=below, n=len(s["t"])))
            gp[label] = (q, s["src"])
        params[hw_name] = {"gpu": gpu, "fits": gp}
    return rows, params, version


def _fmt_params(label: str, q: np.ndarray) -> dict[str, float]:
    if label == "all-reduce":
        base, hop, fl = np.exp(q)
        return {"base_us": base * 1e6, "hop_us": hop * 1e6, "link_fraction": fl}
    floor, fb, ff, p1, x0 = np.exp(q[:5])
    x0_name = {"gemm": "tiles_half", "decode": "kv_len_extra", "context": "head_dim_half", "moe": "unused"}
    name = next(v for k, v in x0_name.items() if label.startswith(k))
    out = {"floor_us": floor * 1e6, "bandwidth_fraction": fb, "flops_fraction": ff, "transition_p": 1.0 + p1}
    if name != "unused":
        out[name] = x0
    if len(q) > 5:
        out["quantise_bandwidth_fraction"] = float(np.exp(q[5]))
    return out


def report(rows: list[dict], params: dict, version: str, framework: str) -> str:
    lines = ["# Kernel tables: op-level errors of both cost modes", "",
             f"Written by `python validation/distill_kernels.py --framework {framework}` from the data files of "
             f"{PACKAGE} {version} (measured per GPU; read as data, the package's code never runs), "
             f"{_dt.date.today().isoformat()}.", "",
             "Each op class's shapes are split in two halves (alternate measured values of its main axis: m, KV length, prompt length, tokens, message size). On one half we fit the op-level "
             "roofline's parameters; on the other we report the median |ln(predicted / measured)| of: "
             "**roofline, distilled** (the fitted parameters), **kernels** (the kernels cost mode's log-space "
             "interpolation of the fitting half; `covered` = share of held-out shapes inside it) and "
             "**roofline, today** (no per-call floor, default fractions, p = 1.5). `< SoL` counts measured "
             "points faster than the datasheet speed of light (operands resident in L2 between timed repeats). "
             "Today's roofline has no per-call floor (its 15 us of kernel gaps per layer is a step term, "
             "`layer_overhead_s`), so its op-level error at small shapes is large by construction: that column "
             "is for scale.", "",
             "| GPU | op class | table | shapes | roofline, distilled (p90) | kernels (covered) | roofline, today | < SoL |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        kern = "n/a" if np.isnan(r["kern"]) else f"{r['kern']:.3f} ({r['cover']:.0%})"
        lines.append(f"| {r['gpu']} | {r['op']} | {r['source']} | {r['n']} | {r['roof']:.3f} ({r['roof_p90']:.3f}) | "
                     f"{kern} | {r['default']:.3f} | {r['below_sol']} |")
    goal = [r for r in rows if r["roof"] > 0.10]
    lines += ["", f"Goal (median <= 0.10 per op class, roofline with distilled parameters): "
              + ("met on every GPU x op class." if not goal else
                 "missed on " + ", ".join(f"{r['gpu']} {r['op']} ({r['roof']:.3f})" for r in goal) + "."), "",
              "## Distilled parameters", "",
              "floor: fixed seconds per kernel call; fractions of the datasheet peaks; p: the smooth transition's "
              "exponent; tiles_half: GEMM output tiles (64 x 128) at which efficiency is half its plateau; "
              "head_dim_half: context attention's head size at which FLOP efficiency is half its plateau; "
              "kv_len_extra: per-sequence work of decode attention, as extra KV tokens read.", ""]
    for hw_name, p in params.items():
        for label, (q, src) in p["fits"].items():
            vals = ", ".join(f"{k} {v:.3g}" for k, v in _fmt_params(label, q).items())
            lines.append(f"- {hw_name}, {label} ({src}): {vals}")
    return "\n".join(lines) + "\n"


STEP_CASES = (("llama-3.1-8b", "h100-sxm", 1), ("llama-3.1-70b", "h100-sxm", 4), ("llama-3.1-8b", "h200", 1),
              ("llama-3.1-70b", "b200", 2), ("qwen3-8b", "a100-80gb-sxm", 1))


def step_level(framework: str) -> list[str]:
    """Whole forwards: the roofline with today's defaults and with the distilled values its dials
    take (Distilled.efficiency_fields), each against the kernels mode, over batch 1-256, q 1 and 4,
    context 512 and 4096 (median |ln(roofline / kernels)|). Run after the YAML blocks are written."""
    from crossover.kernels import Kernels
    from crossover.roofline import compiled_target
    from crossover.specs import Deployment, load_model
    from crossover.step import Roofline, uniform

    lines = ["", "## Step level: the roofline against the kernels mode", "",
             "Whole target forwards (batch 1, 4, 16, 64, 256; q 1 and 4; context 512 and 4096), median "
             "|ln(roofline / kernels)|: today's defaults, and the distilled values the roofline's dials take "
             "(`Distilled.efficiency_fields`: bf16 GEMM fractions and p, decode attention's KV fraction, the "
             "all-reduce's base, hop and link fraction, the kernels' per-call floors added to the per-layer "
             "overhead). Opt-in; the default roofline does not read them.", "",
             "| model | GPU | TP | roofline, today | roofline, distilled dials |", "|---|---|---:|---:|---:|"]
    for name, hw_name, tp in STEP_CASES:
        hw = load_hardware(hw_name)
        if hw.distilled is None:
            continue
        dep = Deployment(model=load_model(name), hardware=hw, tp=tp)
        tuned = dep.with_efficiency(**hw.distilled.efficiency_fields(dep.efficiency.layer_overhead_s))
        mode, ops = Kernels(framework, hw_name), compiled_target(dep)
        errs: dict[str, list] = {"today": [], "distilled": []}
        b = np.array([1.0, 4.0, 16.0, 64.0, 256.0])
        for q in (1.0, 4.0):
            for ctx in (512.0, 4096.0):
                ref = mode.forward(ops, uniform(ops, b, q, ctx)).total
                for label, d in (("today", dep), ("distilled", tuned)):
                    o = compiled_target(d)
                    errs[label] += list(np.abs(np.log(Roofline().forward(o, uniform(o, b, q, ctx)).total / ref)))
        lines.append(f"| {name} | {hw_name} | {tp} | {np.median(errs['today']):.3f} | {np.median(errs['distilled']):.3f} |")
    return lines


def write_yaml(hw_name: str, p: dict, version: str, framework: str) -> None:
    """Replace (or append) this script's `distilled:` block in hardware/<name>.yaml; no other key is touched."""
    path = ROOT / "hardware" / f"{hw_name}.yaml"
    text = path.read_text()
    tables = sorted({src for _, src in p["fits"].values()})
    block = ["distilled:",
             f"  source: \"{PACKAGE} {version} kernel tables, {p['gpu']} ({'; '.join(tables)}), fitted on half "
             f"of each table's shapes by validation/distill_kernels.py --framework {framework} on "
             f"{_dt.date.today().isoformat()}; errors in validation/kernels.md\""]
    for label, (q, _) in p["fits"].items():
        key = re.sub(r"[^a-z0-9]+", "_", label).strip("_")
        vals = ", ".join(f"{k}: {float(v):.4g}" for k, v in _fmt_params(label, q).items())
        block.append(f"  {key}: {{{vals}}}")
    new = "\n".join(block) + "\n"
    pattern = re.compile(r"^distilled:\n(?:  .*\n)*", re.M)
    text = pattern.sub(new, text, count=1) if pattern.search(text) else text.rstrip("\n") + "\n" + new
    path.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", default="vllm", choices=("vllm", "sglang", "trtllm"))
    ap.add_argument("--no-write", action="store_true", help="report only; leave hardware/*.yaml alone")
    args = ap.parse_args(argv)
    rows, params, version = distil(args.framework)
    text = report(rows, params, version, args.framework)
    if not args.no_write:
        for hw_name, p in params.items():
            write_yaml(hw_name, p, version, args.framework)
        text += "\n".join(step_level(args.framework)) + "\n"
    (ROOT / "validation" / "kernels.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
