"""benchmarks/measure_steps.py on the CPU with a tiny model (what CI can run), and its CSV reader.

The tests that run the script need torch (the `measure` extra, multi-GB): they are skipped with the
reason where it is missing; the reader, validation and shape tests need no torch and always run.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO, clean_env

from crossover.errors import CrossoverError
from crossover.measurements import read_step_times

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: running benchmarks/measure_steps.py "
                                 "needs it (pip install \".[measure]\", or the CPU build of torch)")


@pytest.mark.slow  # times a tiny model's steps with torch
@needs_torch
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


@needs_torch
def test_measure_script_refuses_moe_and_unnamed_gpus(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "measure_steps.py"), "--model", "mixtral-8x7b",
                        "--tiny", "--device", "cpu", "--out", str(tmp_path / "x.csv")],
                       cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "dense GQA" in r.stderr


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed: this checks the message without it")
def test_measure_script_without_torch_says_how_to_install_it(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "measure_steps.py"), "--model", "llama-3.1-8b",
                        "--tiny", "--device", "cpu", "--out", str(tmp_path / "x.csv")],
                       cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "needs torch" in r.stderr and ".[measure]" in r.stderr, r.stderr
    assert not (tmp_path / "x.csv").exists()


def test_step_time_reader_errors_name_file_row_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("hardware,model,batch,q,context,step_ms\nh200,llama-3.1-8b,8,1,100,abc\n")
    with pytest.raises(CrossoverError, match=r"bad.csv:2: column 'step_ms'"):
        read_step_times(bad)
    (tmp_path / "m.csv").write_text("hardware,model,batch,q,context\n")
    with pytest.raises(CrossoverError, match="missing column 'step_ms'"):
        read_step_times(tmp_path / "m.csv")


def test_step_time_validation_compares_rows_with_the_roofline_at_their_layer_count(tmp_path):
    import importlib.util

    import numpy as np

    from crossover.model.roofline import compiled_target
    from crossover.specs import Deployment, load_hardware, load_model

    spec = importlib.util.spec_from_file_location("vst", REPO / "validation" / "step_times.py")
    vst = importlib.util.module_from_spec(spec)
    sys.modules["vst"] = vst  # dataclasses look their module up
    spec.loader.exec_module(vst)
    f = tmp_path / "h200.csv"
    f.write_text("hardware,model,layers,tiny,batch,q,context,step_ms\n"
                 "h200,llama-3.1-8b,2,0,4,1,512,1.50\nh200,llama-3.1-8b,2,0,4,4,512,1.80\n"
                 "cpu,llama-3.1-8b,2,1,4,1,512,9.0\n")
    pts = vst.step_points([f])
    assert len(pts) == 2  # the CPU smoke row is not compared
    two = load_model("llama-3.1-8b").model_copy(update={"num_hidden_layers": 2})
    plan = compiled_target(Deployment(model=two, hardware=load_hardware("h200"), tp=1))
    want = [float(np.ravel(plan.cost(4, q, 512).total)[0]) * 1e3 for q in (1, 4)]
    assert [p.predicted_ms for p in pts] == pytest.approx(want)
    (_, _, err), = vst.ratio_errors(pts)
    assert err == pytest.approx(np.log((want[1] / want[0]) / (1.80 / 1.50)))
    text = "\n".join(vst.report_lines(pts))
    assert "Measured step times" in text and "verify/decode ratio" in text
    assert vst.report_lines([]) == []


@needs_torch
def test_cuda_graph_needs_a_cuda_device(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "measure_steps.py"), "--model", "llama-3.1-8b",
                        "--tiny", "--device", "cpu", "--cuda-graph", "--out", str(tmp_path / "x.csv")],
                       cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "CUDA device" in r.stderr


def test_yaml_shape_fallback_matches_the_spec_for_every_model():
    # on a GPU machine without pydantic the script reads models/NAME.yaml itself: the same shapes
    import importlib.util

    from crossover.specs import load_model
    from crossover.specs.loader import available

    spec = importlib.util.spec_from_file_location("ms", REPO / "benchmarks" / "measure_steps.py")
    ms = importlib.util.module_from_spec(spec)
    sys.modules["ms"] = ms
    spec.loader.exec_module(ms)
    for name in available("models"):
        raw, full = ms._Shape(name), load_model(name)
        assert ms.build_shape(raw, False, None) == ms.build_shape(full, False, None), name
        assert (raw.moe is None) == (full.moe is None) and (raw.mla is None) == (full.mla is None), name
