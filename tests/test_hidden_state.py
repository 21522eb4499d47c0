"""No hidden state between calls: what one run sets does not leak into the next, and the inputs a
result rests on are the ones its call names (invariant 7, docs/architecture.md)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import crossover
from crossover import files
from crossover.cli import main
from crossover.specs import Deployment, load_hardware, load_model
from crossover.specs import deployment as deployment_mod


def test_a_cli_runs_input_limit_does_not_outlive_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(files.MAX_INPUT_ENV, raising=False)
    default = files.max_input_bytes()
    csv = tmp_path / "s.csv"
    csv.write_text("arm,concurrency,output_throughput\noff,1,100\non,1,150\noff,8,600\non,8,700\n")
    assert main(["measured", "--files", str(csv), "--max-input-mb", "0.5", "--json"]) == 0
    capsys.readouterr()
    assert files.max_input_bytes() == default  # an in-process caller after the run has the default again
    assert main(["measured", "--files", str(csv), "--max-input-mb", "0.00001"]) == 2  # the limit held inside
    assert "limit" in capsys.readouterr().err
    assert files.max_input_bytes() == default


def test_set_max_input_mb_is_per_thread(monkeypatch):
    monkeypatch.delenv(files.MAX_INPUT_ENV, raising=False)
    default = files.max_input_bytes()
    seen = []
    try:
        files.set_max_input_mb(1)
        t = threading.Thread(target=lambda: seen.append(files.max_input_bytes()))
        t.start()
        t.join()
        assert files.max_input_bytes() == 1_000_000 and seen == [default]
    finally:
        files.set_max_input_mb(None)
    assert files.max_input_bytes() == default


def test_building_a_deployment_reads_the_default_engine_once(monkeypatch):
    calls = []
    real = deployment_mod.load_engine
    deployment_mod.default_engine.cache_clear()
    monkeypatch.setattr(deployment_mod, "load_engine", lambda ref: calls.append(ref) or real(ref))
    hw, m = load_hardware("h100-sxm"), load_model("llama-3.1-8b")
    a, b = Deployment(model=m, hardware=hw, tp=1), Deployment(model=m, hardware=hw, tp=2)
    assert calls == ["vllm"] and a.engine is b.engine and a.engine.name == "vllm"
    deployment_mod.default_engine.cache_clear()


def test_simulate_policy_draws_its_schedule_with_the_runs_seed(monkeypatch):
    """`simulate --policy --seed N` builds its best-k schedule from lengths drawn with seed N (it
    used a fixed seed 0 whatever --seed said)."""
    from crossover.analysis import policy as policy_module
    from crossover.specs.workload import load_workload

    got = []

    class Stop(Exception):
        pass

    def spy(sc, prompts, outputs, seats):
        got.append((prompts, outputs))
        raise Stop

    monkeypatch.setattr(policy_module, "routing_policy", spy)  # simulate imports it when it runs
    for seed in (0, 7):
        with pytest.raises(Stop):
            crossover.simulate("sharegpt", [1], run={"num_prompts": 50, "seed": seed}, routing="policy",
                               model="llama-3.1-8b", hardware="h100-sxm", tp=1)
    wl, base = load_workload("sharegpt")
    for (prompts, outputs), seed in zip(got, (0, 7)):
        want = wl.sample(np.random.default_rng(seed), 20_000, base)
        assert np.array_equal(prompts, want[0]) and np.array_equal(outputs, want[1])
    assert not np.array_equal(got[0][0], got[1][0])


def test_a_numpy_warning_inside_a_command_is_shown_once_and_does_not_loop(capsys):
    """warnings_as_lines re-showed each non-UserWarning inside its recording context, which recorded
    it again into the list it walked: any numpy RuntimeWarning grew memory without end."""
    import signal
    import warnings

    from crossover.cli.common import warnings_as_lines

    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("warnings_as_lines loops")))
    signal.alarm(10)
    try:
        with warnings.catch_warnings(record=True) as shown:  # what warnings_as_lines passes on
            warnings.simplefilter("always")
            with warnings_as_lines():
                warnings.warn("overflow in exp", RuntimeWarning)
                warnings.warn("a draft larger than its target", UserWarning)
    finally:
        signal.alarm(0)
    assert [str(w.message) for w in shown] == ["overflow in exp"]
    assert capsys.readouterr().err == "crossover: warning: a draft larger than its target\n"
