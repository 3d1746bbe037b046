"""What measuring costs the figures: bench's per-step observation and the profiler, each tested
against the same steps unobserved, side by side. Pure: the worker measures, this judges.

Observation: every turn runs an observed window (each step waits for its result on the host
before the next starts: the per-step samples) and an unobserved window (one sync, at its end:
the headline), one right after the other, in alternating order. The median of the turns' ratios
of their time per step, with the distribution-free interval of a median (bench.timing.ratio_interval),
says what observing costs; a variant is flagged only when the whole interval lies above
OBSERVER_FLAG_RATIO, so an unchanged run on a quiet machine is flagged about as often as the
interval's confidence allows, and never with too few turns for the interval to hold (fewer than
six: a `--quick` run).

The profiler: the traced turn runs an observed window without the profiler, then the traced
window of as many steps; the median ratio of their steps, step k against step k, with the same
interval over the steps.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.record.model import OBSERVER_FLAG_RATIO
from bench.timing import median_interval_holds, ratio_interval

CONFIDENCE = 0.95


def summary(unobserved_s: list[float], observed_s: list[float]) -> dict[str, Any]:
    """Observed ÷ unobserved time per step (each turn's window seconds ÷ its steps) of the
    turns that ran both (> 1: observing slowed the steps)."""
    turns = min(len(unobserved_s), len(observed_s))
    if turns == 0:
        return {"status": "skipped", "reason": "no turn ran both windows"}
    ratio, low, high = ratio_interval(observed_s[:turns], unobserved_s[:turns], CONFIDENCE)
    return {"status": "ok", "ratio": ratio, "interval": [low, high], "confidence": CONFIDENCE,
            "turns": turns, "flagged": _over_limit(turns, low)}


def profiler_cost(untraced: list[float], traced: list[float]) -> dict[str, Any] | None:
    """Traced ÷ untraced time per step over two windows run side by side, with the interval of
    the median ratio (None without both windows)."""
    steps = min(len(untraced), len(traced))
    if steps == 0:
        return None
    ratio, low, high = ratio_interval(traced[:steps], untraced[:steps], CONFIDENCE)
    return {"overhead_ratio": ratio, "overhead_interval": [low, high],
            "overhead_flagged": _over_limit(steps, low),
            "untraced_median_s": statistics.median(untraced)}


def _over_limit(pairs: int, low: float) -> bool:
    """Whether the interval of the median ratio over `pairs` pairs lies wholly above the limit:
    never where so few pairs cannot hold a median with CONFIDENCE."""
    return median_interval_holds(pairs, CONFIDENCE) and low > OBSERVER_FLAG_RATIO
