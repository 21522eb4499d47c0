"""One output policy for every verb: an output is never one of the run's inputs, never an existing
file or symlink without --force, and a failing run writes nothing."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, run_cli

from crossover.cli.outputs import INPUT_FLAGS, OUTPUT_FLAGS
from crossover.cli.parser import build_parser


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


# --------------------------------------------------------------------------- every input flag (issue 23, item 1)

def _write(path, text):
    path.write_text(text)
    return str(path)


def _copy(src, path):
    shutil.copy(src, path)
    return str(path)


# (case, argv builder over tmp_path: returns the argv, the output that names an input): every option that
# reads a file, with --force, whose output is that very file (valid inputs: the run would succeed and
# overwrite the input before the fix)
def _input_cases():
    sweep = str(REPO / "tests" / "fixtures" / "measured" / "sweep.csv")
    prom = (REPO / "tests" / "fixtures" / "measured" / "vllm_metrics.prom").read_text()
    plan = ["plan", "--model", "llama-3.1-8b", "--workload", "sharegpt", "--slo-tpot-ms", "50", "--hardware",
            "h100-sxm", "--tp", "1", "--verify", "0", "--jobs", "1"]
    whatif = ["whatif", "--model", "llama-3.1-8b", "--points", "3"]

    def engine(t):
        e = _copy(REPO / "engines" / "vllm.yaml", t / "engine.yaml")
        return [*whatif, "--engine", e, "--csv", e], e

    def draft(t):
        d = _copy(REPO / "models" / "llama-3.2-1b.yaml", t / "draft.yaml")
        return [*whatif, "--method", "draft", "--draft", d, "--csv", d], d

    def hardware(t):
        h = _copy(REPO / "hardware" / "h100-sxm.yaml", t / "hw.yaml")
        return [*whatif, "--hardware", h, "--csv", h], h

    def workload(t):
        w = _copy(REPO / "workloads" / "random-1024-128.yaml", t / "w.yaml")
        return ["simulate", "--model", "llama-3.2-1b", "--workload", w, "--concurrency", "1", "--num-prompts", "5",
                "--csv", w], w

    def workload_lengths(t):  # the empirical lengths file a workload YAML names
        lengths = _write(t / "lengths.csv", "100,200,300\n")
        w = _write(t / "w.yaml", "name: w\nprompt_len: {dist: empirical, file: lengths.csv}\n"
                                 "output_len: {dist: fixed, value: 16}\n")
        return ["simulate", "--model", "llama-3.2-1b", "--workload", w, "--concurrency", "1", "--num-prompts", "5",
                "--csv", lengths], lengths

    def calibration(t):
        c = _write(t / "fit.yaml", "crossover_calibration: 1\n")
        return [*whatif, "--calibration", c, "--csv", c], c

    def traffic(t):
        f = _write(t / "traffic.svg", "time,requests\n0,600\n60,1200\n")
        return [*plan, "--traffic", f, "--plot", f], f

    def price_file(t):
        f = _write(t / "prices.svg", "h100-sxm: 2.5\n")
        return [*plan, "--peak-rps", "5", "--price-file", f, "--plot", f], f

    def engine_metrics(t):
        f = _write(t / "metrics.svg", prom)
        return ["measured", "--files", sweep, "--engine-metrics", f, "--plot", f], f

    def engine_metrics_before(t):  # the second file of FILE,BEFORE
        after, before = _write(t / "after.svg", prom), _write(t / "before.svg", prom)
        return ["measured", "--files", sweep, "--engine-metrics", f"{after},{before}", "--plot", before], before

    def measured_engine(t):
        e = _copy(REPO / "engines" / "vllm.yaml", t / "engine.svg")
        return ["measured", "--files", sweep, "--engine", e, "--plot", e], e

    def measured_files(t):
        f = _copy(sweep, t / "sweep.svg")
        return ["measured", "--files", f, "--plot", f], f

    def calibrate_files(t):
        f = _copy(sweep, t / "sweep.csv")
        return ["calibrate", "--model", "llama-3.1-8b", "--files", f, "--bootstrap", "0", "--out", f], f

    def models_config(t):
        f = _copy(REPO / "tests" / "fixtures" / "llama-3.1-8b.config.json", t / "config.json")
        return ["models", "import", f, "--out", f], f

    def report_page(t):  # report --out DIR writes DIR/index.html: an input there is refused
        (t / "page").mkdir()
        c = _write(t / "page" / "index.html", "crossover_calibration: 1\n")
        return ["report", "--model", "llama-3.1-8b", "--calibration", c, "--out", str(t / "page")], c

    return {f.__name__: f for f in (engine, draft, hardware, workload, workload_lengths, calibration, traffic,
                                    price_file, engine_metrics, engine_metrics_before, measured_engine,
                                    measured_files, calibrate_files, models_config, report_page)}


INPUT_CASES = _input_cases()


@pytest.mark.parametrize("case", sorted(INPUT_CASES))
def test_force_never_overwrites_an_input_of_any_flag(case, tmp_path):
    """--force replaced an --engine YAML, a --traffic CSV, a --price-file, --engine-metrics files (and the
    lengths file a workload names) when an output named them: only the older inputs were protected."""
    argv, victim = INPUT_CASES[case](tmp_path)
    before = Path(victim).read_bytes()
    r = run_cli(*argv, "--force")
    assert_one_line_error(r, "one of this run's inputs")
    assert Path(victim).read_bytes() == before


def _parsers():
    """(command, parser) of every verb and action of the CLI, flags added."""
    todo = [("crossover", build_parser())]
    while todo:
        name, p = todo.pop()
        p.format_help()  # adds a verb's pending flags
        yield name, p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                todo += [(f"{name} {n}", sub) for n, sub in a.choices.items()]


# Options that take a value that is no file the run reads, and why (anything else is an input or an output)
NOT_FILES = {
    "tree": "node paths as JSON text, a preset or widths: no file",
    "prompt_len": "tokens ('the files' in calibrate's help are --files)",
    "output_len": "tokens ('the files' in calibrate's help are --files)",
    "name": "a spec name", "action": "list, show, import", "verb": "the verb", "draft_model_id": "a repository id",
    "host": "an address", "max_input_mb": "megabytes",
    "results_dir": "a folder sweep-plan writes into the commands it prints; it reads and writes nothing there",
}
FILE_WORDS = re.compile(r"\b(files?|paths?|yaml|csv|json|log|scrape|folders?|director(y|ies))\b", re.I)


def _value_options():
    for name, p in _parsers():
        for a in p._actions:
            if isinstance(a, (argparse._StoreTrueAction, argparse._HelpAction, argparse._SubParsersAction)):
                continue
            yield name, a


def test_every_option_that_names_a_file_is_a_protected_input():
    """An option whose help or metavar says it reads a file (a path, YAML, CSV, a log) is in
    cli.outputs.INPUT_FLAGS (or is an output), and every list entry is an option of some verb."""
    dests = set()
    for name, a in _value_options():
        dests.add(a.dest)
        what = re.sub(r"\s*\(default.*\)$", "", a.help or "")  # what it is, not what its default says
        said = " ".join(filter(None, [what, a.metavar if isinstance(a.metavar, str) else " ".join(a.metavar or ())]))
        if a.dest in OUTPUT_FLAGS or a.dest in NOT_FILES or a.choices:  # one of a few words is no file
            continue
        if FILE_WORDS.search(said) or not a.option_strings:  # a positional (models import CONFIG) is a file
            assert a.dest in INPUT_FLAGS, f"{name} {a.dest}: {said!r} reads a file; add it to cli.outputs.INPUT_FLAGS"
    assert set(INPUT_FLAGS) <= dests, set(INPUT_FLAGS) - dests


# the options that take a value and name no file, beside NOT_FILES: a new option must be sorted into
# INPUT_FLAGS, OUTPUT_FLAGS or one of these
VALUES = {
    "tp", "data_parallel", "cuda_graph_max", "context", "weight_dtype", "kv_dtype", "cost", "method", "draft_kv_budget", "draft_tp", "draft_vocab", "k",
    "acceptance", "tau", "acceptance_per_position", "match_rate", "bandwidth_fraction", "flops_fraction",
    "step_overhead_ms", "transition", "batch", "breakdown", "concurrency", "request_rate", "num_prompts", "seed",
    "burstiness", "max_num_seqs", "max_num_batched_tokens", "hysteresis", "k_max", "batch_max",
    "confidence_threshold", "confidence_concentration", "tree_nodes", "plan_peak_rps", "plan_slo_tpot_ms",
    "peak_rps", "peak_output_tokens_per_s", "price", "cost_basis", "power_cost", "pue", "years", "verify",
    "retry_replicas", "jobs", "x", "y", "points", "load_axis", "bootstrap", "port", "cuda_graphs", "chunked_prefill",
    "async_scheduling",
    "gpu_memory_utilization", "cuda_graphs_speculating", "mla_verify", "temperature", "top_p", "top_k",
    "repetition_penalty", "frequency_penalty", "presence_penalty",
    "levels", "half_width", "min_requests", "max_requests", "peak", "client",
    *(f"slo_{p}{m}_ms" for p in ("", "p99_") for m in ("tpot", "ttft", "itl", "e2e")),
}


def test_every_option_is_an_input_an_output_or_a_value():
    """The classification is whole: an option added to any verb fails here until it is sorted (an input
    file goes into cli.outputs.INPUT_FLAGS, where --force cannot overwrite it)."""
    unsorted = {(name, a.dest) for name, a in _value_options()
                if a.dest not in {*INPUT_FLAGS, *OUTPUT_FLAGS, *NOT_FILES, *VALUES}}
    assert not unsorted, unsorted


# --------------------------------------------------------------------------- every output checked first (issue 23, item 2)

SIM = ["simulate", "--model", "llama-3.2-1b", "--workload", "sharegpt", "--concurrency", "1", "--num-prompts", "5"]
WHATIF = ["whatif", "--model", "llama-3.1-8b", "--points", "3"]


@pytest.mark.parametrize("argv, needle", [
    ([*WHATIF, "--csv", "{d}/x.csv", "--plot", "{d}/x.bmp"], "use a .png, .svg or .pdf"),  # wrote x.csv, then failed
    ([*SIM, "--plot", "{d}/p.png", "--csv", "{d}/no/such/dir/x.csv"], "no folder"),  # wrote p.png after simulating
    ([*WHATIF, "--csv", "{d}/x.csv", "--plot", "{d}/no-dir/x.png"], "no folder"),
    ([*WHATIF, "--csv", "{d}/x.csv", "--plot", "{d}/x.csv"], "use a .png"),
    ([*WHATIF, "--csv", "{d}/x.png", "--plot", "{d}/x.png"], "both name"),
    ([*WHATIF, "--csv", "{d}/sub", "--plot", "{d}/x.png"], "is a directory"),
    ([*WHATIF, "--csv", "{d}/file.txt/x.csv", "--plot", "{d}/x.png"], "is no folder"),
    (["report", "--model", "llama-3.1-8b", "--out", "{d}/file.txt"], "is no folder"),
    (["report", "--model", "llama-3.1-8b", "--out", "{d}/file.txt/page"], "is no folder"),
])
def test_every_output_is_checked_before_any_work_and_none_is_written(argv, needle, tmp_path):
    """A run whose second output could not be written left its first: `whatif --csv x.csv --plot x.bmp`
    wrote x.csv, `simulate --plot p.png --csv no/such/dir/x.csv` simulated and wrote p.png."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "file.txt").write_text("keep\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    r = run_cli(*[a.format(d=tmp_path) for a in argv], "--force")
    assert_one_line_error(r, needle)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_outputs_land_together_when_the_run_succeeds_and_not_at_all_when_it_fails(tmp_path, monkeypatch):
    """Both outputs of a run are renamed into place only at its end: a figure that fails to draw
    after the CSV was written leaves neither (nor a temporary file)."""
    from crossover.errors import CrossoverError
    from crossover.reporting import plots

    csv, png = tmp_path / "x.csv", tmp_path / "x.png"
    r = run_cli(*WHATIF, "--csv", str(csv), "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert csv.read_text().startswith("batch,k,speedup") and png.stat().st_size > 1000
    csv.unlink(), png.unlink()

    def broken(*args, **kwargs):
        raise CrossoverError("the figure could not be drawn")

    monkeypatch.setattr(plots, "plot_whatif", broken)
    r = run_cli(*WHATIF, "--csv", str(csv), "--plot", str(png))
    assert_one_line_error(r, "could not be drawn")
    assert list(tmp_path.iterdir()) == []


def test_deferred_writes_hold_back_only_the_named_outputs(tmp_path):
    from crossover.files import deferred_writes, write_text

    out, scratch = tmp_path / "out.txt", tmp_path / "scratch.txt"
    with deferred_writes([out]):
        write_text(out, "result")
        write_text(scratch, "read back at once")  # e.g. a report's figure, drawn and inlined
        assert not out.exists() and scratch.read_text() == "read back at once"
    assert out.read_text() == "result"
    out.unlink()
    with pytest.raises(RuntimeError), deferred_writes([out]):
        write_text(out, "result")
        raise RuntimeError("the run failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch.txt"]


def test_an_input_folder_that_can_be_listed_but_not_entered_is_not_a_traceback(tmp_path, monkeypatch):
    """check_outputs stats the files of every input folder; one it cannot enter (read without execute
    permission) is left to its reader, which says so in one line, instead of a PermissionError."""
    import argparse
    from pathlib import Path

    from crossover.cli import outputs

    on = tmp_path / "on"
    on.mkdir()
    (on / "r.json").write_text("{}")
    real = Path.is_file

    def is_file(self):
        if self.parent == on:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", is_file)
    args = argparse.Namespace(verb="measured", on=[str(on)], off=None, files=None)
    assert outputs._inputs(args) == []
