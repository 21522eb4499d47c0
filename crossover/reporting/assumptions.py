"""The assumptions an answer rests on, as the text outputs say them (analysis/assumptions.py finds them)."""

from __future__ import annotations

from typing import Any

NAMES = {"acceptance": "acceptance", "match_rate": "n-gram match rate"}
FLAGS = {"acceptance": "--acceptance, --tau or --calibration", "match_rate": "--match-rate"}


def assumed_lines(assumed: list[dict[str, Any]]) -> list[str]:
    """One line per assumed input: its value and source, where the answer at the load in question flips,
    and how far the crossover moves over the input's plausible range."""
    lines = []
    plain = [a for a in assumed if a["input"] not in NAMES and a.get("range") is None]
    if plain:  # the other defaults, on one line
        said = ", ".join(f"{a['input'].replace('_', ' ')} {a['value']:g}" if isinstance(a["value"], float)
                         else f"{a['input'].replace('_', ' ')} {a['value']}" for a in plain)
        flags = ", ".join("--" + a["input"].replace("_", "-") for a in plain)
        lines.append(f"assumed: {said} (the defaults; give {flags} to replace them)")
    for a in assumed:
        if a in plain:
            continue
        name = NAMES.get(a["input"], a["input"].replace("_", " "))
        value = a["value"] if not isinstance(a["value"], list) else ",".join(f"{v:g}" for v in a["value"])
        head = f"assumed: {name} {value:g}" if isinstance(value, float) else f"assumed: {name} {value}"
        head += f" is {a['source']}; give {FLAGS.get(a['input'], 'it')} to replace it"
        if a.get("range") is None or "at_batch" not in a:
            lines.append(head)
            continue
        lo, hi = a["range"]
        b = a["at_batch"]
        if a["flips_at"] is None:
            side = "faster" if a.get("speedup_at_batch", 1.0) > 1.0 else "slower"
            flip = f"at batch {b:g} speculation is {side} at every {name} in [0, 1)"
        else:
            where = "inside" if a["flips_in_range"] else "outside"
            flip = (f"at batch {b:g} speculation stops paying off below {name} {a['flips_at']:g} ({where} the "
                    f"plausible {lo:g}-{hi:g})")
        lines.append(head)
        lines.append(f"         {flip}")
        if "crossover_over_range" in a:
            c_lo, c_hi = a["crossover_over_range"]
            upto = a.get("batch_max", b)
            if c_lo is None and c_hi is None:
                lines.append(f"         over {lo:g}-{hi:g} no crossover up to batch {upto:g}")
            else:
                ends = [f"batch {c:g}" if c is not None else f"none up to batch {upto:g}" for c in (c_lo, c_hi)]
                lines.append(f"         the crossover: {ends[0]} at {name} {lo:g}, {ends[1]} at {hi:g}")
    return lines
