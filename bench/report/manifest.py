"""What each page of a rendered site was built from, so a re-render writes only what changed.

The manifest (`<site>/.bench-manifest.json`) keeps, per run directory, the stamp of its files
(size and modification time) with the run's summary (bench.report.summaries), and per page the
digest of its inputs. A run whose stamp is unchanged is not read again; a page whose digest is
unchanged and that is still on disk is not written again. The digests start from the render
version: bench's version and all its code, templates and assets, so a new bench re-renders
everything.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import bench
from bench import results
from bench.interrupts import INTERRUPTED_FILE
from bench.report.summaries import RunSummary

MANIFEST = ".bench-manifest.json"
# The files a run's summary and page are made of; a change to any of them re-reads the run.
_RUN_FILES = (results.RECORDS_FILE, results.VARIANTS_FILE, results.ENVIRONMENT_FILE,
              results.SCENARIO_FILE, INTERRUPTED_FILE)


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


@cache
def render_version() -> str:
    """bench's version and the bytes of all its code, templates and assets: a run's summary and
    pages come from the records' model, the comparisons, the machine's fingerprint and more
    besides the report's own code, so any change to bench renders the site anew."""
    h = hashlib.sha256(bench.__version__.encode())
    root = resources.files("bench")
    for relative, item in sorted(_files(root, "")):
        h.update(relative.encode())
        h.update(item.read_bytes())
    return h.hexdigest()[:32]


def _files(root: Any, prefix: str) -> list[tuple[str, Any]]:
    """(path below the package, resource) of every source, template and asset under `root`."""
    found = []
    for item in root.iterdir():
        if item.is_dir():
            found += _files(item, f"{prefix}{item.name}/")
        elif item.name.endswith((".py", ".j2", ".css", ".js")):
            found.append((prefix + item.name, item))
    return found


def run_stamp(run_dir: Path) -> list[Any]:
    stamp = []
    for name in _RUN_FILES:
        try:
            st = (run_dir / name).stat()
            stamp.append([name, st.st_size, st.st_mtime_ns])
        except OSError:
            stamp.append([name, None, None])
    stamp.append(["traces", (run_dir / "traces").is_dir()])  # `bench prune` changes the page
    # a night's confirmation re-runs change how its steps are judged
    stamp.append(["confirmations", [d.name for d in results.confirmation_dirs(run_dir)]])
    return stamp


@dataclass
class Manifest:
    version: str
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> stamp, summary
    pages: dict[str, str] = field(default_factory=dict)  # page -> digest of its inputs

    @classmethod
    def load(cls, site: Path) -> Manifest:
        """The site's manifest, or an empty one (none yet, unreadable, or another version)."""
        version = render_version()
        try:
            data = json.loads((site / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return cls(version)
        if not isinstance(data, dict) or data.get("version") != version:
            return cls(version)
        return cls(version, data.get("runs") or {}, data.get("pages") or {})

    def summary(self, run_dir: Path, stamp: list[Any]) -> RunSummary | None:
        """The run's summary as kept, if its files have not changed since."""
        entry = self.runs.get(str(run_dir))
        if entry is None or entry.get("stamp") != stamp:
            return None
        try:
            return RunSummary.from_json(entry["summary"])
        except (KeyError, TypeError, ValueError):
            return None

    def keep(self, run_dir: Path, stamp: list[Any], summary: RunSummary) -> None:
        self.runs[str(run_dir)] = {"stamp": stamp, "summary": summary.to_json()}

    def current(self, site: Path, page: str, inputs: str) -> bool:
        """Whether `page` was built from `inputs` and is still there."""
        return self.pages.get(page) == inputs and (site / page).exists()

    def save(self, site: Path) -> None:
        results.write_text_atomic(site / MANIFEST, json.dumps(
            {"version": self.version, "runs": self.runs, "pages": self.pages}))
