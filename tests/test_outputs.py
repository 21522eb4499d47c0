"""One output policy for every verb: an output is never one of the run's inputs, never an existing
file or symlink without --force, and a failing run writes nothing."""

from __future__ import annotations

import shutil

from conftest import REPO, assert_one_line_error, run_cli


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path):
    wl = tmp_path / "w.yaml"
    shutil.copy(REPO / "workloads" / "random-1024-128.yaml", wl)
    before = wl.read_bytes()
    r = run_cli("simulate", "--model", "llama-3.1-8b", "--workload", str(wl), "--concurrency", "1",
                "--num-prompts", "10", "--csv", str(wl), "--force")
    assert_one_line_error(r, "one of this run's inputs")
    assert wl.read_bytes() == before


def test_an_existing_output_needs_force_and_is_replaced_whole(tmp_path):
    out = tmp_path / "grid.csv"
    out.write_text("keep me\n")
    args = ("whatif", "--model", "llama-3.1-8b", "--points", "3", "--csv", str(out))
    r = run_cli(*args)
    assert_one_line_error(r, "--force")
    assert out.read_text() == "keep me\n"
    r = run_cli(*args, "--force")
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("batch,k,speedup")
    assert [p.name for p in tmp_path.iterdir()] == ["grid.csv"]  # no temporary file left


def test_a_symlink_is_not_followed(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    link = tmp_path / "fit.yaml"
    link.symlink_to(target)
    r = run_cli("whatif", "--model", "llama-3.1-8b", "--points", "3", "--csv", str(link))
    assert_one_line_error(r, "symlink")
    r = run_cli("whatif", "--model", "llama-3.1-8b", "--points", "3", "--csv", str(link), "--force")
    assert r.returncode == 0 and target.read_text() == "precious\n" and not link.is_symlink()


def test_a_failing_run_writes_nothing(tmp_path):
    plot = tmp_path / "p.png"
    r = run_cli("predict", "--model", "llama-3.1-8b", "--acceptance", "2", "--plot", str(plot))
    assert_one_line_error(r)
    assert not plot.exists()
