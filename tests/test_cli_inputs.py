"""Values the command line took that it should have refused (issue 23, item 3): empty values, fractional
batches where a step runs whole sequences, too few requests to verify a fleet, digits of other scripts
(Python's int() reads `８０` as 80), and --engine-metrics file names that hold a comma. Each refusal is
one line on stderr and exit status 2 (tests/conftest.py assert_one_line_error)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES, assert_one_line_error, run_cli, vllm_scrape

from crossover.cli.common import engine_metrics_files, parse_number
from crossover.errors import CrossoverError

SWEEP = str(FIXTURES / "measured" / "sweep.csv")
PLAN = ["plan", "--model", "llama-3.2-1b", "--workload", "sharegpt", "--slo-tpot-ms", "50", "--peak-rps", "5",
        "--hardware", "h100-sxm", "--tp", "1", "--jobs", "1"]


# --------------------------------------------------------------------------- empty values

def test_report_with_an_empty_out_writes_no_index_html_here(tmp_path):
    """`report --out=` wrote ./index.html (Path('') / 'index.html')."""
    r = run_cli("report", "--model", "llama-3.1-8b", "--out=", cwd=tmp_path)
    assert_one_line_error(r, "--out is empty")
    assert list(tmp_path.iterdir()) == []


def test_report_with_an_empty_concurrency_is_refused(tmp_path):
    """`report --workload sharegpt --concurrency=` simulated nothing and said nothing of it."""
    r = run_cli("report", "--model", "llama-3.1-8b", "--workload", "sharegpt", "--concurrency=",
                "--out", str(tmp_path / "page"))
    assert_one_line_error(r, "--concurrency is empty")
    assert not (tmp_path / "page").exists()


@pytest.mark.parametrize("argv, flag", [
    (["predict", "--plot="], "--plot"),
    (["whatif", "--csv="], "--csv"),
    (["calibrate", "--files", SWEEP, "--out="], "--out"),
    (["models", "import", str(FIXTURES / "llama-3.1-8b.config.json"), "--out="], "--out"),
    ([*PLAN, "--k-max="], "--k-max"),
    ([*PLAN, "--jobs="], "--jobs"),
    ([*PLAN, "--price="], "--price"),
    (["measured", "--files", SWEEP, "--engine-metrics="], "--engine-metrics"),
    (["measured", "--files", SWEEP, ""], "--files"),
    (["policy", "--draft-model-id="], "--draft-model-id"),
    (["predict", "--model="], "--model"),
    (["predict", "--batch", "  "], "--batch"),
    (["serve", "--host="], "--host"),
    (["hardware", "show", ""], "NAME"),
])
def test_an_empty_value_is_refused_naming_its_flag(argv, flag, tmp_path):
    """Before, several of these were read as 'not given' (--plot=, --csv=, --out=, --k-max=, --jobs=,
    --engine-metrics=) and `serve --host=` listened on every interface."""
    r = run_cli(*argv, cwd=tmp_path)
    assert_one_line_error(r, f"{flag} is empty")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- --breakdown: one whole batch

@pytest.mark.parametrize("value, needle", [
    ("1.5", "whole batch"), ("0.5", "whole batch"), ("64.25", "whole batch"), ("0", "must be > 0"),
    ("-8", "must be > 0"), ("nan", "finite"), ("inf", "finite"), ("1e9", "no load"), ("1,2", "one batch"),
    ("1..4", "one batch"),
])
def test_breakdown_is_one_whole_batch(value, needle):
    """--breakdown prices one engine step at a batch: whole sequences, as --batch (whose curves the CLI
    also takes whole; the API's curves are continuous). 1.5 was priced as a step of one and a half
    sequences."""
    assert_one_line_error(run_cli("predict", "--model", "llama-3.1-8b", "--breakdown", value), "--breakdown", needle)


def test_a_whole_breakdown_is_priced_as_before():
    r = run_cli("predict", "--model", "llama-3.1-8b", "--breakdown", "64", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["breakdown"]["batch"] == 64


# --------------------------------------------------------------------------- plan --num-prompts

@pytest.mark.parametrize("n", ["1", "2", "10", "49"])
def test_plan_refuses_too_few_requests_to_verify_a_fleet(n):
    """`plan --num-prompts 1` verified a fleet on one request: no warm-up (10% of 1 rounds to 0) and a
    p99 that is that request."""
    assert_one_line_error(run_cli(*PLAN, "--verify", "1", "--num-prompts", n), f"--num-prompts {n}",
                          "too few requests to verify a fleet", "at least 50", "warm up")


def test_plan_takes_the_fewest_requests_it_allows():
    r = run_cli(*PLAN, "--verify", "0", "--num-prompts", "50", "--json", "--quiet")
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- ASCII digits only

FULLWIDTH_80 = "\uff18\uff10"  # ８０
ARABIC_INDIC_3 = "\u0663"  # ٣
DEVANAGARI_4 = "\u096a"  # ४


def test_serve_refuses_a_port_in_fullwidth_digits():
    """`serve --port ８０` bound port 80: int('８０') == 80."""
    assert_one_line_error(run_cli("serve", "--port", FULLWIDTH_80), "--port", "ASCII digits")


@pytest.mark.parametrize("argv", [
    ["predict", "--batch", FULLWIDTH_80],
    ["predict", "--k", ARABIC_INDIC_3],
    ["predict", "--tp", DEVANAGARI_4],
    ["predict", "--context", "2" + FULLWIDTH_80],
    ["predict", "--acceptance", "0.\uff17"],
    ["predict", "--tree", f"{ARABIC_INDIC_3}x2"],  # parsed by the library's own int()
    ["whatif", "--x", f"batch=1..{FULLWIDTH_80}"],  # likewise
    ["simulate", "--workload", "sharegpt", "--concurrency", FULLWIDTH_80],
    [*PLAN, "--price", f"h100-sxm={ARABIC_INDIC_3}"],
    [*PLAN, "--verify", FULLWIDTH_80],
    ["measured", "--files", SWEEP, "--k", ARABIC_INDIC_3],
    ["predict", "--max-input-mb", FULLWIDTH_80],
])
def test_numbers_in_other_scripts_digits_are_refused(argv):
    assert_one_line_error(run_cli(*argv), "ASCII digits")


@pytest.mark.parametrize("text", [FULLWIDTH_80, ARABIC_INDIC_3, "1_0", "\u30003", "0x10", "", "1e", "--1", "1.2.3"])
def test_parse_number_reads_ascii_decimals_only(text):
    for integer in (False, True):
        with pytest.raises(CrossoverError):
            parse_number(text, "--n", integer=integer, positive=False)


@pytest.mark.parametrize("text, value", [("80", 80), (" 3 ", 3), ("+4", 4), ("2.5", 2.5), (".5", 0.5), ("1e3", 1000),
                                         ("-0", 0), ("9" * 40, 10.0**40)])
def test_parse_number_still_reads_what_it_did(text, value):
    assert parse_number(text, "--n", positive=False) == pytest.approx(value)


def test_a_path_may_hold_any_digits(tmp_path):
    """Paths and names are no numbers: a file named with fullwidth digits is read (here: no such file)."""
    r = run_cli("measured", "--files", str(tmp_path / f"run{FULLWIDTH_80}.csv"))
    assert_one_line_error(r, "no such file")


# --------------------------------------------------------------------------- --engine-metrics FILE [BEFORE]



@pytest.fixture
def scrapes(tmp_path):
    """A scrape before the run and one after it, both named with a comma."""
    before, after = tmp_path / "before,1.prom", tmp_path / "after,1.prom"
    before.write_text(vllm_scrape(1000, 4000, 2000, 10000, 100, 50))
    after.write_text(vllm_scrape(23000, 92000, 62000, 111000, 700, 450))
    return after, before


def _measured(*metrics):
    return run_cli("measured", "--files", SWEEP, "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method",
                   "ngram", "--json", "--engine-metrics", *map(str, metrics))


def test_a_metrics_file_whose_name_holds_a_comma_is_read(scrapes):
    """The value was split at every comma: `after,1.prom` was read as the files `after` and `1.prom`."""
    r = _measured(scrapes[0])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["engine_metrics"]["source"] == str(scrapes[0])


def test_the_two_scrapes_can_be_two_values(scrapes):
    after, before = scrapes
    r = _measured(after, before)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["engine_metrics"]
    assert d["source"] == f"{after},{before}" and d["num_drafts"] == 22000


def test_after_comma_before_still_works(tmp_path):
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text(vllm_scrape(1000, 4000, 2000, 10000, 100, 50))
    after.write_text(vllm_scrape(23000, 92000, 62000, 111000, 700, 450))
    r = _measured(f"{after},{before}")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["engine_metrics"]["num_drafts"] == 22000
    # and with commas inside the names: the one cut that leaves two existing files
    a, b = tmp_path / "a,x.prom", tmp_path / "b,y.prom"
    shutil.copy(after, a), shutil.copy(before, b)
    r = _measured(f"{a},{b}")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["engine_metrics"]["source"] == f"{a},{b}"


def test_more_than_two_metrics_files_are_one_line(scrapes):
    assert_one_line_error(_measured(*scrapes, scrapes[0]), "one file, or a scrape after the run and one before it")


def test_engine_metrics_files_reads_one_value_as_before(tmp_path):
    (tmp_path / "a,b").write_text("x")
    (tmp_path / "c").write_text("x")
    assert engine_metrics_files(None) is None
    assert engine_metrics_files([str(tmp_path / "a,b")]) == [str(tmp_path / "a,b")]
    assert engine_metrics_files([f"{tmp_path}/a,b,{tmp_path}/c"]) == [f"{tmp_path}/a,b", f"{tmp_path}/c"]
    assert engine_metrics_files(["x.prom,y.prom"]) == ["x.prom", "y.prom"]  # neither exists: the reader says so
    assert engine_metrics_files(["x,y", "z"]) == ["x,y", "z"]


def test_the_usage_line_shows_the_two_files():
    r = run_cli("measured", "--help")
    assert "--engine-metrics FILE [BEFORE ...]" in " ".join(r.stdout.split())


# --------------------------------------------------------------------------- report --tree (issue 23, item 4)

@pytest.mark.parametrize("tree", ["3x2", "[[0],[1],[0,0]]", "eagle1", "4,2"])
def test_report_refuses_a_tree_with_the_reason(tree, tmp_path):
    """`report --tree ...` always failed, after the curves were computed, with "a best-k schedule applies to
    chains; give --k-max without --tree" (report takes no --k-max): the page's k-and-acceptance figure
    (reporting/plots.plot_speedup_family) re-prices the scenario at k = 1..N, which a tree cannot do."""
    r = run_cli("report", "--model", "llama-3.1-8b", "--tree", tree, "--out", str(tmp_path / "page"))
    assert_one_line_error(r, "report does not take --tree", "its depth", "crossover predict --tree")
    assert not (tmp_path / "page").exists()


def test_the_tree_report_refuses_is_one_predict_prices():
    r = run_cli("predict", "--model", "llama-3.1-8b", "--tree", "3x2", "--json")
    assert r.returncode == 0, r.stderr
