"""Judging runs against each other relative to the yardstick measured in their own rounds.

A shared machine drifts between runs as it does within one: a whole nightly run can land in a
slow spell, and a re-run started right after shares it, so the spell passes for a regression and
then confirms itself. Every interleaved run therefore carries the yardstick, a fixed workload
(`bench.runner.yardstick`) that runs in the same rounds as the variants. Dividing each timed
window of a variant by the yardstick's median step in the same round turns step times into
"yardstick steps": a machine-wide slow spell slows both and cancels, while a slower model, the
code under test, leaves the yardstick alone and shows.

Only used when every run of a comparison has an ok yardstick whose rounds every compared variant
shared (one batch of live variants, the same number of windows); otherwise the comparison stays
in seconds, as before.
"""

from __future__ import annotations

import statistics

from bench.record.model import VariantRecord

Run = list[VariantRecord]


def _yardstick(run: Run) -> VariantRecord | None:
    return next((r for r in run if r.control_role == "yardstick" and r.ok), None)


def round_medians(run: Run) -> list[float] | None:
    """The yardstick's median step in each round, when every ok variant of the run ran in its
    rounds (None otherwise)."""
    stick = _yardstick(run)
    if stick is None or not stick.interleave:
        return None
    windows = stick.timed_windows
    if not windows or not all(windows):
        return None
    for rec in run:
        if not rec.ok:
            continue
        batch = (rec.interleave.batch if rec.interleave else None) or []
        if stick.variant_id not in batch or len(rec.timed_windows) != len(windows):
            return None
    return [statistics.median(w) for w in windows]


def relative_record(rec: VariantRecord, medians: list[float]) -> VariantRecord:
    """A shallow copy of an ok record with its timed samples in yardstick steps."""
    timed = rec.timed_windows
    if not rec.ok or not timed or rec.samples is None:
        return rec
    samples = rec.samples.model_copy(update={"timed": [
        [s / median for s in window] for window, median in zip(timed, medians, strict=True)]})
    return rec.model_copy(update={"samples": samples})


def _relative(run: Run, medians: list[float]) -> Run:
    return [relative_record(rec, medians) for rec in run]


def relative_runs(runs: list[Run]) -> tuple[list[Run], bool]:
    """Every run with its timed samples in yardstick steps, and True; or the runs unchanged and
    False when any of them cannot be judged that way (all or none: units must not mix)."""
    medians = [round_medians(run) for run in runs]
    if any(m is None for m in medians):
        return runs, False
    return [_relative(run, m) for run, m in zip(runs, medians, strict=True)], True


def relative_to_yardstick(base: Run, cand: Run, history: list[Run] | None
                          ) -> tuple[Run, Run, list[Run] | None, bool]:
    """`relative_runs` for a baseline, a candidate and an optional store history."""
    (base_rel, cand_rel, *history_rel), relative = relative_runs([base, cand, *(history or [])])
    return base_rel, cand_rel, (history_rel if history is not None else None), relative
