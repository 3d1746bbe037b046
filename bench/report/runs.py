"""Run directories → the plain objects the report pages are built from.

Everything here is read-only over the run directory and tolerant of partial runs (an interrupted
run has fewer records than variants; a run from an older bench may lack newer fields): a report
must degrade, never crash, on what `bench run` left behind.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import results
from bench.compare.noise import noise_floor
from bench.interrupts import interrupted_note
from bench.record.model import VariantRecord, scenario_data_sources
from bench.record.variant import RecordedVariant
from bench.scaling import add_scaling_efficiency


@dataclass
class RunView:
    """One run directory with its records (scaling efficiency filled in) and its metadata."""

    path: Path
    records: list[VariantRecord]
    environment: dict[str, Any]
    variants: list[dict[str, Any]]
    scenario_name: str
    description: str
    page: str = ""  # file name of this run's page in the site
    scenario_page: str = ""
    baselines: dict[str, VariantRecord] = field(default_factory=dict)  # variant id → baseline
    noise_floor: dict[str, Any] | None = None  # the A/A control twins' difference (compare.noise)
    damage: list[str] = field(default_factory=list)  # lines of records.jsonl left out, one each
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """`compute()` once per view: a figure that several parts of one page read."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def started_at(self) -> str:
        return str(self.environment.get("started_at") or "")

    @property
    def commit(self) -> str:
        commit = str(self.environment.get("git_commit") or "")
        return commit[:10] + ("+dirty" if commit.endswith("+dirty") else "") if commit else "-"

    @property
    def machine(self) -> str:
        env = self.environment
        kinds = sorted({str(r.device_kind) for r in self.ok})
        parts = [str(env.get("hostname") or "?"), str(env.get("cpu_model") or ""),
                 f"{env.get('cpu_count')} cores" if env.get("cpu_count") else "",
                 "/".join(kinds)]
        return ", ".join(p for p in parts if p)

    @property
    def ok(self) -> list[VariantRecord]:
        return [r for r in self.records if r.ok]

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    @property
    def interrupted(self) -> str | None:
        """"interrupted (SIGINT) after 3 of 12 variants" for a run that was (None: it was not)."""
        return self.memo("interrupted", lambda: interrupted_note(self.path))

    @property
    def not_run(self) -> list[str]:
        """Variants planned but without a record (the run was interrupted or is still going)."""
        done = {r.variant_id for r in self.records}
        return [v["id"] for v in self.variants if v.get("id") not in done]

    @property
    def data_sources(self) -> list[str]:
        return scenario_data_sources(self.records)

    @property
    def fallback_reasons(self) -> list[str]:
        return sorted({str(r.data_fallback_reason) for r in self.records
                       if r.data_fallback_reason})


def _scenario_meta(run_dir: Path, variants: list[dict[str, Any]]) -> tuple[str, str]:
    """Name and description from the run's copy of the scenario (the raw TOML: never re-validated,
    so a report of an old run still renders after the schema moves on)."""
    name = str(variants[0].get("scenario_name")) if variants else run_dir.name
    description = ""
    try:
        meta = tomllib.loads((run_dir / results.SCENARIO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # none, or damaged: the variants' name stands
        return name, description
    meta = meta.get("scenario")
    if isinstance(meta, dict):
        name = str(meta.get("name") or name)
        description = str(meta.get("description") or "")
    return name, description


# How a variant's strategy is laid out: what it may differ from its baseline in.
_STRATEGY_SHAPE = ("strategy", "replicas", "workers", "ps", "devices_per_worker", "cross_device_ops",
                   "collective", "distribute_dataset", "batch_rule", "global_batch")


def baseline_key(variant: RecordedVariant) -> tuple[Any, ...]:
    """Which baseline a variant is compared with: the single-device run of the same API/precision."""
    return variant.key(without=_STRATEGY_SHAPE)


def _loose_key(variant: RecordedVariant) -> tuple[Any, ...]:
    """What a baseline must share at the least: the API, the precision and the Keras flavour."""
    return tuple(variant.axis(axis) for axis in ("api", "precision", "keras"))


def find_baselines(records: list[VariantRecord]) -> dict[str, VariantRecord]:
    """variant id → the ok default/one_device record with the same API, precision and per-replica
    batch (falling back to the same API and precision)."""
    bases = [r for r in records if r.ok and r.counts_as_variant and r.variant.on_baseline_strategy]
    keyed = [(baseline_key(b.variant), _loose_key(b.variant), b) for b in bases]
    out: dict[str, VariantRecord] = {}
    for rec in records:
        if not rec.ok:
            continue
        key, loose_key = baseline_key(rec.variant), _loose_key(rec.variant)
        exact = [b for k, _, b in keyed if k == key]
        loose = [b for _, k, b in keyed if k == loose_key]
        if exact or loose:
            out[str(rec.variant_id)] = (exact or loose)[0]
    return out


def versus_baseline(record: VariantRecord, base: VariantRecord | None) -> float | None:
    """The headline ratio of a variant to its single-device baseline (find_baselines); None for a
    variant that ran a single-device strategy itself (the baselines, the A/A twin, whose ratio is
    the noise floor) or the yardstick, and where either has no headline."""
    if (base is None or record.variant.on_baseline_strategy or record.control_role == "yardstick"
            or not record.has_throughput or not record.headline or not base.headline):
        return None
    return record.headline_ratio(base)


Head = tuple[dict[str, Any], list[dict[str, Any]], str, str]  # environment, variants, name, text


def read_head(run_dir: Path) -> Head:
    """The run's environment, variants, scenario name and description: its small files only
    (one BenchError line when one is damaged, or its records.jsonl cannot be opened)."""
    environment, variants = results.read_metadata(run_dir)
    name, description = _scenario_meta(run_dir, variants)
    return environment, variants, name, description


def load_run(run_dir: Path, records: list[VariantRecord] | None = None,
             page: bool = True, head: Head | None = None) -> RunView:
    """The run directory as a view; `records`, when given, are its records read already. With
    `page` false, without what only its page shows (scaling efficiency, baselines, the noise
    floor): enough for its line in the index and its points on the trend. `head`:
    its small files (`read_head`), when read already."""
    environment, variants, name, description = head or read_head(run_dir)
    records = results.read_records(run_dir) if records is None else records
    view = RunView(path=run_dir, records=list(records), environment=environment,
                   variants=variants, scenario_name=name, description=description,
                   damage=records.damage if isinstance(records, results.RunRecords) else [])
    if page:
        view.records = records = add_scaling_efficiency(records)
        view.baselines = find_baselines(records)
        view.noise_floor = noise_floor(records)
    return view


def load_run_views(paths: list[Path]) -> list[RunView]:
    """Every run under the given paths, oldest first (run directory names sort by start time); a
    damaged run is left out with a warning (results.readable_runs)."""
    runs = [load_run(p, head=head)
            for p, head in results.readable_runs(results.find_run_dirs(paths), read_head)]
    return sorted(runs, key=lambda r: (r.started_at, r.name))
