"""Steps in a scenario's history: each run judged against the runs before it as `bench nightly`
judges a night against its store, so the trend marks the slowdowns the nightly gate would flag.

With fewer than `runlevel.MIN_STORE_RUNS` earlier runs, a run is judged as `bench compare STORE
RUN` judges it (step samples against the typical stored run, then the run-to-run interval); from
then on by whole runs: its run figure against the last `runlevel.STORE_RUNS` runs' figures, at
the gate's deciding bar. A night the gate re-ran keeps its re-runs in its run directory
(`results.CONFIRMATIONS_DIR`), and is judged with them, as the gate judged it
(`runlevel.decide_night`), so the trend marks what the gate flagged. Each run's figures are
computed once (bench.compare.figures), and a run's steps depend only on the runs before it, so
they are computed once per run too: a store's history costs O(runs) per variant, and one more
run costs one more judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.compare import runlevel
from bench.compare.detector import Comparison, Verdict, compare_records
from bench.compare.figures import RunFigures
from bench.record.model import VariantRecord

MARKED = ("regression", "improvement")
Run = list[VariantRecord]


@dataclass(frozen=True)
class Step:
    run: str
    variant_id: str
    verdict: Verdict
    reruns: int = 0  # the night's confirmation re-runs behind the verdict

    @property
    def text(self) -> str:
        v = self.verdict
        ci = f", CI {v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else ""
        with_reruns = f" with its {self.reruns} confirmation re-run(s)" if self.reruns else ""
        if v.p_value is None:  # judged by whole runs, as the nightly gate judges them
            return (f"{v.status}: step time ×{v.ratio:.3f}{ci} against the {v.history_runs} runs "
                    f"before it, judged by whole runs{with_reruns} (run-to-run sd "
                    f"{v.between_run_cv:.1%})")
        return (f"{v.status}: step time ×{v.ratio:.3f}{ci}, p={v.p_value:.2g} against the "
                f"previous run" + (f" ({v.history_runs} runs of history)" if v.history_runs else "")
                + (f", confirmed by its {self.reruns} re-run(s)" if self.reruns else ""))

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "variant_id": self.variant_id, "verdict": asdict(self.verdict),
                "reruns": self.reruns}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        return cls(data["run"], data["variant_id"], Verdict(**data["verdict"]),
                    int(data.get("reruns", 0)))


def judge_run(name: str, records: Run, figures: RunFigures, earlier: Sequence[RunFigures],
              history: Sequence[Run], reruns: Sequence[Run] = ()) -> list[Step]:
    """The regressions and improvements of one run against the runs before it (`earlier`: their
    figures, `history`: their records, oldest first, read only where a comparison needs them),
    with the night's confirmation re-runs (`reruns`) decided as the nightly gate decides them."""
    if not earlier:
        return []
    by_runs = runlevel.usable(earlier)
    # a night the gate re-ran was judged within its run, the re-runs standing in for the
    # run-to-run interval; any other run as `bench compare STORE RUN` judges it
    run_to_run = not by_runs and not reruns

    def rejudge(run: Run) -> Comparison:
        return compare_records(history[-1], run, history=history, history_figures=earlier,
                               always_ci=False, run_to_run=False)

    comparison = compare_records(history[-1], records, history=history, history_figures=earlier,
                                 always_ci=False, run_to_run=run_to_run,
                                 decided_elsewhere=runlevel.decided(earlier, figures)
                                 if by_runs else ())
    if comparison.refused:
        return []
    comparison = runlevel.decide_night(comparison, earlier, figures, reruns, rejudge)
    return [Step(name, v.key, v, len(reruns)) for v in comparison.verdicts if v.status in MARKED]
