"""The package's shape, checked from its source with `ast` (nothing is imported, nothing runs).

Every import counts, function-level ones included: an import inside a function still ties the
two modules together, it only hides the tie from the reader. The rules are those of
CONTRIBUTING.md: no import cycle, no module over 400 lines, at most 15 modules directly in
`bench/`, and the parent side never reaches worker-side code, directly or through another module.
CONTRIBUTING.md's layout block is checked against the tree too.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from bench import entrypoints

PACKAGE = Path(__file__).resolve().parent.parent / "bench"
CONTRIBUTING = PACKAGE.parent / "CONTRIBUTING.md"
MAX_LINES = 400
MAX_TOP_LEVEL = 15

# The parent process: it orchestrates, renders and compares, and never imports TensorFlow.
PARENT_SIDE = ("bench.runner", "bench.nightly", "bench.report", "bench.compare", "bench.perf")
# What runs in a worker process (TensorFlow, Keras, tf.data), and the fork server's own process.
WORKER_SIDE = ("bench.training", "bench.backends", "bench.data", "bench.utilization", "bench.worker",
               "bench.checks.suite", "bench.checks.train_copy", "bench.checks.parity",
               "bench.checks.accuracy", "bench.checks.alignment", "bench.launch.forkserver_main")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_by(name: str) -> set[str]:
    """The bench modules `name` imports anywhere in its source (the longest module each names)."""
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            for k in range(len(parts), 0, -1):
                candidate = ".".join(parts[:k])
                if candidate in modules():
                    if candidate != name:
                        found.add(candidate)
                    break
    return found


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module → the modules it imports, a package's own children left out of its __init__
    (re-exporting them is not a cycle), and a submodule's parent packages left out of it."""
    out = {}
    for name in modules():
        deps = imported_by(name)
        if modules()[name].name == "__init__.py":
            deps = {d for d in deps if not d.startswith(name + ".")}
        out[name] = frozenset(d for d in deps if not name.startswith(d + "."))
    return out


def reachable(start: str) -> set[str]:
    """Everything importing `start` runs: what it imports, their packages' __init__s, and so on."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph()[todo.pop()]:
            parts = dep.split(".")
            for k in range(2, len(parts) + 1):  # bench.a.b runs bench/a/__init__ too
                step = ".".join(parts[:k])
                if step in modules() and step not in seen:
                    seen.add(step)
                    todo.append(step)
    return seen


def cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in graph()[node]:
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                found.append(sorted([node, *group]))

    for node in graph():
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    assert cycles() == []


def test_no_module_over_the_line_limit() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_few_modules_directly_in_the_package() -> None:
    top = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= MAX_TOP_LEVEL, sorted(top)


@pytest.mark.parametrize("parent", [m for m in modules() if m.startswith(PARENT_SIDE)])
def test_the_parent_side_never_reaches_worker_code(parent: str) -> None:
    assert sorted(m for m in reachable(parent) if m.startswith(WORKER_SIDE)) == []


def test_the_checker_sees_function_level_imports() -> None:
    """The fork server imports the worker only inside a function; that must count."""
    assert "bench.worker" in imported_by("bench.launch.forkserver_main")
    assert "bench.worker" in reachable("bench.launch.forkserver_main")


@pytest.mark.parametrize("module", entrypoints.ALL)
def test_every_entry_point_exists_and_has_a_main(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    assert any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body), module


def layout_block() -> list[tuple[str, list[str]]]:
    """CONTRIBUTING.md's layout: the one fenced block whose lines all start with `bench/`. Each
    line is `bench/<package path>/  module module ...  # what they hold`: the folder, then module
    names (no `.py`) separated by spaces or commas, then an optional `#` comment. A package may
    take several lines; every module of it (`__init__` and `__main__` aside) is on exactly one."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", CONTRIBUTING.read_text(encoding="utf-8"),
                        re.S | re.M)
    layouts = [b for b in blocks if b.strip() and all(
        line.startswith("bench/") for line in b.splitlines() if line.strip())]
    assert len(layouts) == 1, ("CONTRIBUTING.md needs one fenced block of lines "
                               "`bench/<folder>/  module module ...  # comment`: the layout")
    [block] = layouts
    rows = []
    for line in block.splitlines():
        if line.strip():
            folder, *names = line.split("#", 1)[0].replace(",", " ").split()
            rows.append((folder, names))
    return rows


def test_contributing_lists_every_module_and_only_those() -> None:
    listed = [f"{folder.rstrip('/').replace('/', '.')}.{name}"
              for folder, names in layout_block() for name in names]
    assert [m for m, n in Counter(listed).items() if n > 1] == []  # listed once each
    actual = {name for name, path in modules().items()
              if path.name not in ("__init__.py", "__main__.py")}
    assert {"missing from CONTRIBUTING.md": sorted(actual - set(listed)),
            "listed but absent": sorted(set(listed) - actual)} == {
        "missing from CONTRIBUTING.md": [], "listed but absent": []}


def test_contributing_lists_every_package() -> None:
    folders = {folder.rstrip("/").replace("/", ".") for folder, _ in layout_block()}
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert folders == packages
