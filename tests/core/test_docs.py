"""The documents hold to the code: generated pages equal what their scripts write, the
architecture names every folder there is, and every module path a document cites exists."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
from pathlib import Path

import lexlens

ROOT = Path(__file__).resolve().parents[2]

#: Files a document names that a script or a command writes, so a checkout need not hold them.
WRITTEN_BY_A_SCRIPT = {"data/corpus_imagenet.txt": "python data/corpus_imagenet.py"}
#: Documents that name what no longer exists on purpose (the renames of a release).
HISTORY = {"CHANGELOG.md"}
#: A section of ARCHITECTURE.md whose paths are a made-up example.
EXAMPLE_HEADING = re.compile(r"^## .*made-up example", re.M)

DOTTED = re.compile(
    r"(?<![\w./-])(?:lexlens(?:\.[A-Za-z_]\w*)+|(?:analysis|app|models)(?:\.[A-Za-z_]\w*)+)"
)
PATH = re.compile(
    r"(?<![\w/.-])((?:analysis|app|models|bench|tests|data|docs)/[\w/.-]*"
    r"\.(?:py|md|json|csv|toml|html|txt|tsv|jsonl))\b"
)


def _script(path: str):
    """A script of the checkout loaded as a module (docs/ and bench/ scripts are not imported
    by the package)."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_reference_is_what_the_parsers_write():
    written = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert written == _script("docs/make_reference.py").reference(), (
        "docs/commands.md differs from the parsers: run python docs/make_reference.py"
    )


def test_the_command_reference_names_every_command_and_flag():
    from lexlens.app.cli import COMMANDS, build_parser

    written = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = next(a for a in parser._actions if hasattr(a, "choices") and a.choices).choices
    assert sorted(commands) == sorted(c.replace("_", "-") for c in COMMANDS)
    for name, sub in commands.items():
        section = written.split(f"## `lexlens {name}`\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section or f", {flag}" in section, (name, flag)


def test_the_bench_readme_is_what_the_results_write():
    writer = _script("bench/write_readme.py")
    results = json.loads((ROOT / "bench" / "results.json").read_text(encoding="utf-8"))
    scale_file = ROOT / "bench" / "results-scale.json"
    scale = json.loads(scale_file.read_text(encoding="utf-8")) if scale_file.is_file() else None
    written = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    assert written == writer.readme(results, scale), (
        "bench/README.md differs from bench/results.json: run python -m bench.write_readme"
    )
    for figure in results["results"] + (scale or {}).get("results", []):
        assert f"`{figure['name']}`" in written


def _code_folders() -> set[str]:
    """Every folder of analysis/ and app/ that holds a .py file."""
    return {
        p.parent.relative_to(ROOT).as_posix()
        for top in ("analysis", "app")
        for p in (ROOT / top).rglob("*.py")
        if "__pycache__" not in p.parts and p.parent != ROOT / top
    }


def _architecture() -> str:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    example = EXAMPLE_HEADING.search(text)
    return text[: example.start()] if example else text


def test_the_architecture_names_every_code_folder_and_only_those():
    text = _architecture()
    named = {
        m.group(1).rstrip("/")
        for m in re.finditer(r"(?<![\w/])((?:analysis|app)(?:/[a-z_]+)+)/", text)
    }
    folders = _code_folders()
    assert folders - named == set(), "ARCHITECTURE.md does not name these folders"
    stale = {n for n in named if not (ROOT / n).is_dir()}
    assert stale == set(), "ARCHITECTURE.md names folders that do not exist"


def _documents():
    """(file, text) of every Markdown page and every docstring of the package and scripts."""
    for path in sorted(ROOT.rglob("*.md")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".", "tests/")) or "/." in rel or rel in HISTORY:
            continue
        text = path.read_text(encoding="utf-8")
        yield rel, _architecture() if rel == "ARCHITECTURE.md" else text
    for name in ("pyproject.toml", "Makefile"):
        yield name, (ROOT / name).read_text(encoding="utf-8")
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".", "tests/")) or "/." in rel or "__pycache__" in rel:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield rel, doc


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base if base.is_dir() else None


def _defines(module: Path, name: str) -> bool:
    """Whether a module binds ``name`` at its top level (def, class, assignment, import)."""
    if module.is_dir():
        return False
    bound: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names}
    return name in bound


def _ignored(path: str) -> bool:
    """Whether git ignores a path (a file the code writes, such as a report)."""
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
    return done.returncode == 0


def test_every_module_and_file_a_document_cites_exists():
    missing = []
    for where, text in _documents():
        for match in DOTTED.finditer(text):
            parts = match.group(0).removeprefix("lexlens.").split(".")
            if parts == ["lexlens"]:
                continue
            k = len(parts)
            while k and _module_file(parts[:k]) is None:
                k -= 1
            if not k:
                if parts[0] not in [*lexlens.__all__, "__all__"]:  # the public API, exported lazily
                    missing.append(f"{where}: {match.group(0)}")
                continue
            if k < len(parts) and not _defines(_module_file(parts[:k]), parts[k]):
                missing.append(f"{where}: {match.group(0)}")
        for match in PATH.finditer(text):
            path = match.group(1)
            written = path in WRITTEN_BY_A_SCRIPT or _ignored(path)
            if not (ROOT / path).exists() and not written:
                missing.append(f"{where}: {path}")
    assert missing == [], "documents cite what does not exist:\n" + "\n".join(missing)


def test_every_relative_link_of_a_page_leads_to_a_file():
    broken = []
    for path in [
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
            if not (path.parent / match.group(1)).exists():
                broken.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    assert broken == [], "links to nothing:\n" + "\n".join(broken)
