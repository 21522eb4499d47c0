"""`crossover sweep-plan`'s JSON dict and text: the levels with their requests and simulated ratio
intervals, the crossover interval they are dense across, the servers' launch lines, the clients'
commands and the `crossover measured` line that reads them back. Computes nothing."""

from __future__ import annotations

from typing import Any

from . import gpus_said

_WHAT = {"concurrency": "concurrency", "request_rate": "request rate"}
_CLIENT_NAMES = {"vllm-bench": "vllm bench serve", "guidellm": "GuideLLM", "aiperf": "AIPerf"}


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else float(round(float(x), digits))


def _load(x: float, axis: str) -> int | float:
    return int(x) if axis == "concurrency" else float(x)


def _level(lv: dict[str, Any], axis: str) -> dict[str, Any]:
    out = {"load": _load(lv["load"], axis), "inside_interval": bool(lv["inside_interval"]),
           "requests": int(lv["requests"]), "warmup": int(lv["warmup"]), "measured_requests": int(lv["measured_requests"]),
           "ratio": _r(lv["ratio"]), "ratio_ci": [_r(lv["ratio_low"]), _r(lv["ratio_high"])],
           "half_width": _r(lv["half_width"], 5), "target_met": bool(lv["target_met"])}
    if "off_tokens_per_s" in lv:
        out.update(off_tokens_per_s=_r(lv["off_tokens_per_s"], 1), on_tokens_per_s=_r(lv["on_tokens_per_s"], 1))
    if "saturated" in lv:
        out["saturated"] = dict(lv["saturated"])
    return out


def notes(plan: dict[str, Any]) -> list[str]:
    """What the plan rests on and how to run it."""
    short = [lv for lv in plan["levels"] if not lv["target_met"] and not any(lv.get("saturated", {}).values())]
    full = [lv for lv in plan["levels"] if any(lv.get("saturated", {}).values())]
    out = list(plan["servers"]["notes"])
    if full:
        out.append("saturated in the simulator (the offered rate exceeds an arm's capacity: its queue, and the "
                   "ratio, grow with the run's length; not sized): " + ", ".join(f"{lv['load']:g}" for lv in full))
    if short:
        out.append(f"{len(short)} level(s) did not reach +-{plan['half_width']:g} within the request cap "
                   f"(--max-requests): " + ", ".join(f"{lv['load']:g}" for lv in short))
    out += [
        "run one server at a time on the same GPUs: the off server and every off command, then the on server and every "
        "on command (same dataset, lengths and seed: the arms differ only in the speculation flags)",
        "the requests are sized on the simulator's steady state (its 95% interval by batch means); a real server adds "
        "run-to-run noise: repeat a level whose ratio lands inside 1 +- the half-width",
        "the result folders say the arm (the clients' files carry no speculation fields): keep each client's "
        "off and on results apart, and give another --results-dir for the other engine",
    ]
    return out


def sweep_plan_dict(plan: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The JSON contract of `crossover sweep-plan --json`."""
    axis = plan["load_axis"]
    levels = [_level(lv, axis) for lv in plan["levels"]]
    cr = plan["crossover"]
    inside = sum(lv["inside_interval"] for lv in levels)
    return {
        "load_axis": axis, "ratio_metric": plan["ratio_metric"], "top": _r(plan["top"], 3), "top_source": plan["top_source"],
        "prompt_len": plan["lengths"][0], "output_len": plan["lengths"][1], "workload": plan["workload"],
        "half_width": plan["half_width"], "seed": plan["seed"], "limits": dict(plan["limits"]),
        "crossover": {"interval": None if cr["interval"] is None else [_r(x, 3) for x in cr["interval"]],
                      "estimate": _r(cr["estimate"], 3), "source": cr["source"],
                      "found": None if cr["found"] is None else [_r(x, 3) for x in cr["found"]]},
        "levels": levels, "inside_interval": inside, "inside_share": _r(inside / len(levels), 4),
        "measured_levels": [_load(x, axis) for x in plan["measured_levels"]],
        "simulated_crossover": _r(plan["simulated_crossover"], 3),
        "servers": {eng: dict(plan["servers"][eng]) for eng in ("vllm", "sglang")},
        "clients": {c: [dict(row, load=_load(row["load"], axis)) for row in rows] for c, rows in plan["clients"].items()},
        "read_back": dict(plan["read_back"]), "results_dir": plan["results_dir"],
        "releases": {kind: {k: {"package": v[0], "version": v[1]} for k, v in rel.items()}
                     for kind, rel in plan["releases"].items()},
        "placeholders": list(plan["servers"]["placeholders"]), "notes": notes(plan), "inputs": inputs,
    }


def _interval_line(plan: dict[str, Any], what: str) -> str:
    cr, top = plan["crossover"], plan["top"]
    if cr["interval"] is None:
        if cr["found"] is not None:
            return (f"crossover interval: {cr['found'][0]:.4g}-{cr['found'][1]:.4g} ({cr['source']}), outside the "
                    f"plan's range: the levels spread over {what} {plan['floor']:g}-{top:g}")
        return (f"crossover: none expected in {what} {plan['floor']:g}-{top:g} at either end of the acceptance's "
                f"range; the levels spread over it to confirm the side")
    lo, hi = cr["interval"]
    est = f"{cr['estimate']:.4g}" if cr["estimate"] is not None else f"none up to {top:g}"
    return f"crossover: {est}; interval {lo:.4g}-{hi:.4g} ({cr['source']})"


def sweep_plan_text(plan: dict[str, Any], inputs: dict[str, Any]) -> str:
    """The plan for people: the scenario, the crossover interval, the levels, the servers, one client's
    commands and the read-back line."""
    axis = plan["load_axis"]
    what = _WHAT[axis]
    p, o = plan["lengths"]
    acc, kind = inputs["acceptance"], inputs["acceptance_kind"]
    said = (f"acceptance {acc:g}, " if kind == "rate" else
            "per-position acceptance " + ",".join(f"{a:g}" for a in acc) + ", " if kind == "per_position" else "")
    lines = [
        f"sweep plan: {inputs['model']} on {gpus_said(inputs)}, {inputs['method']} k={inputs['k']} "
        f"({said}tau {inputs['tau']:.3f}), "
        f"{inputs['engine_version']} profile, random {p} in / {o} out, seed {plan['seed']}",
        _interval_line(plan, what),
    ]
    inside = sum(lv["inside_interval"] for lv in plan["levels"])
    lines.append(f"{len(plan['levels'])} {what} levels up to {plan['top']:g} ({plan['top_source']}), {inside} inside the "
                 f"interval; requests sized so each level's ratio ({plan['ratio_metric']}) has a 95% interval within "
                 f"+-{plan['half_width']:g} in the simulator")
    if plan["measured_levels"]:
        lines.append("measured already (not planned again): " + ", ".join(f"{x:g}" for x in plan["measured_levels"]))
    label = "conc" if axis == "concurrency" else "req/s"
    lines += ["", f"{label:>7}  inside  requests  warm-up  sim ratio   95% interval   half-width"]
    for lv in plan["levels"]:
        mark = "yes" if lv["inside_interval"] else ""
        short = "" if lv["target_met"] else "  (saturated)" if any(lv.get("saturated", {}).values()) else "  (cap)"
        lines.append(f"{lv['load']:>7g}  {mark:^6}  {lv['requests']:>8}  {lv['warmup']:>7}  {lv['ratio']:>9.3f}"
                     f"   {lv['ratio_low']:.3f}-{lv['ratio_high']:.3f}   {lv['half_width']:>10.3f}{short}")
    sim = plan["simulated_crossover"]
    lines.append(f"simulated crossover at these levels: {what} {sim:.4g}" if sim is not None else
                 "simulated crossover at these levels: none")
    sv = plan["servers"]
    lines += ["", "servers (identical but for the speculation flags):"]
    for eng, name in (("vllm", "vLLM"), ("sglang", "SGLang")):
        for arm in ("off", "on"):
            line = sv[eng][arm]
            lines.append(f"  {name} {arm}: {line if line is not None else '(no speculation flag for this method)'}")
    client = plan["client"]
    pkg, ver = plan["releases"]["clients"][client]
    others = ", ".join(c for c in plan["clients"] if c != client)
    lines += ["", f"client commands ({_CLIENT_NAMES[client]}, {pkg} {ver}; --client {others} for the others, --json for all):"]
    for arm in ("off", "on"):
        lines.append(f"  {arm}:")
        lines += [f"    {row['command']}" for row in plan["clients"][client] if row["arm"] == arm]
    lines += ["", f"read back: {plan['read_back'][client]}",
              "refine: the same sweep-plan command with that --on/--off (its crossing bracket, its levels left out)"]
    for ph in sv["placeholders"]:
        lines.append(ph["message"])
    lines += [f"note: {n}" for n in notes(plan)]
    return "\n".join(lines)
