"""The house's shape: app → analysis → models, no import cycle among the package's modules
(counting imports inside functions and under TYPE_CHECKING), and a library that imports
neither argparse nor Streamlit."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("models", "analysis", "app")


def _modules() -> dict[str, Path]:
    """``lexlens.x.y`` → its file, for every module of the three layers."""
    out = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(("lexlens", *parts))] = path
    return out


def _imports(path: Path) -> set[str]:
    """Every module name an import in ``path`` names (``from a import b``: ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    packages = {m for m, p in modules.items() if p.name == "__init__.py"}
    return {
        name: {i for i in _imports(path) if i in modules and i not in packages and i != name}
        for name, path in modules.items()
    }


def test_no_import_cycle():
    graph = _graph()
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' → '.join(exc.args[1])}") from None
    assert len(order) == len(graph) > 100


def test_each_layer_imports_only_the_ones_below():
    below = {"models": set(), "analysis": {"models"}, "app": {"models", "analysis"}}
    for name, deps in _graph().items():
        layer = name.split(".")[1]
        for dep in deps:
            dep_layer = dep.split(".")[1]
            assert dep_layer == layer or dep_layer in below[layer], f"{name} imports {dep}"


def test_the_library_imports_neither_argparse_nor_streamlit():
    for name, path in _modules().items():
        if name.startswith(("lexlens.analysis", "lexlens.models")):
            roots = {i.split(".")[0] for i in _imports(path)}
            assert not roots & {"argparse", "streamlit"}, name


def test_no_front_end_module_is_over_250_lines():
    for folder in (ROOT / "app" / "app_pages", ROOT / "app" / "cli"):
        for path in folder.glob("*.py"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            assert lines <= 250, f"{path.relative_to(ROOT)}: {lines} lines"
