"""`crossover.report(...)`: the HTML page as an API verb; the CLI's report command only writes it."""

from __future__ import annotations

import pytest

import crossover
from crossover.cli import main
from crossover.errors import CrossoverError, FileError


def test_the_cli_writes_the_page_the_api_builds(tmp_path, capsys):
    res = crossover.report(model="llama-3.1-8b", hardware="h100-sxm", k=4, batches=[1, 8, 64, 256])
    assert res.html.startswith("<!doctype html>")
    assert "llama-3.1-8b" in res.html and res.inputs["k"] == 4
    assert main(["report", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--k", "4", "--batch",
                 "1,8,64,256", "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "index.html").read_text() == res.html
    assert capsys.readouterr().err.strip() == f"wrote {tmp_path / 'r' / 'index.html'}"


def test_write_refuses_an_existing_page_without_force(tmp_path):
    res = crossover.report(model="llama-3.1-8b", batches=[1, 8])
    page = res.write(tmp_path)
    assert page == tmp_path / "index.html" and page.read_text() == res.html
    with pytest.raises(FileError, match="exists"):
        res.write(tmp_path)
    assert res.write(tmp_path, force=True) == page


def test_a_plan_needs_its_demand_and_slo():
    with pytest.raises(CrossoverError, match="--plan needs --workload"):
        crossover.report(model="llama-3.1-8b", with_plan=True, plan_peak_rps=5)
