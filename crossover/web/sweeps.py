"""The measured panel's endpoints, as calls of the library API: what each upload says of itself
(its arm, format and levels, so the page can ask for the arm a file does not name), the uploads read
as one sweep (crossover.measured: the diagnosis, the physics check with both bounds), and the
calibration fitted to it (crossover.calibrate) with the default and the calibrated curves
(crossover.predict on the scenario before and after the fit). Errors and notes come in the page's
words (words.py). Nothing here models anything."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import crossover

from ..defaults import DEFAULT_BOOTSTRAP
from ..errors import CrossoverError
from . import params
from .params import Query
from .words import first_line, in_page_words, page_words, reword

ARMS = ("auto", "on", "off")
MAX_FIT_BOOTSTRAP = 200  # the page's fit runs while the user waits (~1 s for the default 60 on two cores)
CURVE_POINTS = 48
MAX_LOADS_SHOWN = 8  # of a file's load levels, listed beside its name
Files = Sequence[tuple[Path, str]]


def upload_info(path: Path) -> dict[str, Any]:
    """What a file says of itself: its arm ("on", "off", "both"; None where the page must ask for it),
    what wrote it, its runs and load axis, and `problem`, the page's line when it cannot be read."""
    from pydantic import ValidationError

    from ..measurements import read_columns
    from ..measurements.point import LOAD_AXES

    out: dict[str, Any] = {"arm": None, "formats": [], "runs": 0, "levels": 0, "loads": [], "load_axis": None,
                           "problem": None}
    first: BaseException | None = None
    for arm in (None, "on", "off"):  # the file's own arm, else whether it reads once an arm is given
        try:
            cols = read_columns([path], arm=arm)
        except (CrossoverError, ValidationError) as exc:
            first = first or exc
            continue
        if arm is None:
            arms = sorted({"on" if x else "off" for x in cols.on.tolist()})
            out["arm"] = arms[0] if len(arms) == 1 else "both" if arms else None
        axes = sorted({LOAD_AXES[int(a)] for a in cols.axis.tolist()})
        loads = sorted(set(cols.load.tolist()))
        out.update(formats=sorted(cols.formats), runs=len(cols), levels=len(loads), loads=loads[:MAX_LOADS_SHOWN],
                   load_axis=axes[0] if len(axes) == 1 else ", ".join(axes) or None)
        if arm is not None:
            out["needs_arm"] = page_words(first_line(first)) if first else "set its arm"
        return out
    out["problem"] = page_words(first_line(first)) if first else "cannot read this file"
    return out


def uploads(q: Query, store) -> dict[str, Any]:
    """/api/uploads?ids=ID,...: each upload's name, size and what it says of itself; ids the server no
    longer holds (it restarted, or dropped the oldest) under `missing`, so a link can say so."""
    from .store import MAX_UPLOADS

    ids = list(dict.fromkeys(filter(None, (q.get("ids") or "").split(","))))
    if len(ids) > MAX_UPLOADS:
        raise CrossoverError(f"ids: at most {MAX_UPLOADS} uploads at once (got {len(ids)})")
    found, missing = [], []
    for uid in ids:
        try:
            path = store.path(uid)
        except CrossoverError:
            missing.append(params.shown(uid, 20).strip("'"))
            continue
        found.append({"id": uid, "name": path.name, "bytes": path.stat().st_size, **upload_info(path)})
    return {"uploads": found, "missing": missing}


def arms_of(files: Files) -> dict[str, Any]:
    """crossover.measured's on=, off=, files= from the page's (path, arm) pairs."""
    if not files:
        raise CrossoverError("upload at least one measured result file")
    groups: dict[str, list[Path]] = {"on": [], "off": [], "auto": []}
    for path, arm in files:
        if arm not in groups:
            raise CrossoverError(f"arm must be on, off or auto (got {params.shown(arm)})")
        groups[arm].append(path)
    if not groups["auto"] and not (groups["on"] and groups["off"]):
        raise CrossoverError("mark the uploads as speculation on and off (or auto, where the files say it themselves)")
    return {"on": groups["on"] or None, "off": groups["off"] or None, "files": groups["auto"] or None}


def load_axis(q: Query) -> str | None:
    """The page's Load axis: as the files say (empty), or one the files are read against."""
    from ..measurements.point import LOAD_AXES

    value = q.get("axis") or None
    if value is not None and value not in LOAD_AXES:
        raise CrossoverError(f"axis must be one of {', '.join(LOAD_AXES)} (or empty: as the files say), got {params.shown(value)}")
    return value


def deployment(q: Query) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the page's deployment as measured's keywords, the page's lengths: prompt_len and output_len
    where the prefill share is ticked, the lengths the sweep ran; else none: the files' token counts)."""
    sk = params.scenario_kwargs(q, lengths=False)
    kw = {"hardware": sk["hardware"], "tp": sk["tp"], "method": sk["method"], "k": sk["k"], "draft": sk.get("draft")}
    lengths = {}
    if params.flag(q, "mix"):
        lengths = {"prompt_len": params.number(q, "prompt", 1024, lo=1), "output_len": params.number(q, "output", 256, lo=1)}
    return {**kw, "model": sk["model"]}, lengths


def measured(q: Query, files: Files) -> dict[str, Any]:
    """The uploads as one sweep checked against the speed of light on the page's hardware (and TP,
    method, k), with its diagnosis; the model is the one the files name, else the page's."""
    with in_page_words():
        kw = {**arms_of(files), "load_axis": load_axis(q)}
        dep, lengths = deployment(q)
        page_model = dep.pop("model")
        res = crossover.measured(**kw, **dep, **lengths)
        if res.scenario is None:  # the files name no library model: check them with the page's
            res = crossover.measured(**kw, **dep, **lengths, model=page_model)
    out = reword(res.to_dict())
    out["notes"] = [page_words(n) for n in res.notes]
    out["model"] = res.scenario.deployment.model.name if res.scenario is not None else None
    bounds = out.get("physics_bounds") or {}
    out["lengths_from"] = ("page" if lengths else "files") if bounds.get("with_prefill") else None
    return out


def calibrate(q: Query, files: Files) -> dict[str, Any]:
    """crossover.calibrate on the uploads (the files' model, else the page's; the page's hardware, TP,
    method, k and, with the prefill share ticked, lengths), and the curves it implies on a grid over
    the measured levels: the model's defaults and the calibrated model, speculation off and on."""
    from ..analysis.bounds import files_model
    from ..api.sweeps import files_tau, read_arms
    from ..model.memory import batch_ceiling

    t0 = time.perf_counter()
    bootstrap = int(params.number(q, "bootstrap", DEFAULT_BOOTSTRAP, lo=0, hi=MAX_FIT_BOOTSTRAP, integer=True))  # type: ignore[arg-type]
    with in_page_words():
        kw = {**arms_of(files), "load_axis": load_axis(q)}
        dep, lengths = deployment(q)
        table = read_arms(kw["on"], kw["off"], kw["files"], kw["load_axis"])
        dep["model"] = files_model(table.model_ids()) or dep["model"]
        if not lengths:
            p_len, o_len = table.mean_lengths()
            if p_len is not None and o_len is not None:
                lengths = {"prompt_len": p_len, "output_len": o_len}
        if table.columns.formats == {"sglang"}:  # as measured: the files name their engine
            dep["engine"] = "sglang"
        res = crossover.calibrate(**kw, **dep, **lengths, bootstrap=bootstrap)
        fit = res.fit
        tau = files_tau(table)  # the files' tau is used, not fitted: the defaults take it too
        default = crossover.scenario(**dep, **lengths, **({"tau": tau} if tau is not None else {}))
        loads = [float(r[fit.load_axis]) for r in fit.residuals]
        top = min(max(fit.searched, 2.0 * max(loads)), float(batch_ceiling(fit.scenario.deployment)))
        lo = max(1.0, min(loads) / 2.0)
        grid = [float(x) for x in np.geomspace(lo, max(top, lo * 2.0), CURVE_POINTS)]
        taus = level_taus(table, fit) if tau is not None else []
        before, after = curves(default, taus, grid), curves(fit.scenario, taus, grid)
    points = [{"batch": x, "default_off": a, "default_on": b, "default_speedup": b / a if a else None,
               "calibrated_off": c, "calibrated_on": d, "calibrated_speedup": d / c if c else None}
              for x, a, b, c, d in zip(grid, before["off"], before["on"], after["off"], after["on"])]
    out = reword(res.to_dict())
    from ..analysis.sweep_fit import RESIDUAL_LIMIT

    return {"fit": out, "model": dep["model"], "lengths": lengths or None, "yaml": _yaml(res) if res.reproduces else None,
            "residual_limit": RESIDUAL_LIMIT,
            "curves": {"axis": fit.load_axis, "points": points, "per_level_tau": len({t for _, t in taus}) > 1,
                       "default_crossover": crossing(grid, [p["default_speedup"] for p in points]),
                       "calibrated_crossover": crossing(grid, [p["calibrated_speedup"] for p in points]),
                       "max_batch_on": after["max_batch_on"]},
            "server_ms": round((time.perf_counter() - t0) * 1e3, 2)}


def level_taus(table, fit) -> list[tuple[float, float]]:
    """(load on the fit's axis, the on arm's tau) of every level whose file reports a tau."""
    return sorted({(float(r[fit.load_axis]), float(on.acceptance_length))
                   for r, (_, _, on) in zip(fit.residuals, table.pairs()) if on.acceptance_length})


def curves(sc, taus: list[tuple[float, float]], grid: list[float]) -> dict[str, Any]:
    """crossover.predict's off and on tokens/s over `grid`, the on arm at each load's tau as the fit
    prices it (analysis.sweep_fit.speedup_between_levels): the curves at each level's tau, mixed with
    weights linear in log load between the levels (held at the end levels' outside them)."""
    from ..analysis.sweep_fit import with_tau

    distinct = sorted({t for _, t in taus})
    if len(distinct) <= 1:
        p = crossover.predict(with_tau(sc, distinct[0]) if distinct else sc, batches=grid).to_dict()
        return {"off": [q["tokens_per_s_off"] for q in p["points"]], "on": [q["tokens_per_s_on"] for q in p["points"]],
                "max_batch_on": p["max_batch_on"]}
    preds = [crossover.predict(with_tau(sc, t), batches=grid).to_dict() for _, t in taus]
    on = np.array([[q["tokens_per_s_on"] for q in p["points"]] for p in preds])
    x = np.log([load for load, _ in taus])
    pos = np.clip(np.interp(np.log(grid), x, np.arange(len(x), dtype=float)), 0, len(x) - 1)
    j = np.minimum(np.floor(pos).astype(int), len(x) - 2)
    w, cols = pos - j, np.arange(len(grid))
    mixed = (1 - w) * on[j, cols] + w * on[j + 1, cols]
    return {"off": [q["tokens_per_s_off"] for q in preds[0]["points"]], "on": [float(v) for v in mixed],
            "max_batch_on": preds[0]["max_batch_on"]}


def crossing(grid: list[float], speedup: list[float | None]) -> float | None:
    """Where a drawn speedup curve first passes 1 (interpolated in log load), or None."""
    for (x0, y0), (x1, y1) in zip(zip(grid, speedup), zip(grid[1:], speedup[1:])):
        if y0 is not None and y1 is not None and (y0 - 1.0) * (y1 - 1.0) <= 0 and y0 != y1:
            t = (y0 - 1.0) / (y0 - y1)
            return float(np.exp(np.log(x0) + t * (np.log(x1) - np.log(x0))))
    return None


def _yaml(res) -> str:
    """The fit as `crossover calibrate --out fit.yaml` writes it (--calibration reads it back)."""
    import yaml

    return yaml.safe_dump(res.to_yaml_dict(), sort_keys=False)
