"""benchmarks/measure_steps.py on the CPU with a tiny model (what CI can run), and its CSV reader."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, clean_env

from crossover.errors import CrossoverError
from crossover.measurements import read_step_times

torch = pytest.importorskip("torch")


def test_measure_script_writes_step_times_the_reader_takes(tmp_path):
    out = tmp_path / "steps.csv"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "measure_steps.py"), "--model", "llama-3.1-8b",
                        "--tiny", "--device", "cpu", "--batch", "1,4", "--context", "32,128", "--k", "3",
                        "--warmup", "1", "--repeats", "3", "--out", str(out)],
                       cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = read_step_times(out)
    assert {(s.batch, s.q, s.context) for s in rows} == {(b, q, c) for b in (1, 4) for q in (1, 4) for c in (32, 128)}
    assert all(s.step_ms > 0 and s.tiny and s.hardware == "cpu" and s.model == "llama-3.1-8b" for s in rows)
    assert out.read_text().startswith("# step times")


def test_measure_script_refuses_moe_and_unnamed_gpus(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "measure_steps.py"), "--model", "mixtral-8x7b",
                        "--tiny", "--device", "cpu", "--out", str(tmp_path / "x.csv")],
                       cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "dense GQA" in r.stderr


def test_step_time_reader_errors_name_file_row_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("hardware,model,batch,q,context,step_ms\nh200,llama-3.1-8b,8,1,100,abc\n")
    with pytest.raises(CrossoverError, match=r"bad.csv:2: column 'step_ms'"):
        read_step_times(bad)
    (tmp_path / "m.csv").write_text("hardware,model,batch,q,context\n")
    with pytest.raises(CrossoverError, match="missing column 'step_ms'"):
        read_step_times(tmp_path / "m.csv")
