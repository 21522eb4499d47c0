"""Spec libraries, the loader (names, paths, CROSSOVER_SPEC_PATH, bad files, YAML depth), the HF config
import (no silent guesses), the deployment's named fallback fractions and counts from the op list."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, REPO, assert_one_line_message

from crossover.errors import CrossoverError
from crossover.model.ops import active_params, kv_elements_per_token_layer, total_params
from crossover.specs import Deployment, Efficiency, Hardware, Model, load_hardware, load_model, loader
from crossover.specs import deployment as deployment_mod
from crossover.specs.hf_import import config_to_spec, import_config
from crossover.specs.loader import available, parse_spec, resolve

HARDWARE_FILES = sorted((REPO / "hardware").glob("*.yaml"))
MODEL_FILES = sorted((REPO / "models").glob("*.yaml"))

pytestmark = pytest.mark.usefixtures("no_user_specs")


def _one_line_naming(exc: pytest.ExceptionInfo, path: Path | str) -> str:
    msg = assert_one_line_message(exc)
    assert Path(path).name in msg, f"message does not name {Path(path).name}: {msg!r}"
    return msg


def _numeric_fields(spec) -> list[str]:
    out = []
    for key, value in spec.model_dump().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(key)
    return out


# --------------------------------------------------------------------------- shipped libraries

def test_shipped_libraries_are_not_empty_and_all_found():
    assert len(HARDWARE_FILES) >= 10 and len(MODEL_FILES) >= 10
    assert set(available("hardware")) == {p.stem for p in HARDWARE_FILES}
    assert set(available("models")) == {p.stem for p in MODEL_FILES}


@pytest.mark.parametrize("path", HARDWARE_FILES, ids=lambda p: p.stem)
def test_every_hardware_spec_loads_by_name_with_sources(path):
    hw = resolve(path.stem, "hardware")
    assert isinstance(hw, Hardware)
    assert hw == load_hardware(path.stem)
    assert hw.name == path.stem
    assert hw.display_name and hw.vendor
    assert hw.bandwidth_bytes_s == pytest.approx(hw.memory_bandwidth_gb_s * 1e9)
    assert hw.peak_flops("bf16") > 0
    numeric = _numeric_fields(hw)
    assert "memory_bandwidth_gb_s" in numeric and "memory_gb" in numeric
    missing = [f for f in numeric if not hw.sources.get(f, "").strip()]
    assert not missing, f"{path.name}: numeric fields without a source: {missing}"
    stray = [k for k in hw.sources if k not in Hardware.model_fields]
    assert not stray, f"{path.name}: sources for unknown fields {stray}"
    assert set(hw.unverified) <= set(Hardware.model_fields), f"{path.name}: unverified names unknown fields"


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_every_model_spec_loads_by_name_with_sources(path):
    m = resolve(path.stem, "models")
    assert isinstance(m, Model)
    assert m == load_model(path.stem)
    assert m.name == path.stem
    assert m.sources, f"{path.name}: empty sources"
    assert m.sources.get("shape", "").strip(), f"{path.name}: no 'shape' source"
    stray = [k for k in m.sources if k not in Model.model_fields and k not in ("shape", "params")]
    assert not stray, f"{path.name}: sources for unknown keys {stray}"
    assert set(m.unverified) <= set(Model.model_fields)
    assert 0 < active_params(m) <= total_params(m)
    if m.computed_params_b is not None:
        assert total_params(m) / 1e9 == pytest.approx(m.computed_params_b, rel=5e-3), (
            f"{path.name}: computed_params_b {m.computed_params_b} disagrees with ops.total_params")


@pytest.mark.parametrize("name, expected", [
    ("llama-3.1-8b", 8.03e9),
    ("llama-3.1-70b", 70.55e9),
    ("deepseek-v3", 671.0e9),
    ("mixtral-8x7b", 46.70e9),
    ("gpt-oss-120b", 116.8e9),
])
def test_hand_checked_parameter_counts(name, expected):
    assert total_params(load_model(name)) == pytest.approx(expected, rel=5e-3)


@pytest.mark.parametrize("name, expected", [
    ("llama-3.1-70b", 2 * 8 * 128),
    ("llama-3.1-8b", 2 * 8 * 128),
    ("deepseek-v3", 512 + 64),
    ("gpt-oss-120b", 2 * 8 * 64),
])
def test_kv_elements_per_token_layer(name, expected):
    assert kv_elements_per_token_layer(load_model(name)) == expected


def test_moe_and_mla_structure_of_deepseek_v3():
    m = load_model("deepseek-v3")
    assert m.moe is not None and m.mla is not None
    assert m.num_moe_layers == 58 and m.num_dense_layers == 3
    assert m.mtp_layers == 1 and m.weight_dtype == "fp8"
    # ~37 B activated per token (README), embedding excluded
    assert active_params(m) == pytest.approx(37e9, rel=0.03)


# --------------------------------------------------------------------------- names

@pytest.mark.parametrize("ref, kind, any_of", [
    ("h100", "hardware", ["h100-sxm", "h100-pcie"]),
    ("llama-3.1-7b", "models", ["llama-3.1-8b", "llama-3.1-70b"]),
    ("mi300", "hardware", ["mi300x"]),
])
def test_unknown_name_suggests_nearest(ref, kind, any_of):
    with pytest.raises(CrossoverError) as exc:
        resolve(ref, kind)
    msg = str(exc.value)
    assert "\n" not in msg
    assert repr(ref) in msg
    assert "did you mean" in msg
    assert any(repr(n) in msg for n in any_of), msg


@pytest.mark.parametrize("ref, kind", [
    ("llama", "models"),
    ("llama-3.1", "models"),
    ("deepseek", "models"),
    ("h100-sx", "hardware"),
    ("sxm", "hardware"),
])
def test_no_substring_or_prefix_matching(ref, kind):
    with pytest.raises(CrossoverError, match="unknown"):
        resolve(ref, kind)


@pytest.mark.parametrize("ref, name", [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("meta-llama/llama-3.1-8b-instruct", "llama-3.1-8b"),  # Hugging Face ids are case-insensitive
    ("Llama-3.1-8B-Instruct", "llama-3.1-8b"),  # the organisation may be left out
    ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),  # the spec's own hf_repo
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
])
def test_hugging_face_ids_of_the_same_architecture_resolve(ref, name):
    assert load_model(ref).name == name


def test_declared_aliases_are_unique_across_the_library():
    seen: dict[str, str] = {}
    for name in available("models"):
        m = load_model(name)
        for hf in (m.hf_repo, *m.aliases):
            for key in (hf.lower(), hf.lower().split("/")[-1]):
                assert seen.setdefault(key, name) == name, f"{hf} declared by {seen[key]} and {name}"


@pytest.mark.parametrize("ref", ["meta-llama/Llama-3.1-8B-Instruct-extra", "Llama-3.1-8B-Instr", "llama-3.1-8b-instruct-awq"])
def test_hugging_face_ids_match_exactly(ref):
    with pytest.raises(CrossoverError, match="unknown model"):
        load_model(ref)


def test_unknown_hugging_face_id_points_to_the_importer():
    with pytest.raises(CrossoverError) as exc:
        load_model("some-org/some-model")
    msg = str(exc.value)
    assert "\n" not in msg and "'some-org/some-model'" in msg and "models import" in msg


def test_hardware_hint_lists_every_variant_the_name_starts():
    with pytest.raises(CrossoverError) as exc:
        load_hardware("H100")
    msg = str(exc.value)
    for variant in ("h100-sxm", "h100-pcie", "h100-nvl"):
        assert repr(variant) in msg


@pytest.mark.parametrize("ref", ["", "   "])
def test_empty_name_is_an_error(ref):
    with pytest.raises(CrossoverError, match="empty"):
        load_model(ref)


def test_instances_pass_through():
    m = load_model("llama-3.1-8b")
    hw = load_hardware("h100-sxm")
    assert load_model(m) is m and load_hardware(hw) is hw


# --------------------------------------------------------------------------- paths

def test_load_by_absolute_and_relative_path(monkeypatch):
    by_name = load_hardware("h100-sxm")
    assert load_hardware(str(REPO / "hardware" / "h100-sxm.yaml")) == by_name
    monkeypatch.chdir(REPO)
    assert load_model("models/llama-3.1-8b.yaml") == load_model("llama-3.1-8b")
    assert load_hardware("./hardware/h200.yaml").name == "h200"


def test_load_by_path_outside_the_library(tmp_path):
    data = yaml.safe_load((REPO / "hardware" / "h100-sxm.yaml").read_text())
    data.pop("name")
    data["memory_gb"] = 96
    p = tmp_path / "my-chip.yaml"
    p.write_text(yaml.safe_dump(data))
    hw = load_hardware(str(p))
    assert hw.name == "my-chip"  # the file stem when the file has no name
    assert hw.memory_gb == 96


def test_missing_path_is_a_one_line_error(tmp_path):
    p = tmp_path / "nope.yaml"
    with pytest.raises(CrossoverError, match="no such file") as exc:
        load_model(str(p))
    _one_line_naming(exc, p)


def test_model_file_loaded_as_hardware_is_rejected():
    p = REPO / "models" / "llama-3.1-8b.yaml"
    with pytest.raises(CrossoverError) as exc:
        load_hardware(str(p))
    _one_line_naming(exc, p)


# --------------------------------------------------------------------------- CROSSOVER_SPEC_PATH

def _model_yaml(name: str, **changes) -> str:
    data = yaml.safe_load((REPO / "models" / "llama-3.1-8b.yaml").read_text())
    data.update(name=name, **changes)
    return yaml.safe_dump(data)


def _hardware_yaml(name: str, **changes) -> str:
    data = yaml.safe_load((REPO / "hardware" / "h100-sxm.yaml").read_text())
    data.update(name=name, **changes)
    return yaml.safe_dump(data)


def test_spec_path_user_dir_with_models_subdir(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "my-llama.yaml").write_text(_model_yaml("my-llama", num_hidden_layers=4))
    assert "my-llama" not in available("models")
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", str(tmp_path))
    names = available("models")
    assert "my-llama" in names and "llama-3.1-70b" in names  # added, shipped still there
    assert "my-llama" not in available("hardware")
    m = load_model("my-llama")
    assert m.num_hidden_layers == 4
    monkeypatch.delenv("CROSSOVER_SPEC_PATH")
    with pytest.raises(CrossoverError):
        load_model("my-llama")


def test_spec_path_flat_dir_with_hardware_file(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "hw-valid.yaml", tmp_path / "hw-valid.yaml")
    (tmp_path / "flat-model.yaml").write_text(_model_yaml("flat-model"))
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", str(tmp_path))
    hw_names, model_names = available("hardware"), available("models")
    assert "hw-valid" in hw_names and "hw-valid" not in model_names
    assert "flat-model" in model_names and "flat-model" not in hw_names
    assert "h100-sxm" in hw_names
    hw = load_hardware("hw-valid")
    assert hw.memory_gb == 96 and hw.memory_bandwidth_gb_s == 4000
    assert load_model("flat-model").name == "flat-model"


def test_user_spec_wins_over_shipped(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "llama-3.1-8b.yaml").write_text(
        _model_yaml("llama-3.1-8b", display_name="user override"))
    (tmp_path / "h100-sxm.yaml").write_text(_hardware_yaml("h100-sxm", memory_gb=81))
    assert load_model("llama-3.1-8b").display_name != "user override"
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", str(tmp_path))
    assert available("models")["llama-3.1-8b"] == tmp_path / "models" / "llama-3.1-8b.yaml"
    assert load_model("llama-3.1-8b").display_name == "user override"
    assert load_hardware("h100-sxm").memory_gb == 81
    monkeypatch.delenv("CROSSOVER_SPEC_PATH")
    assert load_hardware("h100-sxm").memory_gb == 80


def test_spec_path_earlier_entry_wins(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, gb in ((a, 70), (b, 60)):
        (d / "hardware").mkdir(parents=True)
        (d / "hardware" / "chip-x.yaml").write_text(_hardware_yaml("chip-x", memory_gb=gb))
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", os.pathsep.join([str(a), str(b)]))
    assert load_hardware("chip-x").memory_gb == 70
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", os.pathsep.join([str(b), str(a)]))
    assert load_hardware("chip-x").memory_gb == 60


def test_spec_path_to_missing_dir_is_harmless(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", str(tmp_path / "does-not-exist"))
    assert set(available("hardware")) == {p.stem for p in HARDWARE_FILES}


# --------------------------------------------------------------------------- bad files

@pytest.mark.parametrize("fixture, kind, needle", [
    ("malformed.yaml", "models", "malformed YAML"),
    ("malformed.yaml", "hardware", "malformed YAML"),
    ("not-a-mapping.yaml", "hardware", "mapping"),
    ("hw-missing-field.yaml", "hardware", "missing required field 'memory_bandwidth_gb_s'"),
    ("hw-negative-bandwidth.yaml", "hardware", "memory_bandwidth_gb_s"),
    ("hw-extra-field.yaml", "hardware", "unknown field 'memory_bandwith_gb_s'"),
])
def test_bad_spec_file_gives_one_line_error_naming_it(fixture, kind, needle):
    path = FIXTURES / fixture
    with pytest.raises(CrossoverError) as exc:
        resolve(str(path), kind)
    msg = _one_line_naming(exc, path)
    assert needle in msg


def test_malformed_yaml_message_gives_line():
    with pytest.raises(CrossoverError, match=r"line \d+"):
        load_model(str(FIXTURES / "malformed.yaml"))


@pytest.mark.parametrize("changes, needle", [
    ({"num_key_value_heads": 5}, "num_key_value_heads"),
    ({"weight_dtype": "fp7"}, "weight_dtype"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"moe": {"num_experts": 2, "num_experts_per_tok": 4, "moe_intermediate_size": 128}}, "num_experts_per_tok"),
    ({"sliding_window": {"size": 128, "num_layers": 999}}, "sliding_window"),
])
def test_invalid_model_values_are_one_line_errors(tmp_path, changes, needle):
    p = tmp_path / "bad-model.yaml"
    p.write_text(_model_yaml("bad-model", **changes))
    with pytest.raises(CrossoverError) as exc:
        load_model(str(p))
    assert needle in _one_line_naming(exc, p)


def test_bad_user_spec_in_spec_path_named_in_error(tmp_path, monkeypatch):
    (tmp_path / "hardware").mkdir()
    shutil.copy(FIXTURES / "hw-negative-bandwidth.yaml", tmp_path / "hardware" / "bad-chip.yaml")
    monkeypatch.setenv("CROSSOVER_SPEC_PATH", str(tmp_path))
    with pytest.raises(CrossoverError) as exc:
        load_hardware("bad-chip")
    _one_line_naming(exc, tmp_path / "hardware" / "bad-chip.yaml")


def test_non_utf8_spec_file_is_a_one_line_error(tmp_path):
    p = tmp_path / "latin1.yaml"
    data = yaml.safe_load((REPO / "models" / "llama-3.1-8b.yaml").read_text())
    data.update(name="latin1", display_name="caf\u00e9")
    p.write_bytes(yaml.safe_dump(data, allow_unicode=True).encode("latin-1"))
    assert b"caf\xe9" in p.read_bytes()
    with pytest.raises(CrossoverError) as exc:
        load_model(str(p))
    _one_line_naming(exc, p)


# --------------------------------------------------------------------------- HF import

IMPORTS = [
    # fixture, shipped spec with the same architecture
    ("llama-3.1-8b.config.json", "llama-3.1-8b"),
    ("qwen2.5-7b.config.json", "qwen2.5-7b"),
    ("mixtral-8x7b.config.json", "mixtral-8x7b"),
    ("deepseek-v3.config.json", "deepseek-v3"),
    ("gpt-oss-120b.config.json", "gpt-oss-120b"),
]
ARCH_FIELDS = [f for f in Model.model_fields if f not in (
    "name", "display_name", "hf_repo", "aliases", "sources", "unverified", "notes", "published_params_b",
    "computed_params_b")]


def _import(fixture: str, name: str | None = "imported") -> tuple[dict, Model]:
    spec = import_config(FIXTURES / fixture, name)
    return spec, parse_spec(spec, Model, fixture)


@pytest.mark.parametrize("fixture, shipped", IMPORTS, ids=[s for _, s in IMPORTS])
def test_import_matches_shipped_spec(fixture, shipped):
    spec, m = _import(fixture)
    ref = load_model(shipped)
    diffs = {f: (getattr(m, f), getattr(ref, f)) for f in ARCH_FIELDS if getattr(m, f) != getattr(ref, f)}
    assert not diffs, f"import of {fixture} differs from models/{shipped}.yaml: {diffs}"
    assert total_params(m) == total_params(ref)
    assert m.name == "imported" and spec["sources"]


def test_import_llama():
    _, m = _import("llama-3.1-8b.config.json")
    assert (m.hidden_size, m.intermediate_size, m.num_hidden_layers) == (4096, 14336, 32)
    assert (m.num_attention_heads, m.num_key_value_heads, m.hd, m.vocab_size) == (32, 8, 128, 128256)
    assert m.moe is None and m.mla is None and m.sliding_window is None
    assert m.weight_dtype == "bf16" and not m.attention_bias and not m.tie_word_embeddings
    assert m.max_position_embeddings == 131072 and m.mtp_layers == 0


def test_import_qwen2_has_attention_bias_and_no_window():
    _, m = _import("qwen2.5-7b.config.json")
    assert m.attention_bias is True
    assert m.sliding_window is None  # use_sliding_window: false
    assert (m.hidden_size, m.num_attention_heads, m.num_key_value_heads, m.hd) == (3584, 28, 4, 128)
    unbiased = m.model_copy(update={"attention_bias": False})
    assert total_params(m) - total_params(unbiased) == m.num_hidden_layers * (28 + 2 * 4) * 128


def test_import_mixtral_experts():
    _, m = _import("mixtral-8x7b.config.json")
    assert m.moe is not None
    assert (m.moe.num_experts, m.moe.num_experts_per_tok) == (8, 2)
    assert m.moe.moe_intermediate_size == 14336
    assert m.moe.num_shared_experts == 0 and m.moe.first_dense_layers == 0
    assert m.sliding_window is None  # sliding_window: null


def test_import_deepseek_v3():
    spec, m = _import("deepseek-v3.config.json")
    assert m.mla is not None and m.moe is not None
    assert (m.mla.q_lora_rank, m.mla.kv_lora_rank) == (1536, 512)
    assert (m.mla.qk_nope_head_dim, m.mla.qk_rope_head_dim, m.mla.v_head_dim) == (128, 64, 128)
    assert (m.moe.num_experts, m.moe.num_experts_per_tok, m.moe.num_shared_experts) == (256, 8, 1)
    assert m.moe.moe_intermediate_size == 2048 and m.moe.first_dense_layers == 3
    assert m.mtp_layers == 1
    assert m.weight_dtype == "fp8"  # quantization_config wins over torch_dtype bfloat16
    assert kv_elements_per_token_layer(m) == 576
    assert total_params(m) == pytest.approx(671.0e9, rel=5e-3)


def test_import_gpt_oss():
    _, m = _import("gpt-oss-120b.config.json")
    assert m.sliding_window is not None
    assert (m.sliding_window.size, m.sliding_window.num_layers) == (128, 18)
    assert m.weight_dtype == "mxfp4"
    assert m.attention_bias is True
    assert m.moe is not None and (m.moe.num_experts, m.moe.num_experts_per_tok) == (128, 4)
    assert m.hd == 64
    assert total_params(m) == pytest.approx(116.8e9, rel=5e-3)


@pytest.mark.parametrize("fixture", [f for f, _ in IMPORTS])
def test_import_leaves_input_byte_identical(fixture, tmp_path):
    p = tmp_path / fixture
    shutil.copy(FIXTURES / fixture, p)
    before, mtime = p.read_bytes(), p.stat().st_mtime_ns
    import_config(p, "x")
    import_config(str(p))
    assert p.read_bytes() == before
    assert p.stat().st_mtime_ns == mtime
    assert sorted(q.name for q in tmp_path.iterdir()) == [fixture]  # nothing written beside it


@pytest.mark.parametrize("fixture", [f for f, _ in IMPORTS])
def test_import_output_round_trips_through_yaml(fixture, tmp_path):
    spec, m = _import(fixture, "round-trip")
    p = tmp_path / "round-trip.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert load_model(str(p)) == m


def test_import_default_name_is_folder_of_config_json(tmp_path):
    d = tmp_path / "Llama-3.1-8B-Instruct"
    d.mkdir()
    shutil.copy(FIXTURES / "llama-3.1-8b.config.json", d / "config.json")
    assert import_config(d / "config.json")["name"] == "llama-3.1-8b-instruct"
    assert import_config(FIXTURES / "llama-3.1-8b.config.json")["name"] == "llama-3.1-8b.config"
    assert import_config(d / "config.json", "My-Name")["name"] == "my-name"


@pytest.mark.parametrize("fixture, needle", [
    ("malformed.config.json", "malformed JSON"),
    ("no-hidden-size.config.json", "hidden_size"),
    ("does-not-exist.config.json", "no such file"),
])
def test_import_errors_are_one_line_naming_the_file(fixture, needle):
    path = FIXTURES / fixture
    with pytest.raises(CrossoverError) as exc:
        import_config(path)
    assert needle in _one_line_naming(exc, path)


def test_import_json_that_is_not_an_object(tmp_path):
    p = tmp_path / "list.json"
    p.write_text("[1, 2, 3]")
    with pytest.raises(CrossoverError, match="JSON object") as exc:
        import_config(p)
    _one_line_naming(exc, p)


def test_import_invalid_shape_is_caught_at_import(tmp_path):
    cfg = json.loads((FIXTURES / "llama-3.1-8b.config.json").read_text())
    cfg["num_key_value_heads"] = 5  # 32 heads are not a multiple of 5
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(CrossoverError) as exc:
        import_config(p, "bad")
    _one_line_naming(exc, p)


def test_import_multimodal_text_config():
    cfg = json.loads((FIXTURES / "llama-3.1-8b.config.json").read_text())
    mm = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
          "vision_config": {"hidden_size": 1024}, "text_config": cfg}
    m = parse_spec(config_to_spec(mm, "mm"), Model, "mm")
    assert m.hidden_size == 4096 and m.num_hidden_layers == 32 and m.vocab_size == 128256


def test_import_multimodal_keeps_top_level_quantization():
    cfg = json.loads((FIXTURES / "llama-3.1-8b.config.json").read_text())
    mm = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "torch_dtype": "bfloat16",
          "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}, "text_config": cfg}
    assert config_to_spec(mm, "mm")["weight_dtype"] == "fp8"


def test_import_zero_heads_is_a_crossover_error():
    cfg = json.loads((FIXTURES / "llama-3.1-8b.config.json").read_text())
    cfg.pop("head_dim", None)
    cfg["num_attention_heads"] = 0
    with pytest.raises(CrossoverError):
        config_to_spec(cfg, "zero")


def test_loader_cache_sees_edited_file(tmp_path):
    p = tmp_path / "chip.yaml"
    p.write_text(_hardware_yaml("chip", memory_gb=10))
    assert load_hardware(str(p)).memory_gb == 10
    p.write_text(_hardware_yaml("chip", memory_gb=20))
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert load_hardware(str(p)).memory_gb == 20


def test_shipped_dir_is_the_repository_library_when_run_from_source():
    assert loader.shipped_dir("hardware") == REPO / "hardware"
    assert loader.shipped_dir("models") == REPO / "models"


# --------------------------------------------------------------------------- YAML: libyaml, depth

def test_safe_load_yaml_is_safe_load_and_refuses_depth_before_the_c_composer_sees_it():
    """Spec files go through libyaml (safe_load_yaml): the same mappings as yaml.safe_load for every
    shipped spec; YAML_MAX_DEPTH levels load, one more raises RecursionError (the callers' "nested too
    deeply" line), and 100,000 levels, which would overflow libyaml's recursive composer (a crash,
    not an exception), are refused by the flat walk over the events first."""
    import yaml

    from crossover.specs.loader import YAML_MAX_DEPTH, safe_load_yaml

    specs = [p for d in ("hardware", "models", "engines", "workloads") for p in sorted((REPO / d).glob("*.yaml"))]
    assert len(specs) > 20
    for p in specs:
        text = p.read_text()
        assert safe_load_yaml(text) == yaml.safe_load(text), p
    ok = "a: " + "[" * (YAML_MAX_DEPTH - 1) + "1" + "]" * (YAML_MAX_DEPTH - 1)
    assert safe_load_yaml(ok) == yaml.safe_load(ok)
    for depth in (YAML_MAX_DEPTH + 1, 100_000):
        with pytest.raises(RecursionError):
            safe_load_yaml("[" * depth + "]" * depth)
    # what libyaml refuses is parsed again in Python: the pure-Python parser's own error, word for word
    for bad in ("a: [1, 2", "a: b: c", "a:\n\t- 1"):
        with pytest.raises(yaml.YAMLError) as got:
            safe_load_yaml(bad)
        with pytest.raises(yaml.YAMLError) as want:
            yaml.safe_load(bad)
        assert str(got.value) == str(want.value)


def test_a_libyaml_with_its_own_nesting_limit_still_gives_recursion_error(monkeypatch):
    """Newer libyaml builds stop at their own nesting limit with a ScannerError ("while increasing flow
    level"): the document then goes to the pure-Python parser, which raises RecursionError for it (the
    callers' "nested too deeply" line), not a "malformed YAML" one."""
    import yaml

    from crossover.specs import loader

    def refuse(text, Loader=None):
        raise yaml.scanner.ScannerError("while increasing flow level", None, "exceeded maximum nesting depth", None)
        yield  # a generator, as yaml.parse is

    monkeypatch.setattr(loader.yaml, "parse", refuse)
    with pytest.raises(RecursionError):
        loader.safe_load_yaml("[" * 5000 + "]" * 5000)
    assert loader.safe_load_yaml("a: [1, 2]") == {"a": [1, 2]}  # valid text: the pure-Python parse


# --------------------------------------------------------------------------- no silent guesses in the
# Hugging Face import, named fallback fractions, imports at the top, counts from the op list


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


PKG = REPO / "crossover"


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
