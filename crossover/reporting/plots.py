"""Figures (matplotlib, imported only here and only when a figure is asked for). A leaf module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import gpus_said

from ..errors import CrossoverError
from ..files import write_atomic


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a screen
        import matplotlib.pyplot as plt
    except ImportError as exc:  # a broken or missing install: one line, nothing written
        raise CrossoverError(f"--plot needs matplotlib, which cannot be imported ({exc}); "
                             f"pip install matplotlib, or leave out --plot") from None
    return plt


PLOT_SUFFIXES = (".png", ".svg", ".pdf")  # what the figures are written as (matplotlib's Agg backend)


def check_plot_name(path: str) -> None:
    """A one-line error for a figure file name matplotlib is not asked to write here."""
    if Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise CrossoverError(f"--plot {path}: use a .png, .svg or .pdf file name")


def _save(fig, path: str) -> None:
    check_plot_name(path)

    def write(tmp: str) -> None:
        fig.savefig(tmp, dpi=130, bbox_inches="tight")

    write_atomic(path, write)


def _title(inputs: dict[str, Any]) -> str:
    acc = f"tau {inputs['tau']:.2f}"
    return (f"{inputs['model']} on {gpus_said(inputs)}, {inputs['method']} k={inputs['k']} "
            f"({acc}), context {inputs['context']:.0f}")


def plot_prediction(pred, inputs: dict[str, Any], path: str) -> None:
    """Throughput on/off against batch, with the crossover and the memory limits marked."""
    import numpy as np

    from ..analysis.curves import evaluate

    plt = _pyplot()
    b_max = float(pred.curves.batch.max())
    xs = np.geomspace(1.0, b_max, 200)
    c = evaluate(pred.scenario, xs)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    ax.plot(xs, c.tokens_per_s_off, label="speculation off", color="tab:blue")
    ax.plot(xs, c.tokens_per_s_on, label="speculation on", color="tab:orange")
    ax.set_ylabel("output tokens/s")
    ax2.plot(xs, c.speedup, color="tab:green")
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.set_ylabel("speedup (on / off)")
    ax2.set_xlabel("batch (sequences in flight)")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.grid(alpha=0.3)
        for lim, style, label in ((pred.max_batch_off, ":", "memory limit, off"),
                                  (pred.max_batch_on, "--", "memory limit, on")):
            if 1 <= lim <= b_max:
                a.axvline(lim, color="grey", ls=style, lw=0.8, label=label if a is ax else None)
    for x in pred.crossings:
        ax2.axvline(x.batch, color="red", lw=1)
        ax2.annotate(f"crossover {x.batch:.0f}", (x.batch, 1.0), textcoords="offset points", xytext=(5, 8),
                     color="red")
    ax.legend()
    ax.set_title(_title(inputs), fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_simulation(res, inputs: dict[str, Any], path: str) -> None:
    """Output throughput and p50/p99 latency against load, both arms, the crossover marked."""
    import numpy as np

    plt = _pyplot()
    x = np.array([lv.value for lv in res.levels])
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for arm, color in (("off", "tab:blue"), ("on", "tab:orange")):
        ax.plot(x, [getattr(lv, arm)["output_throughput"] for lv in res.levels], "o-", color=color,
                label=f"speculation {arm}")
        sat = [i for i, lv in enumerate(res.levels) if getattr(lv, arm).get("saturated")]
        if sat:  # the queue grew without bound there: the point depends on the run's length
            ax.plot(x[sat], [getattr(res.levels[i], arm)["output_throughput"] for i in sat], "X", color="red",
                    ms=9, label=f"{arm} saturated")
        metric = "tpot" if res.axis == "concurrency" else "e2el"
        ax2.plot(x, [getattr(lv, arm)[f"median_{metric}_ms"] for lv in res.levels], "o-", color=color,
                 label=f"{arm} p50 {metric.upper()}")
        ax2.plot(x, [getattr(lv, arm)[f"p99_{metric}_ms"] for lv in res.levels], "s--", color=color, alpha=0.7,
                 label=f"{arm} p99 {metric.upper()}")
    xlabel = "concurrency" if res.axis == "concurrency" else "request rate (req/s)"
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlabel(xlabel)
        a.grid(alpha=0.3)
        if res.crossover is not None:
            a.axvline(res.crossover, color="red", lw=1)
    ax.set_ylabel("output tokens/s")
    ax2.set_ylabel("latency (ms)")
    ax2.set_yscale("log")
    ax.legend()
    ax2.legend(fontsize=8)
    title = _title(inputs) + f", workload {inputs['workload']}"
    if res.crossover is not None:
        title += f"\ncrossover at {xlabel} {res.crossover:.1f}"
    fig.suptitle(title, fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_measured(table, scenario, path: str, predicted=None) -> None:
    """Measured on/off points, over the predicted curves when a scenario is given. A request-rate
    sweep is drawn as mean end-to-end latency (its throughput only echoes the offered rate), with
    the simulated levels in `predicted`."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    rates = table.load_axis == "request_rate" and all(p.metrics.get("mean_e2el_ms") for p in table.points)

    def y(p) -> float:
        return p.metrics["mean_e2el_ms"] / 1e3 if rates else p.output_throughput

    for arm, color in (("off", "tab:blue"), ("on", "tab:orange")):
        pts = table.arm(arm)
        ax.plot([p.load for p in pts], [y(p) for p in pts], "o", color=color, label=f"measured, speculation {arm}")
    title = f"measured sweep ({table.load_axis})"
    if scenario is not None and table.load_axis != "request_rate":
        from ..analysis.curves import evaluate

        sc, inputs = scenario
        loads = [p.load for p in table.points]
        xs = np.geomspace(max(min(loads), 1.0), max(loads), 100)
        c = evaluate(sc, xs)
        ax.plot(xs, c.tokens_per_s_off, "-", color="tab:blue", alpha=0.6, label="predicted, off")
        ax.plot(xs, c.tokens_per_s_on, "-", color="tab:orange", alpha=0.6, label="predicted, on")
        title = _title(inputs) + "\n" + title
    elif scenario is not None and predicted is not None:  # request rates: the simulated levels
        loads = [lv for lv, _, _ in table.pairs()]
        key = "e2el" if rates else ""
        for arm, color in (("off", "tab:blue"), ("on", "tab:orange")):
            vals = [v / 1e3 for v in predicted[f"{key}_{arm}"]] if rates else predicted[arm]
            ax.plot(loads, vals, "--x", color=color, alpha=0.6, label=f"simulated, {arm}")
        title = _title(scenario[1]) + "\n" + title
    ax.set_xscale("log", base=2)
    ax.set_xlabel(table.load_axis.replace("_", " "))
    ax.set_ylabel("mean end-to-end latency (s)" if rates else "output tokens/s")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_whatif(g, inputs: dict[str, Any], path: str) -> None:
    """Heatmap of the speedup over the two axes, the speedup = 1 contour drawn."""
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    sp = g.speedup
    lo, hi = float(np.nanmin(sp)), float(np.nanmax(sp))
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.999), vmax=max(hi, 1.001))
    numeric_x = g.x_axis != "hardware"
    numeric_y = g.y_axis != "hardware"
    xv = np.asarray(g.x, float) if numeric_x else np.arange(len(g.x))
    yv = np.asarray(g.y, float) if numeric_y else np.arange(len(g.y))
    mesh = ax.pcolormesh(xv, yv, sp, cmap="RdYlGn", norm=norm, shading="nearest")
    fig.colorbar(mesh, ax=ax, label="speedup (on / off)")
    if numeric_x and numeric_y and len(xv) > 1 and len(yv) > 1:
        cs = ax.contour(xv, yv, sp, levels=[1.0], colors="black", linewidths=1.5)
        ax.clabel(cs, fmt="crossover", fontsize=8)
    if g.x_axis in ("batch", "context"):
        ax.set_xscale("log", base=2)
    if g.y_axis in ("batch", "context"):
        ax.set_yscale("log", base=2)
    if not numeric_x:
        ax.set_xticks(xv, g.x, rotation=30)
    if not numeric_y:
        ax.set_yticks(yv, g.y)
    ax.set_xlabel(g.x_axis)
    ax.set_ylabel(g.y_axis)
    ax.set_title(_title(inputs) + f"\nspeedup over {g.x_axis} x {g.y_axis}", fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_plan(res, inputs: dict[str, Any], path: str) -> None:
    """Cost per million output tokens (left) and GPUs (right) against the TPOT SLO for the best
    options, each at its own k, the planned SLO marked (plan.slo_sweep)."""
    import numpy as np

    from ..planning.plan import slo_sweep

    plt = _pyplot()
    key = "median_tpot_ms" if "median_tpot_ms" in res.slo else next(iter(res.slo))
    planned = res.slo[key]
    xs = np.geomspace(planned / 3.0, planned * 3.0, 41)
    rows = slo_sweep(res, key, xs, top=8)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = {"off": "-", "on": "--", "routed": ":"}
    for r in rows:
        a1.plot(xs, [np.nan if v is None else v for v in r["usd_per_million_output_tokens"]], styles.get(r["arm"], "-"),
                label=r["label"])
        a2.step(xs, [np.nan if v is None else v for v in r["gpus"]], styles.get(r["arm"], "-"), where="post",
                label=r["label"])
    from ..planning.fleet import slo_label

    for ax, ylab in ((a1, "USD per million output tokens"), (a2, "GPUs at the peak")):
        ax.axvline(planned, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(plt.matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(plt.matplotlib.ticker.NullFormatter())
        ax.set_xlabel(f"{slo_label(key)} SLO, ms (planned: {planned:g})")
        ax.set_ylabel(ylab)
        ax.grid(alpha=0.3)
    a2.legend(fontsize=7)
    priced = any(v is not None for r in rows for v in r["usd_per_million_output_tokens"])
    a1.set_title(f"{res.costs.basis} cost" + ("" if priced else " (no option priced: --price)"), fontsize=9)
    a2.set_title(f"{inputs['model']}, {inputs['workload']}, peak {res.demand.peak_rps:.3g} req/s", fontsize=9)
    _save(fig, path)
    plt.close(fig)


def plot_speedup_family(sc, inputs: dict[str, Any], path: str, ks=(1, 2, 3, 4, 6, 8),
                        alphas=(0.5, 0.6, 0.7, 0.8, 0.9)) -> None:
    """Speedup against batch for several k (left) and several acceptance rates (right)."""
    from dataclasses import replace

    import numpy as np

    from ..model.scenario import Scenario
    from ..analysis.curves import evaluate
    from ..model.acceptance import Acceptance

    plt = _pyplot()
    xs = np.geomspace(1, 512, 120)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for k in ks:
        s = Scenario(sc.deployment, sc.speculation.with_k(k), sc.context, sc.prompt_len, sc.output_len)
        a1.plot(xs, evaluate(s, xs).speedup, label=f"k = {k}")
    base = sc.speculation.with_k(sc.speculation.k)
    for a in alphas:
        s = Scenario(sc.deployment, replace(base, acceptance=Acceptance.rate(a, base.acceptance.match_rate)),
                     sc.context, sc.prompt_len, sc.output_len)
        a2.plot(xs, evaluate(s, xs).speedup, label=f"acceptance {a:g}")
    for ax, t in ((a1, f"acceptance {inputs['alpha_equivalent']:.2f}, k varies"), (a2, f"k = {sc.speculation.k}, "
                                                                                     "acceptance varies")):
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(t, fontsize=9)
    a1.set_ylabel("speedup (on / off)")
    fig.suptitle(_title(inputs), fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_roofline(sc, inputs: dict[str, Any], path: str, batches=(1, 8, 32, 128, 512)) -> None:
    """Arithmetic intensity against attainable FLOP/s per GPU: the roofline, its ridge, and the
    decode and verify steps of the target at several batch sizes (whole-step FLOPs / bytes)."""
    import numpy as np

    from ..model.step import step_time

    plt = _pyplot()
    dep = sc.deployment
    bw, peak = dep.bandwidth, dep.flops
    ridge = peak / bw
    x = np.geomspace(0.1, max(ridge * 30, 1e3), 200)
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(x, np.minimum(peak, x * bw) / 1e12, color="black", lw=1.5, label="roofline (achieved)")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:.0f} FLOP/byte", (ridge, peak / 1e12 * 0.05), rotation=90, fontsize=8,
                xytext=(4, 0), textcoords="offset points")
    for q, marker, label in ((1.0, "o", "decode (q = 1)"), (sc.speculation.verify_width, "s",
                                                            f"verify (q = {sc.speculation.verify_width:g})")):
        pts = []
        for b in batches:
            c = step_time(dep, [b], q, sc.context)
            ops = c.ops
            flops = sum(float(o.flops[0]) for o in ops.values())
            nbytes = sum(float(o.bytes[0]) for o in ops.values())
            t = float(c.total[0])
            pts.append((flops / max(nbytes, 1.0), flops / t / 1e12, b))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker, ls="--", label=label)
        for ai, f, b in pts:
            ax.annotate(f"{b}", (ai, f), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, whole step)")
    ax.set_ylabel("attained TFLOP/s per GPU")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title(_title(inputs) + "\nnumbers: batch size", fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_breakdown(sc, inputs: dict[str, Any], path: str, batches=(1, 8, 32, 128, 512)) -> None:
    """Stacked step time at several batches, off and on: draft, verify by op, overheads."""
    import numpy as np

    from ..model.step import StepModel

    plt = _pyplot()
    model = StepModel.of(sc.deployment, sc.speculation)
    names: list[str] = []
    bars = []
    for b in batches:
        off = model.price(model.decode(np.array([b], float), sc.context), detail=True)
        on = model.price(model.decode(np.array([b], float), sc.context, sc.speculation), detail=True)
        for arm, step in (("off", off), ("on", on)):
            parts = {n: float(o.time[0]) for n, o in step.ops.items()}
            parts["overhead"] = float(step.target.overhead + step.term("step_overhead")[0])  # type: ignore[union-attr]
            if arm == "on":
                parts["draft"] = float(step.draft[0])
                parts["spec overhead"] = float(step.term("spec_overhead")[0] + step.term("spec_overhead_per_seq")[0])
            for n in parts:
                if n not in names:
                    names.append(n)
            bars.append((f"{b}\n{arm}", parts))
    fig, ax = plt.subplots(figsize=(11, 5))
    bottom = np.zeros(len(bars))
    cmap = plt.get_cmap("tab20")
    for i, n in enumerate(names):
        vals = np.array([p.get(n, 0.0) * 1e3 for _, p in bars])
        ax.bar(range(len(bars)), vals, bottom=bottom, label=n, color=cmap(i % 20))
        bottom += vals
    ax.set_xticks(range(len(bars)), [lab for lab, _ in bars], fontsize=8)
    ax.set_ylabel("ms per step")
    ax.set_xlabel("batch / speculation")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(_title(inputs) + "\nstep time by op (verify step for 'on')", fontsize=10)
    _save(fig, path)
    plt.close(fig)


def plot_policy(pol, inputs: dict[str, Any], path: str) -> None:
    """Throughput of every k against batch, the best-k schedule drawn over them."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    b = np.asarray(pol.batches)
    cmap = plt.get_cmap("viridis")
    for i, k in enumerate(pol.ks):
        ax.plot(b, pol.tput[i], color="black" if k == 0 else cmap(i / max(len(pol.ks) - 1, 1)),
                lw=1.0, ls="--" if k == 0 else "-", label="off" if k == 0 else f"k = {k}")
    ax.plot(b, pol.best_tput, color="red", lw=2.5, alpha=0.5, label="best-k schedule")
    for r in pol.schedule[1:]:
        ax.axvline(r["batch_min"], color="grey", lw=0.6, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch")
    ax.set_ylabel("output tokens/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(_title(inputs) + "\nthroughput of each k; the schedule follows the best", fontsize=10)
    _save(fig, path)
    plt.close(fig)
