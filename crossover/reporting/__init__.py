"""Every way a result is shown: text tables and JSON dicts (text, measured, plan), figures (plots) and
the HTML report page (html). Nothing here computes a model number."""

from __future__ import annotations

from typing import Any


def gpus_said(inputs: dict[str, Any]) -> str:
    """The GPUs a scenario runs on: '8 x h200', and with data parallelism its ranks."""
    dp = inputs.get("data_parallel") or 1
    if dp == 1:
        return f"{inputs['tp']} x {inputs['hardware']}"
    return f"{inputs['tp'] * dp} x {inputs['hardware']} ({dp} data-parallel ranks of tp {inputs['tp']})"
