"""The package's layers import downward only (docs/architecture.md: the folders are the layers): a module may import from its
own layer or lower ones, never from a higher one, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "crossover"

# Bottom to top: the folders are the layers (docs/architecture.md). A module's tier is its top-level
# name under crossover/; inside model/ and analysis/ the modules have tiers of their own.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "units", "files", "defaults"),  # foundation: errors, units, file reading, every default
    ("specs", "measurements"),  # validated inputs; result-file readers (they model nothing)
    ("model",),  # the step cost model and Scenario
    ("analysis",),  # curves, crossover, policy, trees, what-if, calibration, bounds
    ("serving",),  # the discrete-event serving simulator
    ("planning",),  # capacity plans, fleets, prices, traffic
    ("comparison",),  # a measured sweep beside the model
    ("reporting",),  # text, JSON, figures, HTML
    ("api",),  # the verbs, crossover.scenario, the result types
    ("", "cli", "web", "__main__", "step"),  # the package's exports, the leaves; step: the old location
]
SUBLAYERS: dict[str, list[tuple[str, ...]]] = {
    "model": [("ops",), ("collectives",), ("roofline",), ("kernels",), ("memory",), ("acceptance", "speculation"), ("forward", "graphs"), ("step_terms",), ("step",),
              ("breakdown",),
              ("scenario",)],
    "analysis": [("crossings",), ("curves",), ("sweep_fit", "load_fit"), ("calibration_bootstrap",),
                 ("policy", "trees", "adaptive", "whatif", "calibration", "bounds", "assumptions"),
                 ("engine_config",)],
}


def _rank(module: str) -> tuple[int, int]:
    parts = module.removeprefix("crossover").lstrip(".").split(".")
    head = parts[0]
    for i, names in enumerate(LAYERS):
        if head in names:
            sub = SUBLAYERS.get(head)
            if not sub or len(parts) < 2:
                return i, 0
            for j, inner in enumerate(sub):
                if parts[1] in inner:
                    return i, j
            raise AssertionError(f"{module} is in no tier of crossover/{head}: add it to SUBLAYERS")
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")


def test_the_folders_are_the_layers():
    """`ls crossover/` shows the layers: beside the foundation modules (and the old step location),
    every module lives in a layer folder."""
    flat = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in {"__init__", "__main__"})
    assert flat == ["defaults", "errors", "files", "step", "units"], flat
    folders = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(folders) == {n for names in LAYERS for n in names} - {"", "__main__", "errors", "units", "files", "defaults", "step"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Package modules that `name` imports (anywhere in the file)."""
    out = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] + ([node.module] if node.module else [])
                target = ".".join(base)
            else:
                target = node.module or ""
            if not target.startswith("crossover"):
                continue
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
            out.update(subs or [target])
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("crossover"))
    return out


def test_every_import_points_down_or_sideways():
    modules = _modules()
    bad = []
    for name, path in modules.items():
        for target in _imports(name, path, modules):
            if target == name:
                continue
            same_folder = target.split(".")[:2] == name.split(".")[:2]
            if _rank(target)[0] > _rank(name)[0] or (same_folder and _rank(target) > _rank(name)):
                bad.append(f"{name} imports {target}")
    assert not bad, "upward imports: " + "; ".join(sorted(bad))


def test_no_import_cycles():
    modules = _modules()
    graph = {name: {t for t in _imports(name, p, modules) if t in modules and t != name}
             for name, p in modules.items()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])


def test_no_module_is_too_long():
    long = {str(p.relative_to(PKG.parent)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 420}
    assert not long, f"modules over ~400 lines: {long}"


def test_no_module_imports_a_private_name_of_another():
    """A name another module needs is public: `from .x import _y` means the seam is in the wrong place."""
    modules = _modules()
    bad = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("crossover")):
                bad += [f"{name}: {a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "private names imported: " + "; ".join(sorted(bad))
