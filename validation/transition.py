"""Choose the memory/compute transition model on the MagicDec per-step tables.

Run: python validation/transition.py  (writes validation/transition.md)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eagle_tables import predict_series, series  # noqa: E402
from magicdec import predict_row, rows  # noqa: E402

from crossover.specs import Efficiency  # noqa: E402

CANDIDATES = {
    "max (hard roofline)": Efficiency(transition="max"),
    "smooth p=4": Efficiency(transition="smooth", transition_p=4.0),
    "smooth p=3": Efficiency(transition="smooth", transition_p=3.0),
    "smooth p=2": Efficiency(transition="smooth", transition_p=2.0),
    "smooth p=1.5": Efficiency(transition="smooth", transition_p=1.5),
    "sum (no overlap)": Efficiency(transition="sum"),
}


def score(eff: Efficiency) -> dict[str, float]:
    """Error statistics of one efficiency setting over the MagicDec rows."""
    e_speed, e_ar, e_sd, side = [], [], [], []
    for r in rows():
        ar, sd = predict_row(r, eff)
        sp = ar / sd
        e_speed.append(abs(np.log(sp / r.speedup)))
        e_ar.append(abs(np.log(ar / r.t_ar_ms)))
        e_sd.append(abs(np.log(sd / r.t_sd_ms)))
        side.append((sp > 1) == (r.speedup > 1) or abs(r.speedup - 1) < 0.02)
    by_hw = {}
    for r, e in zip(rows(), e_speed):
        by_hw.setdefault(r.hardware, []).append(e)
    eagle_err, eagle_side = [], []
    for sr in series():
        _, pred = predict_series(sr, eff)
        for b, pub, pr in list(zip(sr.batches, sr.speedups, pred))[1:]:
            eagle_err.append(abs(np.log(pr / pub)))
            eagle_side.append((pr > 1) == (pub > 1) or abs(pub - 1) < 0.02)
    return {
        "eagle_median": float(np.median(eagle_err)), "eagle_p90": float(np.percentile(eagle_err, 90)),
        "eagle_side": float(np.mean(eagle_side)), "eagle_n": len(eagle_err),
        "by_hw": {k: float(np.median(v)) for k, v in by_hw.items()},
        "n": len(e_speed),
        "speedup_median": float(np.median(e_speed)), "speedup_p90": float(np.percentile(e_speed, 90)),
        "t_ar_median": float(np.median(e_ar)), "t_sd_median": float(np.median(e_sd)),
        "side_right": float(np.mean(side)),
    }


def main() -> None:
    lines = ["# Transition model: MagicDec per-step tables", "",
             "Median and 90th-percentile |ln(predicted / published)| over the MagicDec rows with per-step",
             "times and a StreamingLLM draft (SnapKV rows leave their KV budget unpublished). Defaults for",
             "every other parameter; nothing fitted to these rows.", "",
             "| transition | rows | speedup median | speedup p90 | side of 1.0 | T_AR median | T_SD median "
             "| EAGLE rows | EAGLE median | EAGLE p90 | EAGLE side |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, eff in CANDIDATES.items():
        s = score(eff)
        lines.append(f"| {name} | {s['n']} | {s['speedup_median']:.3f} | {s['speedup_p90']:.3f} | "
                     f"{s['side_right']:.0%} | {s['t_ar_median']:.3f} | {s['t_sd_median']:.3f} | {s['eagle_n']} | "
                     f"{s['eagle_median']:.3f} | {s['eagle_p90']:.3f} | {s['eagle_side']:.0%} |")
    lines += ["", "Per EAGLE series (median |ln error| of speedup; tau calibrated on the lowest batch):", "",
              "| transition | " + " | ".join(sr.name for sr in series()) + " |",
              "|---|" + "---|" * len(series())]
    for name, eff in CANDIDATES.items():
        cells = []
        for sr in series():
            _, pred = predict_series(sr, eff)
            cells.append(f"{np.median([abs(np.log(p / q)) for p, q in zip(pred[1:], sr.speedups[1:])]):.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (Path(__file__).resolve().parent / "transition.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
