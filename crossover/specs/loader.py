"""Find and load specs by name or path: shipped libraries, CROSSOVER_SPEC_PATH, or a file."""

from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import CrossoverError, FileError, InputError
from ..files import malformed_yaml, read_text, too_deep
from .engine import EngineProfile
from .hardware import Hardware
from .model import Model

Kind = Literal["hardware", "models", "workloads", "engines"]
T = TypeVar("T", bound=BaseModel)

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
# Marker keys that tell a hardware file from a model file in a flat user directory.
_KIND_KEY = {"hardware": "memory_bandwidth_gb_s", "models": "hidden_size", "workloads": "output_len",
             "engines": "verify_layout"}


def shipped_dir(kind: Kind) -> Path:
    """The directory of shipped specs: inside the installed package, or the repository root."""
    installed = _PACKAGE_DIR / "_data" / kind
    if installed.is_dir() and any(installed.glob("*.yaml")):
        return installed
    return _PACKAGE_DIR.parent / kind


def search_dirs(kind: Kind) -> list[Path]:
    """Directories searched for `kind`, user directories (CROSSOVER_SPEC_PATH) first."""
    dirs: list[Path] = []
    for entry in os.environ.get("CROSSOVER_SPEC_PATH", "").split(os.pathsep):
        if entry.strip():
            base = Path(entry).expanduser()
            dirs += [base / kind, base]
    dirs.append(shipped_dir(kind))
    return dirs


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml", ".json")) or os.sep in ref or "/" in ref


# Spec, price and calibration files nest a few levels; a deeper document is refused as too deep.
YAML_MAX_DEPTH = 64


def safe_load_yaml(text: str):
    """`yaml.safe_load(text)`, parsed by libyaml where PyYAML was built with it (about 10x faster than
    its pure-Python parser: a hardware spec in ~0.5 ms instead of ~6). libyaml's composer recurses in
    C, where a deep enough document overflows the stack instead of raising, so the document's events
    are walked first (a flat loop) and one nested deeper than YAML_MAX_DEPTH raises RecursionError.
    Text libyaml refuses (malformed, or past its own nesting limit, which some builds have) is parsed
    again by the pure-Python parser, so an error is always its YAMLError (the same line and message
    as without libyaml) or RecursionError for a document nested past Python's recursion limit."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return yaml.safe_load(text)
    opens, closes = (yaml.MappingStartEvent, yaml.SequenceStartEvent), (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, opens):
                depth += 1
                if depth > YAML_MAX_DEPTH:
                    raise RecursionError(f"YAML nested deeper than {YAML_MAX_DEPTH} levels")
            elif isinstance(event, closes):
                depth -= 1
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return yaml.safe_load(text)  # raises the pure-Python parser's error for it


def read_yaml(path: Path) -> dict:
    """Parse a YAML (or JSON) file into a mapping; one-line errors naming the file."""
    text = read_text(path, "a YAML spec")
    try:
        data = safe_load_yaml(text)
    except yaml.YAMLError as exc:
        raise malformed_yaml(path, exc) from None
    except RecursionError:
        raise too_deep(path, "a YAML spec") from None
    if not isinstance(data, dict):
        raise FileError(f"{path}: expected a mapping of keys to values at the top level")
    return data


def validation_message(exc: ValidationError, origin: str) -> str:
    """First validation problem as one line: where, which field, what would be right."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    if err["type"] == "missing":
        return f"{origin}: missing required field {field!r}"
    if err["type"] == "extra_forbidden":
        return f"{origin}: unknown field {field!r} (check the spelling against the shipped specs)"
    got = err.get("input")
    got_s = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
    return f"{origin}: field {field!r}: {err['msg']}{got_s}"


def parse_spec(data: dict, cls: type[T], origin: str) -> T:
    """Validate a mapping into a spec, with a one-line error naming `origin`."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise FileError(validation_message(exc, origin)) from None


# The spec class of each kind this module knows; modules above it (workload.py) pass their own.
_SPEC_CLASSES: dict[str, type[BaseModel]] = {"hardware": Hardware, "models": Model, "engines": EngineProfile}


@lru_cache(maxsize=256)
def _load_file(path: str, cls: type[BaseModel], mtime: float) -> BaseModel:
    data = read_yaml(Path(path))
    data.setdefault("name", Path(path).stem)
    spec = parse_spec(data, cls, path)
    if isinstance(spec, Hardware) and spec.distilled is None and spec.distilled_from:
        return _borrowed(spec, Path(path))
    return spec


def load_file(path: Path, kind: Kind, cls: type[BaseModel] | None = None) -> BaseModel:
    """Load one spec file of `kind` as `cls` (default: the kind's spec class), cached per path and
    modification time."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        raise FileError(f"{path}: no such file") from None
    return _load_file(str(path), cls or _SPEC_CLASSES[kind], mtime)


def _borrowed(hw: Hardware, path: Path) -> Hardware:
    """A GPU without kernel tables of its own takes the distilled block of the library GPU with the same
    chip (Hardware.distilled_from; its reason in sources), so that the two price on the same footing."""
    if hw.distilled_from == hw.name:
        raise FileError(f"{path}: distilled_from names this GPU itself")
    sibling = resolve(hw.distilled_from, "hardware")
    if not isinstance(sibling, Hardware) or sibling.distilled is None:
        raise FileError(f"{path}: distilled_from {hw.distilled_from!r} has no distilled block to borrow")
    why = hw.sources.get("distilled_from", "the same chip")
    update = {"source": f"borrowed from {sibling.name} ({why}): {sibling.distilled.source}"}
    # The all-reduce fit is the measured box's links, not the chip's: kept only over the same links, and
    # never over PCIe, where each server's switches and P2P paths decide it (L40S's host-path fit does not
    # hold on MagicDec's 8 x L40 box); NVLink boards of one generation are one design. Else the ring over
    # this GPU's own links.
    if hw.is_pcie or (hw.interconnect, hw.interconnect_gb_s) != (sibling.interconnect, sibling.interconnect_gb_s):
        update["all_reduce"] = None
    dist = sibling.distilled.model_copy(update=update)
    return hw.model_copy(update={"distilled": dist})


def _flat_file_kind(path: Path) -> str | None:
    try:
        data = safe_load_yaml(read_text(path, "a YAML spec"))
    except (CrossoverError, yaml.YAMLError, RecursionError):
        return None
    if isinstance(data, dict):
        for kind, key in _KIND_KEY.items():
            if key in data:
                return kind
    return None


def available(kind: Kind) -> dict[str, Path]:
    """Every spec name of `kind` that can be found, mapped to its file (user specs win)."""
    found: dict[str, Path] = {}
    for d in search_dirs(kind):
        if not d.is_dir():
            continue
        is_flat = d.name != kind and d != shipped_dir(kind)
        for f in sorted(d.glob("*.yaml")):
            if is_flat and _flat_file_kind(f) != kind:
                continue
            found.setdefault(f.stem, f)
    return found


_WHAT = {"hardware": "hardware", "models": "model", "workloads": "workload", "engines": "engine"}


# the API keyword that names a spec of each kind (an error names it as the offending parameter)
_PARAMETER = {"hardware": "hardware", "models": "model", "engines": "engine", "workloads": "workload"}


def resolve_path(ref: str, kind: Kind, cls: type[BaseModel] | None = None) -> tuple[BaseModel, Path]:
    """A spec (as `cls`, default the kind's spec class) and its file, by exact name (never by
    substring) or by path."""
    what = _WHAT[kind]
    if not ref or not ref.strip():
        raise InputError(f"empty {what} name", parameter=_PARAMETER[kind])
    path = Path(ref).expanduser()
    if _looks_like_path(ref) and (path.exists() or ref.endswith((".yaml", ".yml", ".json")) or kind != "models"):
        return load_file(path, kind, cls), path
    names = available(kind)
    if ref in names:
        return load_file(names[ref], kind, cls), names[ref]
    if kind == "models":
        hit = _by_hf_id(ref, names)
        if hit is not None:
            return load_file(hit, kind), hit
    close = _hints(ref, names)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = f" (`crossover {kind} list` shows all)" if kind not in ("workloads", "engines") else (
        f" (known: {', '.join(sorted(names))})")
    if kind == "models" and "/" in ref:
        listing += "; for another checkpoint, `crossover models import CONFIG.json` writes a spec from its config"
    raise InputError(f"unknown {what} {ref!r}{hint}{listing}", parameter=_PARAMETER[kind])


def _hints(ref: str, names: dict[str, Path]) -> list[str]:
    """Names to suggest: those the reference starts (e.g. 'h100' -> the H100 variants), then close spellings."""
    low = ref.lower().split("/")[-1]
    prefixed = sorted(n for n in names if n.startswith(low))
    close = difflib.get_close_matches(low, list(names), n=3, cutoff=0.5)
    return (prefixed + [c for c in close if c not in prefixed])[:4]


def _by_hf_id(ref: str, names: dict[str, Path]) -> Path | None:
    """The library model whose Hugging Face id or declared alias is `ref` (case-insensitive; the
    organisation prefix may be left out)."""
    want = ref.strip().lower()
    for path in names.values():
        try:
            model = load_file(path, "models")
        except CrossoverError:
            continue
        for hf in (model.hf_repo, *model.aliases):  # type: ignore[attr-defined]
            if hf and want in (hf.lower(), hf.lower().split("/")[-1]):
                return path
    return None


def resolve(ref: str, kind: Kind) -> BaseModel:
    """A spec by exact name (never by substring) or by path."""
    return resolve_path(ref, kind)[0]


def load_hardware(ref: str | Hardware) -> Hardware:
    """Hardware by name, path or instance."""
    return ref if isinstance(ref, Hardware) else resolve(ref, "hardware")  # type: ignore[return-value]


def load_model(ref: str | Model) -> Model:
    """Model by name, path or instance."""
    return ref if isinstance(ref, Model) else resolve(ref, "models")  # type: ignore[return-value]


def load_engine(ref: str | EngineProfile) -> EngineProfile:
    """Engine profile by name (engines/*.yaml: vllm, vllm-0.10, vllm-v0, sglang, sglang-0.4, trtllm, hf), path or instance."""
    return ref if isinstance(ref, EngineProfile) else resolve(ref, "engines")  # type: ignore[return-value]
