"""Re-runs of a regression's suspects: a slowdown counts only where every re-run shows it."""

from __future__ import annotations

from bench.compare.detector import Comparison


def confirm(first: Comparison, reruns: list[Comparison]) -> Comparison:
    """Keep a regression only if every re-run of the candidate's variant regresses too.

    Interference on a shared machine only ever slows steps down, and it comes in bursts of tens
    of seconds: a burst during the candidate's variant looks like a regression, but it rarely
    hits the same variant again in re-runs started later. A real slowdown is there every time.
    Re-runs are separate runs of the suspect variants, judged against the same baseline.
    """
    if not reruns:
        return first
    by_key = [{v.key: v for v in rerun.verdicts} for rerun in reruns]
    for verdict in first.verdicts:
        if verdict.status != "regression":
            continue
        again = [runs.get(verdict.key) for runs in by_key]
        ratios = ", ".join(f"{v.ratio:.3f}" if v and v.ratio else "-" for v in again)
        held = sum(1 for v in again if v is not None and v.status == "regression")
        if held == len(again):
            verdict.add_note(f"confirmed by {held} re-run(s) (ratios {ratios})")
        else:
            verdict.status = "unchanged"
            verdict.add_note(f"not confirmed: {held} of {len(again)} re-run(s) regressed "
                             f"(ratios {ratios}); a burst of interference, most likely")
    first.confirmations = len(reruns)
    return first
