"""The package's layers import downward only (docs/architecture.md): a module may import from its
own layer or lower ones, never from a higher one, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "crossover"

# Bottom to top; a module's layer is the first prefix that matches its dotted name.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "units", "files"),
    ("specs", "measurements"),
    ("ops", "workload", "crossings"),
    ("roofline",),
    ("kernels", "kernel_tables", "kernel_formulas"),  # measured kernel tables as a cost mode (issue 11)
    ("memory",),
    ("acceptance", "speculation"),
    ("step",),
    ("curves",),
    ("policy", "trees", "adaptive", "whatif", "calibration", "physics", "engines"),
    ("serving",),
    ("plan", "fleet", "pricing", "traffic"),  # capacity planning (issue 13)
    ("compare",),
    ("report", "measured_report", "plots", "html_report", "engine_effects"),
    ("build", "results", "measured"),
    ("api",),
    ("", "cli", "web", "__main__"),  # the package itself exports the API; the CLI is the leaf
]


def _rank(module: str) -> int:
    rel = module.removeprefix("crossover").lstrip(".")
    head = rel.split(".")[0]
    for i, names in enumerate(LAYERS):
        if head in names:
            return i
    raise AssertionError(f"crossover.{rel} is in no layer: add it to LAYERS and docs/architecture.md")


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
            if _rank(target) > _rank(name):
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
