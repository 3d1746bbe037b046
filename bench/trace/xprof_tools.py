"""Finding a logdir's `.xplane.pb` files and running xprof's tools (converters) on them.

The profiler writes `<logdir>/plugins/profile/<run>/<host>.xplane.pb`, one run directory per
profiler start/stop (see bench.training.tracing). xprof's converters write caches next to their
input files, so `converting` hands them symlinks in a scratch directory: the logdir stays exactly
as bench wrote it. Needs xprof, not TensorFlow; xprof is imported only when a tool runs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.errors import one_line

XPLANE_SUFFIX = ".xplane.pb"


class ToolError(Exception):
    """One xprof conversion (or its output) failed; the message names the tool and the file."""


# --------------------------------------------------------------------------------------------
# Finding the files


def xplane_files(logdir: Path) -> list[Path]:
    """Every run's `<host>.xplane.pb` under `logdir`, sorted (run directories sort by time)."""
    return sorted(Path(logdir).glob(f"plugins/profile/*/*{XPLANE_SUFFIX}"))


def find_xplanes(logdir: Path) -> list[Path]:
    """The newest run's `*.xplane.pb` files: each profiler start/stop writes a new run directory."""
    files = xplane_files(logdir)
    if not files:
        return []
    newest = max(f.parent.name for f in files)  # xprof names runs YYYY_MM_DD_HH_MM_SS: name order is time
    return [f for f in files if f.parent.name == newest]


def locate_xplanes(logdir: Path) -> list[Path]:
    """find_xplanes, but say precisely what is missing when nothing is found."""
    profile = logdir / "plugins" / "profile"
    if not logdir.exists():
        raise ToolError(f"trace logdir does not exist: {logdir}")
    if not profile.is_dir():
        raise ToolError(f"no plugins/profile/ directory under {logdir} (not a profiler logdir?)")
    files = find_xplanes(logdir)
    if not files:
        raise ToolError(f"no *{XPLANE_SUFFIX} file under {profile}")
    return files


# --------------------------------------------------------------------------------------------
# Converting them


class Converter:
    """Runs xprof tools on symlinks to the trace files; failures become ToolError naming the file.

    The symlinks live in a scratch directory because xprof writes caches (op_stats, SSTABLE
    files) next to its inputs, and the analysed logdir should stay as bench wrote it.
    """

    def __init__(self, originals: list[Path], scratch: Path):
        self.originals = originals
        self.scratch = scratch
        self.staged = [self._stage(src) for src in originals]

    def _stage(self, src: Path) -> str:
        dst = self.scratch / src.name
        try:
            dst.symlink_to(src.resolve())
        except OSError:  # no symlinks here (some filesystems): a copy does the same job
            shutil.copyfile(src, dst)
        return str(dst)

    def _unstage(self, text: str) -> str:
        """xprof's messages name the scratch links; name the user's files instead."""
        for staged, original in zip(self.staged, self.originals, strict=True):
            text = text.replace(staged, str(original))
        return text.replace(str(self.scratch), str(self.originals[0].parent))

    def tool(self, name: str, params: dict[str, Any] | None = None, files: list[int] | None = None
             ) -> Any:
        """One tool's output, parsed from JSON. `files` picks staged files by index (default all)."""
        from xprof.convert import raw_to_tool_data

        paths = [self.staged[i] for i in files] if files is not None else self.staged
        named = ", ".join(self._unstage(p) for p in paths)
        failures: list[str] = []
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data(
                paths, name, {"use_saved_result": False, **(params or {})}, _capturing(failures))
        except Exception as exc:  # any converter crash is this tool's failure
            raise ToolError(f"{name} conversion raised {type(exc).__name__}: "
                            f"{one_line(self._unstage(str(exc)))} ({named})") from exc
        if failures:
            raise ToolError(f"{name} conversion failed: {one_line(self._unstage(failures[0]))}")
        if not data:
            raise ToolError(f"{name} returned no data for {named}")
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ToolError(f"{name} returned output that is not JSON for {named}: {exc}") from exc


def _capturing(failures: list[str]) -> Callable[..., tuple[Any, bool]] | None:
    """xprof's converter call, keeping the error text it returns on failure (xprof drops it).

    None (xprof's default call, no message) if this xprof lays its internals out differently.
    """
    try:
        from xprof.convert import _pywrap_profiler_plugin as plugin
    except ImportError:
        return None

    def call(paths: Any, tool: str, options: Any) -> tuple[Any, bool]:
        data, ok = plugin.xspace_to_tools_data(paths, tool, options)
        if not ok:
            failures.append(data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data))
        return data, ok

    return call


@contextmanager
def converting(files: list[Path]) -> Iterator[Converter]:
    """A Converter for `files` whose scratch directory is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-xprof-") as scratch:
        yield Converter(files, Path(scratch))
