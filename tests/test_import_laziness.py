"""What a fresh `crossover` process loads and sets at start (issue 12 item 20): the parser and
`measured` import only what the verb needs, and the command starts one BLAS thread unless asked for
more. Each test runs a fresh interpreter: the test process has everything imported already."""

import os
import subprocess
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_measured import write_levels  # noqa: E402


def _imported(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running `code` (this checkout's crossover)."""
    code += "; import sys; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    return set(out.split())


# What a verb that reads a sweep without a model must not load: the model's specs (pydantic), the
# step model, the calibration fit (scipy), the figures, the simulator's compiled loop, the planner.
HEAVY = ("pydantic", "crossover.specs", "crossover.model", "crossover.analysis.calibration", "scipy", "matplotlib",
         "numba", "crossover.serving", "crossover.planning", "crossover.api.verbs")


def test_the_parser_loads_no_model_stack():
    """Building the parser and parsing `measured` imports none of the model: each verb's flags are
    added when that verb is parsed (--cost's choices come from the step model), and crossover.build's
    defaults come without what it builds with."""
    loaded = _imported("from crossover.cli.parser import build_parser; "
                       "build_parser().parse_args(['measured', '--files', 'x.csv'])")
    assert not {m for m in loaded if m.startswith(HEAVY)}, sorted(m for m in loaded if m.startswith(HEAVY))


def test_measured_imports_only_what_it_needs(tmp_path):
    """`crossover measured` never loads the calibration fit, the simulator, the planner, the figures
    or the web server, with or without a model; without one, not the scenario builder's workloads."""
    path = tmp_path / "s.csv"
    write_levels(path, 20)
    run = f"from crossover.cli import main; main(['measured', '--files', {str(path)!r}, '--json'%s])"
    never = ("crossover.analysis.calibration", "crossover.specs.workload", "crossover.serving", "crossover.planning",
             "crossover.api.verbs",
             "crossover.web", "scipy", "matplotlib", "numba")
    for flags in ("", ", " + ", ".join(repr(f) for f in ("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp",
                                                          "1", "--k", "3"))):
        loaded = _imported(run % flags)
        assert "crossover.measurements" in loaded
        assert not {m for m in loaded if m.startswith(never)}, (flags, sorted(m for m in loaded if m.startswith(never)))
        if not flags:  # no model: no specs, no step model, no pydantic (the crossings are pure numbers)
            model_stack = ("pydantic", "crossover.specs", "crossover.model", "crossover.analysis.curves")
            assert not {m for m in loaded if m.startswith(model_stack)}, sorted(m for m in loaded if m.startswith(model_stack))


def _set_by_the_command(name: str, verb: list[str]) -> dict[str | None, str]:
    """What environment variable `name` holds after the CLI ran `verb` in a fresh interpreter (and
    numpy loaded), with it unset (key None) and with the user's own value '3' (key '3')."""
    code = (f"import os, sys; from crossover.cli import main; main({verb!r}); import numpy; "
            f"sys.stderr.write('VALUE=' + os.environ.get({name!r}, '-'))")
    env = {k: v for k, v in os.environ.items() if k != name}
    seen = {}
    for given in (None, "3"):
        if given:
            env[name] = given
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        seen[given] = out.stderr.strip().rsplit("VALUE=", 1)[-1]
    return seen


def test_the_command_starts_one_blas_thread_unless_asked_for_more():
    """The CLI's entry sets OPENBLAS_NUM_THREADS=1 before numpy loads (its thread pool costs ~0.15 s
    of CPU per start and the command's linear algebra is a few parameters), and leaves a value the
    user set alone."""
    assert _set_by_the_command("OPENBLAS_NUM_THREADS", ["hardware", "list"]) == {None: "1", "3": "3"}


def test_the_command_turns_off_pydantics_plugin_scan_unless_asked():
    """The CLI's entry sets PYDANTIC_DISABLE_PLUGINS=__all__ before pydantic loads (its scan of every
    installed distribution's entry points costs each start ~10 ms and a command's specs have no
    observer), and leaves a value the user set alone."""
    assert _set_by_the_command("PYDANTIC_DISABLE_PLUGINS", ["models"]) == {None: "__all__", "3": "3"}
