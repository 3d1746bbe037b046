"""The upgrade gate: `bench compare BASELINE CANDIDATE --baseline-env X --candidate-env Y`.

It takes the variants of environment X from the baseline run (or store) and those of environment Y
from the candidate run, and judges each variant of Y against the same variant of X with the
detector's own test (`compare_records`: Mann-Whitney, the bootstrap interval of the median step
ratio, the minimum effect). BASELINE and CANDIDATE may be the same run: an interleaved run of both
environments is the fairest comparison there is, since the machine's drift lands on both alike.
Pure functions over records, like the detector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.compare.detector import Comparison
from bench.errors import BenchError
from bench.record.model import VariantRecord

Run = list[VariantRecord]
# How the command line names "no [environment]": the interpreter that ran bench (a nightly's
# pinned variants beside an upgrade candidate)
NO_ENVIRONMENT = "none"


@dataclass
class EnvironmentComparison(Comparison):
    """A comparison between two environments; `same_run`: both sides ran in one run's rounds."""

    baseline_env: str = ""
    candidate_env: str = ""
    same_run: bool = False

    @property
    def caveat(self) -> str | None:
        if self.same_run:
            return None  # interleaved with each other: no run-to-run drift between the sides
        return super().caveat

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "baseline_env": self.baseline_env,
                "candidate_env": self.candidate_env, "same_run": self.same_run}


def labels(records: Run) -> list[str]:
    """The environments a run's variants ran in, as the command line names them."""
    return list(dict.fromkeys(_label(r) for r in records if r.counts_as_variant))


def _label(record: VariantRecord) -> str:
    return str(record.variant.axis("environment") or NO_ENVIRONMENT)


def of_environment(records: Run, label: str, what: str, where: str) -> Run:
    """The records of environment `label` (and the run's yardstick, which measures the machine
    in the same rounds), each with its environment taken out of its identity, so the same
    variant matches across environments. BenchError naming `what` when none ran there."""
    chosen = [r for r in records if _label(r) == label]
    if not chosen:
        raise BenchError(f"{what}: no variant of {where} ran in environment '{label}' "
                         f"(it has: {', '.join(labels(records)) or 'none'})")
    chosen += [r for r in records if r.control_role == "yardstick" and r not in chosen]
    return [r.model_copy(update={"variant": r.variant.model_copy(update={"environment": None})})
            for r in chosen]


def gate(baseline: list[Run], candidate: Run, baseline_env: str, candidate_env: str,
         where: tuple[str, str], same_run: bool, **judge: Any) -> EnvironmentComparison:
    """Judge `candidate`'s variants of `candidate_env` against `baseline`'s (a store's runs,
    oldest first) of `baseline_env`, with `compare_records`' own test and options."""
    from bench.compare.detector import compare_records

    runs = [run for run in baseline if baseline_env in labels(run)] or baseline[-1:]
    history = [of_environment(run, baseline_env, "--baseline-env", where[0]) for run in runs]
    chosen = of_environment(candidate, candidate_env, "--candidate-env", where[1])
    result = compare_records(history[-1], chosen, history=history if len(history) > 1 else None,
                             **judge)
    return EnvironmentComparison(**vars(result), baseline_env=baseline_env,
                                 candidate_env=candidate_env, same_run=same_run)
