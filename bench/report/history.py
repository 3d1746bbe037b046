"""Steps in a scenario's history: each run judged against the runs before it, as `bench compare`
judges a candidate against a baseline store, so the trend marks the same slowdowns the nightly
gate would flag."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.compare.detector import Verdict, compare_records
from bench.report.runs import RunView

MARKED = ("regression", "improvement")


@dataclass(frozen=True)
class Step:
    run: str
    variant_id: str
    verdict: Verdict

    @property
    def text(self) -> str:
        v = self.verdict
        ci = f", CI {v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else ""
        return (f"{v.status}: step time ×{v.ratio:.3f}{ci}, p={v.p_value:.2g} against the "
                f"previous run" + (f" ({v.history_runs} runs of history)" if v.history_runs else ""))


def detect_steps(runs: Sequence[RunView]) -> list[Step]:
    """Regressions and improvements of each run against its predecessors (oldest first)."""
    steps = []
    for i in range(1, len(runs)):
        comparison = compare_records(runs[i - 1].records, runs[i].records,
                                     history=[r.records for r in runs[:i]], always_ci=False)
        if comparison.refused:
            continue
        steps += [Step(runs[i].name, v.key, v) for v in comparison.verdicts if v.status in MARKED]
    return steps
