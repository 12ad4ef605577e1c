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


#: The library's folders in the order data flows: each imports only the folders before it
#: (and itself). Readers know nothing of indexes; collections store what readers yield;
#: retrieval holds the one query rule and the one exact scorer; the analyses of one input or
#: one collection come next; an evaluation uses them; what adds a section to an evaluation
#: comes after it; export writes what all of them hold.
FOLDER_ORDER = (
    "core",
    "render",
    "datasets",
    "collections",
    "retrieval",
    "lexical",
    "deviation",
    "attribution",
    "search",
    "compare",
    "evaluation",
    "faithfulness",
    "counterfactual",
    "systems",
    "export",
)


def _folder(module: str) -> str | None:
    """The library folder of ``lexlens.analysis.<folder>.…`` (``None`` outside analysis)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "analysis" else None


def test_the_library_folders_are_the_ones_in_the_order():
    folders = {p.name for p in (ROOT / "analysis").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(FOLDER_ORDER)


def test_each_folder_imports_only_the_folders_before_it():
    rank = {name: i for i, name in enumerate(FOLDER_ORDER)}
    wrong = []
    for name, deps in _graph().items():
        here = _folder(name)
        if here is None:
            continue
        for dep in deps:
            there = _folder(dep)
            if there is not None and rank[there] > rank[here]:
                wrong.append(f"{name} imports {dep}")
    assert not wrong, "\n".join(wrong)


def test_render_imports_nothing_above_core():
    """render draws what it is given: of Lexlens it imports only core (and itself), and of
    models only the contract's data types; the use cases that render live above it."""
    allowed = ("lexlens.analysis.core", "lexlens.analysis.render", "lexlens.models.base")
    modules = _modules()
    render = [name for name in modules if name.startswith("lexlens.analysis.render")]
    assert len(render) >= 5
    for name in render:
        for dep in _imports(modules[name]):
            if dep.split(".")[0] == "lexlens":
                assert dep.startswith(allowed), f"{name} imports {dep}"


def test_security_only_the_autoescaped_templates_write_html():
    """Every HTML report of the library goes through render.html.render_report (Jinja2,
    autoescaped): no other module of analysis/ builds a Jinja2 template or spells markup."""
    markup = ("<html", "<table", "<tr", "<td", "<div", "<p>", "<img", "<script")
    for name, path in _modules().items():
        if not name.startswith("lexlens.analysis") or name == "lexlens.analysis.render.html":
            continue
        assert "jinja2" not in {i.split(".")[0] for i in _imports(path)}, name
        for line, text in _code_strings(path):
            assert not any(tag in text.lower() for tag in markup), f"{name}:{line}"


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module that is not a docstring, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_silent_wrong_special_tokens_are_defined_once():
    """Which tokens are special (the frame [CLS]/[SEP]/[PAD] among them) is spelled in
    core/vocabulary.py only: every other module of the library asks it."""
    home = "lexlens.analysis.core.vocabulary"
    for name, path in _modules().items():
        if name.startswith("lexlens.analysis") and name != home:
            for line, text in _code_strings(path):
                assert "[CLS]" not in text and "[SEP]" not in text, f"{name}:{line}"


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
