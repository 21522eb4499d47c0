"""Spec leftovers: no silent guesses in the Hugging Face import, named fallback fractions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.errors import CrossoverError
from crossover.specs import Deployment, Efficiency, load_hardware, load_model
from crossover.specs import deployment as deployment_mod
from crossover.specs.hf_import import config_to_spec

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _config(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("fixture, drop, needle", [
    ("llama-3.1-8b.config.json", ("intermediate_size",), "'intermediate_size' or 'ffn_dim'"),
    ("mixtral-8x7b.config.json", ("num_experts_per_tok",), "'num_experts_per_tok' or 'moe_topk'"),
])
def test_import_refuses_to_guess_a_missing_shape_field(fixture, drop, needle):
    cfg = _config(fixture)
    for key in drop:
        cfg.pop(key)
    with pytest.raises(CrossoverError) as exc:
        config_to_spec(cfg, "x", "cfg.json")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("cfg.json: missing ") and needle in msg


def test_import_takes_the_alternative_field_names():
    cfg = _config("llama-3.1-8b.config.json")
    cfg["ffn_dim"] = cfg.pop("intermediate_size")
    assert config_to_spec(cfg, "x")["intermediate_size"] == 14336
    moe = _config("mixtral-8x7b.config.json")
    moe["moe_topk"] = moe.pop("num_experts_per_tok")
    assert config_to_spec(moe, "x")["moe"]["num_experts_per_tok"] == 2


def test_fallback_fractions_are_named_and_apply_only_without_a_figure():
    hw = load_hardware("h100-sxm")
    hw = hw.model_copy(update={"distilled": None})  # the generic fallbacks: no kernel-table fit either
    bare = hw.model_copy(update={"achieved_bandwidth_fraction": None, "achieved_flops_fraction": None})
    dep = Deployment(model=load_model("llama-3.1-8b"), hardware=bare)
    assert dep.bandwidth == bare.bandwidth_bytes_s * deployment_mod.DEFAULT_BANDWIDTH_FRACTION
    assert dep.flops == bare.peak_flops("bf16") * deployment_mod.DEFAULT_FLOPS_FRACTION
    assert (deployment_mod.DEFAULT_BANDWIDTH_FRACTION, deployment_mod.DEFAULT_FLOPS_FRACTION) == (0.80, 0.75)
    own = Deployment(model=load_model("llama-3.1-8b"), hardware=bare,
                     efficiency=Efficiency(bandwidth_fraction=0.5, flops_fraction=0.5))
    assert own.bandwidth == bare.bandwidth_bytes_s * 0.5 and own.flops == bare.peak_flops("bf16") * 0.5


def test_removed_unit_helpers_stay_removed():
    from crossover import units

    assert not any(hasattr(units, n) for n in ("US", "MS", "dtype_bytes"))


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, inside a function) for every import statement of a source file."""
    import ast

    tree = ast.parse(path.read_text())
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            out.append(("." * n.level + (n.module or ""), id(n) in inner))
        elif isinstance(n, ast.Import):
            out += [(a.name, id(n) in inner) for a in n.names]
    return out


PKG = Path(__file__).resolve().parent.parent / "crossover"


def test_the_spec_loader_does_not_import_workloads_and_imports_sit_at_the_top():
    assert not any("workload" in mod for mod, _ in _imports(PKG / "specs" / "loader.py"))
    for f in ("units.py", "files.py", "model/ops.py", "model/memory.py", "specs/workload.py", "specs/loader.py", "specs/hardware.py",
              "specs/deployment.py", "specs/hf_import.py", "specs/frozen.py"):
        assert not [m for m, inside in _imports(PKG / f) if inside], f
    assert not [m for m, inside in _imports(PKG / "specs" / "model.py") if inside]


def test_workloads_load_through_the_generic_loader():
    from crossover.specs.workload import Workload, load_workload

    wl, base = load_workload("sharegpt")
    assert isinstance(wl, Workload) and base is not None and (base / "sharegpt.yaml").exists()


def test_parameter_counts_and_kv_widths_come_from_the_op_list():
    from crossover.model import ops
    from crossover.model.memory import kv_bytes_per_seq_per_gpu

    for name in ("llama-3.1-8b", "deepseek-v3", "mixtral-8x7b", "qwen3-235b-a22b"):
        m = load_model(name)
        listed = ops.model_ops(m)
        streamed = sum(o.count * o.params * (o.num_experts if o.kind == "experts" else 1)
                       for o in listed if o.kind in ("gemm", "experts"))
        norms = (2 * m.num_hidden_layers + 1) * m.hidden_size
        emb = 0 if m.tie_word_embeddings else ops.embedding_params(m)
        assert ops.total_params(m) == streamed + norms + emb
        dep = Deployment(model=m, hardware=load_hardware("h200"), kv_dtype="bf16")
        if m.sliding_window is None and m.mla is None:
            assert kv_bytes_per_seq_per_gpu(dep, listed, 100) == (
                100 * m.num_hidden_layers * ops.kv_elements_per_token_layer(m) * 2)
