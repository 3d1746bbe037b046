"""The run's own noise floor, from its A/A control: the baseline and its twin ran the same code in
the same rounds, so whatever separates their headline figures is the machine, not the code.

A difference between two variants of the run that is within this floor is not a finding. The
interval resamples the rounds (each round holds one window of each twin, run moments apart), so
it reflects how much the machine moved between rounds. It resamples them in blocks of
consecutive rounds: this machine's speed drifts over a few rounds (the twins' per-round log
ratios correlate at lag 1 by 0.09-0.16 here), so single rounds are not independent; resampled as
if they were, the intervals came out too narrow (in 20 runs here they missed zero, for twins
running the same code, twice; in blocks, once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.record.model import VariantRecord
from bench.timing import block_picks

BOOTSTRAP_ROUNDS = 2000
CONFIDENCE = 0.95


def control_pair(records: list[VariantRecord]) -> tuple[VariantRecord, VariantRecord] | None:
    """The ok (baseline, twin) records of the run's A/A control, if both measured."""
    by_role = {r.control_role: r for r in records if r.ok and r.window_rates}
    if "baseline" in by_role and "twin" in by_role:
        return by_role["baseline"], by_role["twin"]
    return None


def noise_floor(records: list[VariantRecord], seed: int = 0) -> dict[str, Any] | None:
    """How far the control twins' headline throughputs differ, in percent, with a bootstrap
    interval over the rounds; None when the run has no measured control pair."""
    pair = control_pair(records)
    if pair is None:
        return None
    base, twin = pair
    return {"baseline": base.variant_id, "twin": twin.variant_id,
            **paired_difference(base, twin, seed)}


def paired_difference(base: VariantRecord, other: VariantRecord, seed: int = 0
                      ) -> dict[str, Any]:
    """How far `other`'s headline examples/s is from `base`'s, in percent, with a block-bootstrap
    interval over the rounds both ran (window k of each in round k, when interleaved)."""
    difference = 100.0 * (other.headline_ratio(base) - 1.0)
    base_rates = np.asarray(base.window_rates, dtype=float)
    other_rates = np.asarray(other.window_rates, dtype=float)
    rounds = min(len(base_rates), len(other_rates))
    interval = None
    if rounds >= 2:
        rng = np.random.default_rng(seed)
        picks = block_picks(rng, rounds, BOOTSTRAP_ROUNDS)
        # Equal examples per window: the headline is the harmonic mean of the window rates.
        def rate(rates: np.ndarray) -> np.ndarray:
            return 1.0 / np.mean(1.0 / rates[:rounds][picks], axis=1)
        ratios = 100.0 * (rate(other_rates) / rate(base_rates) - 1.0)
        tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
        interval = [float(np.percentile(ratios, tail)), float(np.percentile(ratios, 100.0 - tail))]
    return {"difference_pct": difference, "interval_pct": interval, "rounds": rounds,
            "confidence": CONFIDENCE if interval else None}


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
