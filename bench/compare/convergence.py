"""Examples to target judged between two runs: a change that costs convergence is a regression
even at the same speed (pure; records only).

The noise is the seeds' own spread: the candidate needs more examples only when its median lies
above every seed of the baseline and the baseline's median below every seed of the candidate,
by more than the minimum effect. With one seed a side that is one evaluation interval or more
(the interval is the resolution of examples to target).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.record.model import VariantRecord
from bench.record.target import Target


@dataclass(frozen=True)
class Convergence:
    """Examples to target of one variant in both runs, and what the change means."""

    status: str  # regression | improvement | unchanged | lost (no longer reached)
    baseline_examples: float
    candidate_examples: float | None  # None: not reached within the budget
    words: str

    @property
    def ratio(self) -> float | None:
        return (None if self.candidate_examples is None
                else self.candidate_examples / self.baseline_examples)


def _reaches(target: Target) -> bool:
    return target.status == "ok" and target.examples is not None and \
        target.examples.median is not None


def convergence_verdict(base: VariantRecord, cand: VariantRecord,
                        min_effect: float) -> Convergence | None:
    """Examples to target judged: a regression or an improvement when they moved beyond the
    seeds' spread, else unchanged; None when either run has no target to judge."""
    b, c = base.target, cand.target
    if b is None or c is None or not _reaches(b):
        return None
    assert b.examples is not None and b.examples.median is not None
    if c.status == "ok" and not _reaches(c):
        return Convergence("lost", b.examples.median, None,
                           f"no longer reaches {b.metric} {b.value:g} within the budget "
                           f"(baseline: {b.examples.median:,.0f} examples)")
    if not _reaches(c):
        return None
    bs, cs = b.examples, c.examples
    assert cs is not None and cs.median is not None
    ratio = cs.median / bs.median
    words = (f"examples to target ×{ratio:.2f} ({bs.median:,.0f} → {cs.median:,.0f}; seeds "
             f"{bs.low:,.0f}-{bs.high:,.0f} → {cs.low:,.0f}-{cs.high:,.0f})")
    status = "unchanged"
    if cs.median > bs.high and bs.median < cs.low and ratio > 1 + min_effect:
        status = "regression"
    elif cs.median < bs.low and bs.median > cs.high and ratio < 1 - min_effect:
        status = "improvement"
    return Convergence(status, bs.median, cs.median, words)


def joined_status(speed_status: str, moved: Convergence) -> str:
    """A variant's verdict once its examples to target moved: needing more examples is a
    regression even at the same speed, and one that steps faster but needs more still
    regresses; fewer examples make an unchanged speed an improvement."""
    if moved.status in ("regression", "lost"):
        return "regression"
    return "improvement" if speed_status == "unchanged" else speed_status


def examples_text(baseline: float | None, candidate: float | None, ratio: float | None,
                  convergence: str) -> str:
    """Examples to target in both runs and their ratio ("61,440 → 184,320 ×3.00"; "–" without
    a target)."""
    if not convergence or baseline is None:
        return "–"
    if candidate is None:
        return f"{baseline:,.0f} → not reached"
    return f"{baseline:,.0f} → {candidate:,.0f} ×{ratio:.2f}"
