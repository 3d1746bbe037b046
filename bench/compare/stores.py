"""Run directories for comparison: the candidate's records, the baseline store, the reports.

`bench compare` and `bench nightly` both judge one run against a store of earlier runs of its
scenario; this is the file side they share, so `compare.py` stays pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import results
from bench.compare.detector import Comparison, to_markdown
from bench.errors import BenchError


@dataclass
class Store:
    """The runs of one scenario in a baseline store (a run directory or a folder of them)."""

    dirs: list[Path]  # oldest first
    history: list[list[dict[str, Any]]]  # their records

    @property
    def newest(self) -> Path:
        return self.dirs[-1]

    @property
    def label(self) -> str:
        """How a comparison names its baseline: one run, or the store its typical runs came from."""
        if len(self.dirs) == 1:
            return self.newest.name
        return f"{self.newest.parent.name}/ (typical of {len(self.dirs)} runs)"


def candidate(run_dir: Path) -> tuple[list[dict[str, Any]], str]:
    """The records of the run to judge, and its scenario's name."""
    if not results.is_run_dir(run_dir):
        raise BenchError(f"{run_dir}: not a bench run directory")
    records = results.read_records(run_dir)
    if not records:
        raise BenchError(f"{run_dir}: has no records")
    return records, records[0]["variant"]["scenario_name"]


def load_store(store: Path, scenario: str, exclude: Path) -> Store | None:
    """The store's runs of `scenario` other than `exclude`; None when there are none."""
    dirs = results.runs_of_scenario(store, scenario, exclude=exclude)
    return Store(dirs, [results.read_records(d) for d in dirs]) if dirs else None


def write_reports(result: Comparison, store: Store, run_dir: Path, markdown: Path | None,
                  json_path: Path | None) -> None:
    """The comparison as Markdown and as JSON, where asked for."""
    if markdown:
        markdown.write_text(to_markdown(result, store.label, str(run_dir)))
    if json_path:
        json_path.write_text(json.dumps({"baseline": str(store.newest), "candidate": str(run_dir),
                                         **result.to_dict()}, indent=2))
