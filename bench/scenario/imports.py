"""A user's `package.module:function`: found without importing it, and imported in a worker.

The parent never imports a user's module (it may import TensorFlow, or do anything at all): it
finds the module's file the way the import system would, on the scenario's folder, the current
directory and the interpreter's path, and reads its source for a top-level definition of the
name (`lookup_problem`). What only an import can tell (an import error inside the module, a name
made at run time) is the worker's to report (`import_object`, `call_with`), as a one-line
failure of the variant that names the function.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import inspect
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from bench.errors import WorkloadError, one_line

IMPORT_PATH_HELP = "'package.module:function' (a module beside the scenario file, or installed)"
# The largest module read for its names: larger is no hand-written module, and parsing it would
# hold the parent for seconds. Python's parser also gives up on expressions nested some thousand
# levels deep (RecursionError, MemoryError): both are a one-line problem, never a traceback.
MAX_MODULE_BYTES = 10 << 20  # 10 MiB


def is_import_path(value: str) -> bool:
    """Whether `value` names a user's object as "package.module:function"."""
    module, sep, attr = value.partition(":")
    return bool(sep and module and attr.isidentifier()
                and all(part.isidentifier() for part in module.split(".")))


def search_path(scenario_dir: Path | None) -> list[str]:
    """Where a worker imports user modules from: the scenario's folder first, then the current
    directory and the interpreter's own path (installed packages)."""
    first = [str(scenario_dir)] if scenario_dir is not None else []
    return [*first, str(Path.cwd()), *sys.path[1:]]


def _module_file(module: str, path: list[str]) -> Path | None | bool:
    """The source file of `module` on `path` (None: not found; True: found, but with no Python
    source to read, e.g. an extension module or a namespace package)."""
    locations: list[str] | None = path
    spec = None
    for part in module.split("."):
        spec = PathFinder.find_spec(part, locations)
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
    origin = getattr(spec, "origin", None)
    if origin and origin.endswith(".py"):
        return Path(origin)
    return True


def _binds(node: ast.stmt, name: str) -> bool | None:
    """Whether one top-level statement binds `name` (None: it may, at run time)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None if node.name == "__getattr__" else node.name == name
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == name for t in targets)
    if isinstance(node, ast.Import | ast.ImportFrom):
        return any(a.name == "*" or (a.asname or a.name.split(".")[0]) == name
                   for a in node.names)
    if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
        return None if name in ast.unparse(node) else False
    return False


def _defines(source: str, name: str) -> bool | None:
    """Whether the module's top level binds `name` (None: it may, at run time)."""
    maybe = False
    for node in ast.parse(source).body:
        bound = _binds(node, name)
        if bound:
            return True
        maybe = maybe or bound is None
    return None if maybe else False


def _top_level_names(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def lookup_problem(value: str, scenario_dir: Path | None) -> str | None:
    """Why "package.module:function" cannot be what a worker imports (None: it can be found)."""
    if not is_import_path(value):
        return f"'{value}' is not of the form {IMPORT_PATH_HELP}"
    module, _, attr = value.partition(":")
    path = search_path(scenario_dir)
    found = _module_file(module, path)
    if found is None:
        where = f"beside the scenario ({scenario_dir}), " if scenario_dir else ""
        return (f"no module '{module}' to import ({where}in the current directory or among the "
                "installed packages)")
    if found is True:
        return None
    try:
        if found.stat().st_size > MAX_MODULE_BYTES:
            return (f"cannot read {found}: larger than a module bench reads for its names "
                    f"({MAX_MODULE_BYTES >> 20} MiB)")
        source = found.read_text(encoding="utf-8")
        defined = _defines(source, attr)
    except (RecursionError, MemoryError):
        return f"cannot read {found}: nested too deeply for Python's parser"
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        return f"cannot read {found}: {one_line(str(exc).splitlines()[0] if str(exc) else exc)}"
    if defined is False:
        close = difflib.get_close_matches(attr, _top_level_names(source), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"{found} defines no '{attr}'{hint}"
    return None


def import_object(path: str, what: str) -> Any:
    """The object "package.module:function" names (worker side); a WorkloadError naming `what`
    and the path when it cannot be imported or is missing."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's module may raise anything while it is imported
        raise WorkloadError(f"{what} '{path}': importing {module_name} raised "
                            f"{type(exc).__name__}: {one_line(exc)}") from None
    found = getattr(module, attr, None)
    if found is None:
        raise WorkloadError(f"{what} '{path}': {module_name} has no '{attr}'")
    return found


def call_with(fn: Callable[..., Any], available: dict[str, Any], what: str) -> Any:
    """Call a user's `fn` with whichever of `available` its signature names (all of them for
    **kwargs); a parameter it requires that bench cannot give is a one-line WorkloadError."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: give it nothing
        return fn()
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(**available)
    missing = [name for name, p in params.items() if name not in available
               and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        raise WorkloadError(f"{what}: parameter '{missing[0]}' is not one bench passes (it "
                            f"passes {', '.join(available)} by name, to those that ask)")
    return fn(**{name: value for name, value in available.items() if name in params})


def accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether `fn` takes a parameter `name` (or any keyword)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
