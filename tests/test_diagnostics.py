"""Diagnostics are records (kind, level, message, evidence), not note strings matched by prefix; the
CLI prints their lines where it always did."""

from __future__ import annotations

import crossover
from crossover.api.diagnostics import Diagnostic
from crossover.api.sweeps import SKIPPED
from crossover.cli import main


def test_a_skipped_physics_check_is_a_diagnostic_with_its_evidence(fixtures):
    res = crossover.measured(files=[str(fixtures / "measured" / "sweep.csv")])
    kinds = [d.kind for d in res.diagnostics]
    assert SKIPPED in kinds
    d = res.diagnostics[kinds.index(SKIPPED)]
    assert d.level == "note" and d.message.startswith("physics check skipped") and d.line == "note: " + d.message
    assert res.notes == [x.line for x in res.diagnostics]
    assert d.to_dict()["kind"] == SKIPPED


def test_the_cli_says_a_skipped_check_after_the_output(fixtures, capsys):
    assert main(["measured", "--files", str(fixtures / "measured" / "sweep.csv")]) == 0
    out, err = capsys.readouterr()
    assert out.strip() and err.strip().splitlines()[-1].startswith("note: physics check skipped")


def test_sglang_files_say_their_method_and_engine_as_records(fixtures, tmp_path):
    lines = (fixtures / "measured" / "sglang_runs.jsonl").read_text().splitlines()
    f = tmp_path / "sg.jsonl"
    f.write_text("\n".join(lines[:4]) + "\n")  # EAGLE3 on and off at concurrency 32 and 128
    res = crossover.measured(files=[str(f)], model="llama-3.1-8b", hardware="h100-sxm", tp=1, k=3)
    by_kind = {d.kind: d for d in res.diagnostics}
    assert by_kind["engine_from_files"].evidence == {"engine": "sglang"}
    assert by_kind["method_from_files"].evidence["method"] == res.scenario.speculation.method


def test_a_diagnostic_line_is_its_level_and_message():
    d = Diagnostic("x", "something happened", level="warning", evidence={"n": 1})
    assert d.line == "warning: something happened" and d.to_dict() == {
        "kind": "x", "level": "warning", "message": "something happened", "evidence": {"n": 1}}
