"""The run's own noise floor, from its A/A control: the baseline and its twin ran the same code in
the same rounds, so whatever separates their headline figures is the machine, not the code.

A difference between two variants of the run that is within this floor is not a finding. The
interval is Student's t over the rounds (each round holds one window of each twin, run moments
apart), so it reflects how much the machine moved between rounds: over the means of batches of
consecutive rounds (`bench.timing.block_length`), so that drift lasting a few rounds widens it
instead of passing for independent rounds. A percentile bootstrap of a dozen rounds is too
narrow for the confidence it states (measurements.md#noise-floor-interval).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.compare.tdist import t_quantile
from bench.record.model import VariantRecord
from bench.timing import block_length

CONFIDENCE = 0.95


def control_pair(records: list[VariantRecord]) -> tuple[VariantRecord, VariantRecord] | None:
    """The ok (baseline, twin) records of the run's A/A control, if both measured."""
    by_role = {r.control_role: r for r in records if r.ok and r.window_rates}
    if "baseline" in by_role and "twin" in by_role:
        return by_role["baseline"], by_role["twin"]
    return None


def noise_floor(records: list[VariantRecord]) -> dict[str, Any] | None:
    """How far the control twins' headline throughputs differ, in percent, with its interval
    over the rounds; None when the run has no measured control pair."""
    pair = control_pair(records)
    if pair is None:
        return None
    base, twin = pair
    return {"baseline": base.variant_id, "twin": twin.variant_id,
            **paired_difference(base, twin)}


def paired_difference(base: VariantRecord, other: VariantRecord) -> dict[str, Any]:
    """How far `other`'s headline examples/s is from `base`'s, in percent, with an interval over
    the rounds both ran (window k of each in round k, when interleaved): around the headlines'
    log ratio, Student's t of the batch means of the rounds' log ratios (`batch_half_width`)."""
    ratio = other.headline_ratio(base)
    base_rates = np.asarray(base.window_rates, dtype=float)
    other_rates = np.asarray(other.window_rates, dtype=float)
    rounds = min(len(base_rates), len(other_rates))
    interval = None
    half = batch_half_width(np.log(other_rates[:rounds] / base_rates[:rounds]), CONFIDENCE)
    if half is not None and ratio > 0:
        interval = [100.0 * (math.exp(math.log(ratio) + sign * half) - 1.0) for sign in (-1, 1)]
    return {"difference_pct": 100.0 * (ratio - 1.0), "interval_pct": interval, "rounds": rounds,
            "confidence": CONFIDENCE if interval else None}


def batch_half_width(values: np.ndarray, confidence: float) -> float | None:
    """Half the two-sided `confidence` interval of the mean of `values` (in order): Student's t
    over the means of batches of `block_length` consecutive values, with one degree of freedom
    fewer than batches; None with fewer than two batches."""
    batches = len(values) // block_length(len(values)) if len(values) else 0
    if batches < 2:
        return None
    means = np.array([chunk.mean() for chunk in np.array_split(values, batches)])
    spread = float(means.std(ddof=1)) / math.sqrt(batches)
    return t_quantile(batches - 1, 1.0 - (1.0 - confidence) / 2.0) * spread


def describe(floor: dict[str, Any] | None) -> str:
    """The `noise floor:` line of the terminal and the report."""
    if floor is None:
        return "noise floor: not measured (no ok baseline and control twin in this run)"
    line = (f"noise floor: the A/A control twins' examples/s differ by "
            f"{floor['difference_pct']:+.1f}%")
    misses_zero = False
    if floor["interval_pct"]:
        lo, hi = floor["interval_pct"]
        line += (f" ({floor['confidence']:.0%} interval {lo:+.1f}% to {hi:+.1f}% over "
                 f"{floor['rounds']} rounds)")
        misses_zero = lo > 0 or hi < 0
    line += f": {floor['baseline']} vs its twin"
    if misses_zero:
        # A 95% interval misses the truth in 1 run of 20; the rounds' interval also leaves out
        # any speed a process keeps throughout, which the measurements show weakly or not at all
        # (measurements.md#noise-floor). Either way the floor widens to the interval's far end.
        runs = round(1.0 / (1.0 - floor["confidence"]))
        line += (f"; the same code, yet the interval misses zero (by chance in 1 run of {runs}, "
                 f"more often where a process keeps a speed of its own), so ratios within "
                 f"±{bound_pct(floor):.1f}% count as noise")
    return line


def bound_pct(floor: dict[str, Any]) -> float:
    """The widest of the twins' difference and its interval's ends, in percent."""
    return max([abs(floor["difference_pct"])] + [abs(x) for x in floor["interval_pct"] or []])


def within_noise(ratio: float, floor: dict[str, Any] | None) -> bool:
    """Whether a ratio between two variants of the run (e.g. 1.02) is no larger than what the
    control twins showed: the widest of the observed difference and its interval's ends."""
    if floor is None:
        return False
    return abs(100.0 * (ratio - 1.0)) <= bound_pct(floor)
