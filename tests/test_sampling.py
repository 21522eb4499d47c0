"""The requests' sampling parameters (--temperature, --top-p, --top-k): the sampler's path they pick,
its bytes per vocabulary entry (engines/*.yaml sampling_bytes_per_vocab), priced by hand, and the
one-line errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import crossover
from crossover.api.build import ENGINES
from crossover.errors import CrossoverError
from crossover.model.step import StepModel
from crossover.specs.sampling import SAMPLING_PATHS, SamplingParams
from crossover.specs.loader import load_engine

VOCAB = 128256  # Llama-3.1's vocabulary


@pytest.mark.parametrize("params, path", [
    (dict(), "greedy"),
    (dict(temperature=0.0, top_p=0.5, top_k=20), "greedy"),  # temperature 0 ignores top-p and top-k (vLLM)
    (dict(temperature=5e-6), "greedy"),  # below vLLM's 1e-5
    (dict(temperature=0.7), "random"),
    (dict(temperature=0.7, top_p=1.0), "random"),
    (dict(temperature=0.7, top_k=50), "top_k"),
    (dict(temperature=0.7, top_p=0.9), "top_p"),
    (dict(temperature=0.7, top_p=0.9, top_k=50), "top_p"),  # one sort for both
])
def test_the_parameters_pick_vllms_path(params, path):
    assert SamplingParams(**params).path == path


def test_a_top_p_step_is_priced_by_hand():
    """vLLM V1 (0.14.1 code) at batch 8, EAGLE k = 3, temperature 0.7 and top-p 0.9: off, 8 sampled
    rows at 272 B per vocabulary entry; on, 8 bonus rows at 272 + 14 B and 24 draft rows at 272 B, over
    Llama-3.1-8B's 128256 entries at one H100's achieved bandwidth."""
    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3, temperature=0.7,
                            top_p=0.9)
    dep, m = sc.deployment, StepModel.of(sc.deployment, sc.speculation)
    assert dep.engine.sampling == "top_p"
    b = np.array([8.0])
    off = m.price(m.decode(b, 1024.0)).term("sampler")[0]
    on = m.price(m.decode(b, 1024.0, sc.speculation)).term("sampler")[0]
    assert off == pytest.approx(8 * 272 * VOCAB / dep.bandwidth, rel=1e-12)
    assert on == pytest.approx((8 * (272 + 14) + 24 * 272) * VOCAB / dep.bandwidth, rel=1e-12)
    greedy = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3)
    g = StepModel.of(greedy.deployment, greedy.speculation)
    g_on = g.price(g.decode(b, 1024.0, greedy.speculation)).term("sampler")[0]
    assert g_on == pytest.approx((8 * (10 + 10) + 24 * 30) * VOCAB / dep.bandwidth, rel=1e-12)


def test_vllm_v0_samples_the_drafts_with_the_requests_parameters():
    """vLLM V0 (0.6.3.post1): a top-k request sorts in the target's sampler and in the draft's, 640 B
    per verified draft row; the bonus row is an expanded row like the others (0 B beyond)."""
    p = load_engine("vllm-v0").configured(sampling=SamplingParams(temperature=1.0, top_k=50))
    assert (p.sampler_bytes_per_vocab, p.verify_bytes_per_vocab, p.bonus_bytes_per_vocab) == (294, 640, 0)
    assert p.settings["sampling"] == "temperature 1, top-k 50"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_profile_prices_every_path_and_none_below_greedy(engine):
    """Each shipped profile lists every path, and drawing at random never moves less memory than
    greedy's argmax, row by row."""
    table = load_engine(engine).sampling_bytes_per_vocab
    assert set(table) == set(SAMPLING_PATHS)
    for path in SAMPLING_PATHS:
        assert all(x >= g for x, g in zip(table[path], table["greedy"])), (engine, path)


def test_sampling_at_random_moves_the_crossover_down():
    """The sort on every verified row costs the speculating server more at every batch: the crossover
    with top-p comes at a smaller batch than greedy's (Llama-3.1-70B on 4 x H100, the default EAGLE at
    acceptance 0.55: batch ~161 greedy, ~135 with top-p 0.9)."""
    kw = dict(model="llama-3.1-70b", hardware="h100-sxm", tp=4, acceptance=0.55)
    greedy = crossover.predict(crossover.scenario(**kw), batches=[1, 512]).crossover_batch
    top_p = crossover.predict(crossover.scenario(**kw, temperature=0.6, top_p=0.9), batches=[1, 512]).crossover_batch
    assert greedy is not None and top_p is not None and top_p < greedy


def test_the_speed_of_light_has_no_sampler_on_any_path():
    from crossover.specs.deployment import Deployment, Efficiency

    sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", temperature=0.7, top_p=0.9)
    sol = Deployment(model=sc.deployment.model, hardware=sc.deployment.hardware, engine=sc.deployment.engine,
                     efficiency=Efficiency.speed_of_light())
    m = StepModel.of(sol, sc.speculation)
    assert float(m.price(m.decode(np.array([64.0]), 0.0, sc.speculation)).term("sampler")[0]) == 0.0


@pytest.mark.parametrize("kw, said", [
    (dict(top_p=1.5), "top-p (--top-p) is in (0, 1]"),
    (dict(temperature=-1.0), "temperature (--temperature) is >= 0"),
    (dict(top_k=-3), "top-k (--top-k) is a whole number >= -1"),
    (dict(top_k=2.5), "top-k (--top-k) is a whole number >= -1"),
    (dict(temperature=float("nan")), "temperature (--temperature) is a number"),
])
def test_bad_parameters_are_one_line(kw, said):
    with pytest.raises(CrossoverError, match=said.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", **kw)


def test_top_k_off_as_vllm_reads_it():
    """-1, 0 and the whole vocabulary are no top-k: the plain random path."""
    for k in (-1, 0, VOCAB, VOCAB + 5):
        sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", temperature=0.7, top_k=k)
        assert sc.deployment.engine.sampling == "random"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crossover", *args], capture_output=True, text=True, timeout=120)


def test_the_engine_line_names_the_sampling_and_whether_it_was_given():
    plain = _cli("predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8")
    assert plain.returncode == 0
    assert "sampling greedy (default)" in plain.stdout
    given = _cli("predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8",
                 "--temperature", "0.7", "--top-p", "0.9")
    assert given.returncode == 0
    assert "sampling temperature 0.7, top-p 0.9 (given)" in given.stdout
    bad = _cli("predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--top-p", "2")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_the_sweep_plans_clients_send_the_sampling_the_model_priced():
    """Every client command pins the requests' sampling: temperature always (0 when greedy, which
    vllm bench serve stopped sending by default after 0.14, and GuideLLM and AIPerf never send), top-p
    and top-k where set; each flag is one the client takes (tests/test_sweep_plan.py checks them all)."""
    import json
    import shlex

    from crossover.planning.sweep_commands import client_command, request_sampling

    assert request_sampling(None) == {"temperature": 0}
    assert request_sampling(SamplingParams(temperature=0.0, top_p=0.5)) == {"temperature": 0}
    sp = SamplingParams(temperature=0.6, top_p=0.9, top_k=40)
    assert request_sampling(sp) == {"temperature": 0.6, "top_p": 0.9, "top_k": 40}
    level = {"load": 8, "requests": 100, "warmup": 10}
    vllm, _ = client_command("vllm-bench", "concurrency", level, "on", "m", (1024, 128), 0, 8000, "r", sp)
    words = shlex.split(vllm)
    assert words[words.index("--temperature") + 1] == "0.6" and words[words.index("--top-p") + 1] == "0.9"
    assert words[words.index("--top-k") + 1] == "40"
    guide, _ = client_command("guidellm", "concurrency", level, "on", "m", (1024, 128), 0, 8000, "r", sp)
    words = shlex.split(guide)
    assert json.loads(words[words.index("--backend-kwargs") + 1]) == {
        "extras": {"body": {"temperature": 0.6, "top_p": 0.9, "top_k": 40}}}
    ai, _ = client_command("aiperf", "concurrency", level, "on", "m", (1024, 128), 0, 8000, "r", None)
    words = shlex.split(ai)
    i = words.index("--extra-inputs")
    assert words[i + 1:i + 3] == ["ignore_eos:true", "temperature:0"]


def test_a_profile_written_before_the_paths_reads_as_its_greedy_row(tmp_path):
    """A user's YAML profile with the older sampler_bytes_per_vocab / verify_bytes_per_vocab pair is
    the greedy row (no bonus bytes); it prices no other path (a one-line error names what it lists)."""
    import yaml

    from conftest import REPO

    data = yaml.safe_load((REPO / "engines" / "vllm.yaml").read_text())
    data.pop("sampling_bytes_per_vocab")
    data.update(sampler_bytes_per_vocab=12, verify_bytes_per_vocab=33)
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data))
    p = load_engine(str(path))
    assert p.sampling_bytes_per_vocab == {"greedy": (12.0, 33.0, 0.0)}
    with pytest.raises(CrossoverError, match="no sampler figures for the top_p path"):
        crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", engine=str(path), temperature=0.7, top_p=0.9)


def test_penalties_add_their_passes_to_every_row_by_hand():
    """A repetition penalty (any of the three: vLLM runs them together) adds 85 B per vocabulary entry to
    each sampled row and, in vLLM 0.14.1's rejection sampler, to each verified draft row; 0.10.1.1's
    rejection sampler applies none to the drafts; SGLang 0.5.5 subtracts its cumulated penalties (24 B)
    and adds one row per request to the k+1 verify rows (16 B). Greedy requests pay it too."""
    b = np.array([8.0])
    for engine, pen, draft_pen, bonus, verify in (("vllm", 85, 85, 10, 30), ("vllm-0.10", 85, 0, 10, 30),
                                                  ("sglang", 24, 16, 0, 10)):
        sc = crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle", k=3, engine=engine,
                                repetition_penalty=1.05)
        dep, m = sc.deployment, StepModel.of(sc.deployment, sc.speculation)
        assert dep.engine.sampling == "greedy" and dep.engine.sampling_params.penalized
        off = m.price(m.decode(b, 1024.0)).term("sampler")[0]
        on = m.price(m.decode(b, 1024.0, sc.speculation)).term("sampler")[0]
        assert off == pytest.approx(8 * (10 + pen) * VOCAB / dep.bandwidth, rel=1e-12)
        assert on == pytest.approx((8 * (10 + pen + bonus) + 24 * (verify + draft_pen)) * VOCAB / dep.bandwidth,
                                   rel=1e-12)
    said = SamplingParams(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05).said
    assert said == "temperature 0.7, top-p 0.8, top-k 20, repetition penalty 1.05"
    assert not SamplingParams(temperature=0.7).penalized and SamplingParams(presence_penalty=0.5).penalized


@pytest.mark.parametrize("kw, said", [
    (dict(repetition_penalty=0.0), "repetition penalty (--repetition-penalty) is a number > 0"),
    (dict(frequency_penalty=2.5), "frequency penalty (--frequency-penalty) is a number in [-2, 2]"),
    (dict(presence_penalty=float("inf")), "presence penalty (--presence-penalty) is a number in [-2, 2]"),
])
def test_bad_penalties_are_one_line(kw, said):
    import re

    with pytest.raises(CrossoverError, match=re.escape(said)):
        crossover.scenario(model="llama-3.1-8b", hardware="h100-sxm", **kw)


def test_the_sweep_plans_clients_send_the_penalties_too():
    from crossover.planning.sweep_commands import request_sampling

    assert request_sampling(SamplingParams(temperature=0.7, repetition_penalty=1.05, presence_penalty=0.0)) == {
        "temperature": 0.7, "repetition_penalty": 1.05}
