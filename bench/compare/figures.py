"""A run's per-variant figures, computed once per run: what the gate, `bench compare` and the
report's trend read of every stored run.

Judging a run against a store needs, of each earlier run, only a few numbers per variant: its
median step and its run figure (bench.compare.runlevel), in seconds and in yardstick steps, its
status, and the run's device kinds and data sources. Those are computed here once per run, from
the timed samples with numpy, and can be kept (`to_json`) beside a rendered site, so a store's
history costs a pass over each run once instead of once per later run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.compare.yardstick import round_medians
from bench.record.model import VariantRecord

Run = list[VariantRecord]
TRIM = 0.2  # share of windows a run figure drops at each end: robust to a burst


def identity(record: VariantRecord) -> tuple[Any, ...]:
    """What makes two records the same variant: its axes and model (device kind and data source
    are checked run-wide: comparing across them is refused)."""
    return (record.variant.scenario_name, *record.variant.key())


def _windows(record: VariantRecord) -> list[np.ndarray]:
    return [np.asarray(w, dtype=float) for w in record.timed_windows if len(w)]


def median_step_s(record: VariantRecord) -> float | None:
    """Median of all timed steps of an ok record; None when it has none."""
    windows = _windows(record) if record.ok else []
    return float(np.median(np.concatenate(windows))) if windows else None


def _trimmed_log_mean(window_medians: np.ndarray) -> float:
    logs = np.sort(np.log(window_medians))
    cut = int(len(logs) * TRIM)
    return float(logs[cut:len(logs) - cut].mean())


def run_figure(record: VariantRecord) -> float | None:
    """Log of the variant's typical window in this run: the trimmed mean of its windows' log
    median step; None for a record without timed samples."""
    if not record.ok:
        return None
    windows = _windows(record)
    if not windows:
        return None
    return _trimmed_log_mean(np.asarray([float(np.median(w)) for w in windows]))


@dataclass
class VariantFigures:
    """One variant of one run. Figures are (in seconds, in yardstick steps); the second is None
    when the run cannot be judged relative to its yardstick."""

    variant_id: str
    status: str
    min_effect: float | None
    median: tuple[float | None, float | None] = (None, None)
    figure: tuple[float | None, float | None] = (None, None)

    def median_in(self, relative: bool) -> float | None:
        return self.median[1] if relative else self.median[0]

    def figure_in(self, relative: bool) -> float | None:
        return self.figure[1] if relative else self.figure[0]


@dataclass
class RunFigures:
    """Every counted variant of one run (controls left out), by identity."""

    relative: bool  # the run has an ok yardstick whose rounds every ok variant shared
    variants: dict[tuple[Any, ...], VariantFigures] = field(default_factory=dict)
    device_kinds: tuple[str, ...] = ()
    data_sources: tuple[str, ...] = ()
    yardstick: float | None = None  # the yardstick's own run figure, in seconds, when relative

    def named(self, variant_id: str) -> VariantFigures | None:
        """The variant of that id (the last, as a dict by id would keep)."""
        found = [v for v in self.variants.values() if v.variant_id == variant_id]
        return found[-1] if found else None

    def to_json(self) -> dict[str, Any]:
        return {"relative": self.relative, "device_kinds": list(self.device_kinds),
                "data_sources": list(self.data_sources), "yardstick": self.yardstick,
                "variants": [[list(key), asdict(v)] for key, v in self.variants.items()]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunFigures:
        variants = {tuple(key): VariantFigures(
            v["variant_id"], v["status"], v["min_effect"], tuple(v["median"]), tuple(v["figure"]))
            for key, v in data["variants"]}
        return cls(data["relative"], variants, tuple(data["device_kinds"]),
                   tuple(data["data_sources"]), data.get("yardstick"))


def _step_figures(record: VariantRecord, medians: np.ndarray | None
                  ) -> tuple[tuple[float | None, float | None], tuple[float | None, float | None]]:
    """(median step, run figure), each in seconds and in yardstick steps (`medians`: the
    yardstick's median step per round)."""
    timed = record.timed_windows
    if not record.ok or not any(len(w) for w in timed):
        return (None, None), (None, None)
    if len({len(w) for w in timed}) == 1:  # the usual case: equal windows, one array
        steps = np.asarray(timed, dtype=float)
        per_window = np.median(steps, axis=1)
        median_s = float(np.median(steps))
        relative = steps / medians[:, None] if medians is not None else None
        median_rel = float(np.median(relative)) if relative is not None else None
        figure_rel = (_trimmed_log_mean(per_window / medians) if medians is not None else None)
    else:
        windows = [np.asarray(w, dtype=float) for w in timed]
        present = [w for w in windows if len(w)]
        per_window = np.asarray([float(np.median(w)) for w in present])
        median_s = float(np.median(np.concatenate(present)))
        median_rel = figure_rel = None
        if medians is not None:
            scaled = [w / m for w, m in zip(windows, medians, strict=True)]
            median_rel = float(np.median(np.concatenate([w for w in scaled if len(w)])))
            figure_rel = _trimmed_log_mean(np.asarray([float(np.median(w))
                                                       for w in scaled if len(w)]))
    return (median_s, median_rel), (_trimmed_log_mean(per_window), figure_rel)


def run_figures(records: Run) -> RunFigures:
    """The run's figures: one pass over its samples."""
    rounds = round_medians(records)
    medians = np.asarray(rounds, dtype=float) if rounds is not None else None
    out = RunFigures(relative=rounds is not None,
                     yardstick=_trimmed_log_mean(medians) if medians is not None else None)
    counted = [r for r in records if r.counts_as_variant]
    for rec in counted:
        key = identity(rec)
        if key in out.variants:  # the first record of an identity is the one compared
            continue
        median, figure = _step_figures(rec, medians)
        out.variants[key] = VariantFigures(
            rec.variant_id if rec.variant_id is not None else str(key), str(rec.status),
            rec.variant.min_effect, median, figure)
    ok = [r for r in counted if r.ok]
    out.device_kinds = tuple(sorted({str(r.device_kind) for r in ok}))
    out.data_sources = tuple(sorted({str(r.data_source) for r in ok}))
    return out
