"""Run directories for comparison: the candidate's records, the baseline store, the reports.

`bench compare` and `bench nightly` both judge one run against a store of earlier runs of its
scenario; this is the file side they share, so `compare.py` stays pure.
"""

from __future__ import annotations

import json
import shutil
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import fingerprint, results
from bench.compare.detector import RELATIVE_NOTE, Comparison
from bench.errors import BenchError, file_errors
from bench.record.model import VariantRecord

Run = list[VariantRecord]  # a run's records (results.RunRecords as read)


class RecordsCache:
    """Run directories' records, read on demand; the few most recently used are kept."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self._runs: OrderedDict[Path, Run] = OrderedDict()

    def __call__(self, run_dir: Path) -> Run:
        if run_dir in self._runs:
            self._runs.move_to_end(run_dir)
            return self._runs[run_dir]
        records = results.read_records(run_dir)
        self._runs[run_dir] = records
        while len(self._runs) > self.keep:
            self._runs.popitem(last=False)
        return records


class StoredRuns(Sequence[Run]):
    """The records of earlier runs, read only when a comparison looks at one of them."""

    def __init__(self, dirs: Sequence[Path], read: Callable[[Path], Run]) -> None:
        self.dirs, self.read = dirs, read

    def __len__(self) -> int:
        return len(self.dirs)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self.read(d) for d in self.dirs[index]]
        return self.read(self.dirs[index])


@dataclass
class Store:
    """The runs of one scenario in a baseline store (a run directory or a folder of them)."""

    dirs: list[Path]  # oldest first
    history: Sequence[Run]  # their records, read when looked at (StoredRuns)
    elsewhere: list[Path] = field(default_factory=list)  # runs on other machines, set aside

    @property
    def newest(self) -> Path:
        return self.dirs[-1]

    @property
    def label(self) -> str:
        """How a comparison names its baseline: one run, or the store its typical runs came from."""
        if len(self.dirs) == 1:
            return self.newest.name
        return f"{self.newest.parent.name}/ (typical of {len(self.dirs)} runs)"


def candidate(run_dir: Path) -> tuple[results.RunRecords, str]:
    """The records of the run to judge, and its scenario's name."""
    if not results.is_run_dir(run_dir):
        raise BenchError(f"{run_dir}: not a bench run directory")
    results.read_metadata(run_dir)
    records = results.read_records(run_dir)
    if not records:
        raise BenchError(f"{run_dir}: has no records"
                         + (f" ({len(records.damage)} damaged line(s))" if records.damage else ""))
    return records, str(records[0].variant.scenario_name)


def refuse_damaged(run_dir: Path, records: results.RunRecords) -> None:
    """A gate never passes a damaged candidate: its verdicts leave out what the damaged lines
    held (each named in a warning as it was read). One BenchError line, exit 2: a fault, never a
    regression."""
    if records.damage:
        raise BenchError(f"{run_dir / results.RECORDS_FILE}: {len(records.damage)} damaged "
                         "line(s) left out of the verdicts; a damaged candidate cannot pass")


def runs_of_scenario(store: Path, scenario: str, exclude: Path | None = None) -> list[Path]:
    """Run directories of `scenario` in a store (one run dir, or a folder of them), oldest first;
    a damaged run is left out with a warning (`readable_runs`)."""
    runs = [r for r in results.find_run_dirs([store])
            if exclude is None or r.resolve() != exclude.resolve()]
    return sorted((r for r, (_, variants) in results.readable_runs(runs, results.read_metadata)
                   if any(v.get("scenario_name") == scenario for v in variants)),
                  key=lambda r: r.name)


def load_store(store: Path, scenario: str, exclude: Path,
               select: Callable[[Run], Run] | None = None,
               machine: Mapping[str, Any] | None = None) -> Store | None:
    """The store's runs of `scenario` other than `exclude`; None when there are none. Their
    records are read as a comparison looks at them, and only the last few are kept in memory;
    `select` picks, of each run read, the records a comparison judges. With `machine`
    (fingerprint.machine), runs on another machine are set aside in `Store.elsewhere`: the same
    code runs at another speed there, so they are no baseline (`dirs` may then be empty)."""
    dirs = runs_of_scenario(store, scenario, exclude=exclude)
    if not dirs:
        return None
    elsewhere = []
    if machine is not None:
        elsewhere = [d for d in dirs if not fingerprint.same_machine(run_machine(d), machine)]
        dirs = [d for d in dirs if d not in elsewhere]
    cache = RecordsCache()
    return Store(dirs, StoredRuns(dirs, cache if select is None else lambda d: select(cache(d))),
                 elsewhere)


def run_machine(run_dir: Path) -> dict[str, Any]:
    """The machine a run ran on (fingerprint.machine of its environment.json; {} without one)."""
    return fingerprint.machine(results.read_environment(run_dir))


def no_baseline_here(store: Path, scenario: str, run_dir: Path, found: Store) -> str:
    """Why a store with runs of `scenario` holds no baseline for `run_dir`: all ran elsewhere."""
    others = sorted({fingerprint.describe_machine(run_machine(d)) for d in found.elsewhere})
    return (f"{store}: no run of scenario '{scenario}' on this run's machine "
            f"({fingerprint.describe_machine(run_machine(run_dir))}); its "
            f"{len(found.elsewhere)} run(s) ran on {'; '.join(others)}")


def write_reports(result: Comparison, store: Store, run_dir: Path, markdown: Path | None,
                  json_path: Path | None) -> None:
    """The comparison as Markdown and as JSON, where asked for."""
    if markdown:
        results.write_text_atomic(markdown, to_markdown(result, store.label, str(run_dir)))
    if json_path:
        results.write_text_atomic(json_path, json.dumps(
            {"baseline": str(store.newest), "candidate": str(run_dir), **result.to_dict()},
            indent=2))


def to_markdown(comparison: Comparison, baseline: str, candidate: str) -> str:
    """The comparison as the Markdown `--markdown` writes (a CI job's summary, a ticket)."""
    lines = ["# bench compare", "", f"- baseline: `{baseline}`", f"- candidate: `{candidate}`",
             f"- verdict: **{'REGRESSION' if comparison.regressed else 'no regression'}**", ""]
    if comparison.refused:
        return "\n".join(lines + [f"Refused: {comparison.refused}", ""])
    if comparison.measured_differently:
        lines += [f"> **Warning:** {comparison.measured_differently}", ""]
    if comparison.caveat:
        lines += [f"> Caveat: {comparison.caveat}", ""]
    if comparison.relative:
        lines += [f"> {RELATIVE_NOTE}", ""]
    targets = comparison.has_targets
    head = ["variant", "status", "step-time ratio (cand/base)", "CI", "p", "min effect",
            *(["examples to target"] if targets else []), "note"]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for v in comparison.verdicts:
        ratio = f"{v.ratio:.3f}" if v.ratio is not None else "-"
        ci = f"[{v.ci_low:.3f}, {v.ci_high:.3f}]" if v.ci_low is not None else "-"
        p = f"{v.p_value:.2g}" if v.p_value is not None else "-"
        cells = [v.key, v.status, ratio, ci, p, f"{v.min_effect:.0%}",
                 *([v.examples_text] if targets else []), v.note.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


TRACES = "traces"


def prune_traces(store: Path, keep: int) -> list[Path]:
    """Delete the profiler traces of all but the newest `keep` runs of each scenario in the store
    (a run directory or a folder of them); every run's records, logs and metadata stay, so the
    gate, `bench compare` and the report's trend see the whole history. Returns the runs pruned.

    A run's traces are about 5 MB for the default scenario: a year of nightly runs would keep
    2 GB of them, where its records take about 140 MB.
    """
    if keep < 0:
        raise BenchError(f"--keep-traces must be 0 or more, not {keep}")
    by_scenario: dict[str, list[Path]] = {}
    for run, variants in results.readable_runs(results.find_run_dirs([store]),
                                               results.read_variants):
        name = str(variants[0].get("scenario_name")) if variants else run.name
        by_scenario.setdefault(name, []).append(run)
    pruned = []
    for runs in by_scenario.values():
        runs.sort(key=lambda r: r.name)  # run names carry their start time
        for run in runs[:len(runs) - keep]:
            traced = [d for d in (run, *results.confirmation_dirs(run)) if (d / TRACES).is_dir()]
            for d in traced:
                with file_errors(d / TRACES, "remove"):
                    shutil.rmtree(d / TRACES)
            if traced:
                pruned.append(run)
    return pruned
