"""What a reader of a comparison needs beside the verdicts: why a ratio that looks like a change
is "unchanged", and whether the two runs were measured alike.

A verdict needs three things at once (bench.compare.detector): Mann-Whitney's p below the
significance level, the bootstrap interval of the ratio clear of 1, and the ratio beyond the
minimum effect. A ratio of 0.92 at p = 4e-5 that misses one of them is rightly "unchanged",
and its line must say which. And two runs measured under different protocols (a `--quick`
candidate against a full baseline: other rounds, windows, settling, interleaving) differ in
more than the code, which the comparison must say before any verdict is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.record.model import VariantRecord

# `[measure]` fields that do not change how the timed windows are measured: the variant's
# budget, how many processes live at once, the untimed work after the windows.
NOT_MEASUREMENT = frozenset({"timeout_s", "max_live", "control", "trace_steps", "epochs",
                             "epoch_steps", "checkpoint"})


def why_unchanged(p_value: float, alpha: float, ratio: float, low: float | None,
                  high: float | None, min_effect: float) -> str:
    """The reasons an "unchanged" verdict's ratio is not a change, in words; "" where the ratio
    is neither significant nor beyond the minimum effect (nothing to explain)."""
    change = abs(ratio - 1.0)
    direction = "slower" if ratio > 1.0 else "faster"
    significant = p_value < alpha
    if not significant and change <= min_effect:
        return ""
    reasons = []
    if not significant:
        reasons.append(f"not significant (p = {p_value:.2g}, not below {alpha:g})")
    if change <= min_effect:
        reasons.append(f"{change:.1%} {direction} is within the minimum effect of "
                       f"{min_effect:.0%}")
    elif low is not None and high is not None and low <= 1.0 <= high:
        reasons.append(f"the {1 - alpha:.0%} interval {low:.3f}-{high:.3f} includes 1 (the "
                       "windows disagree)")
    head = f"significant (p = {p_value:.2g}) but " if significant else ""
    return head + "; ".join(reasons)


def _measure(record: VariantRecord) -> dict[str, Any]:
    """How the record's timed windows were measured: its `[measure]` fields that shape them,
    and whether they were interleaved with other variants'."""
    fields = {k: v for k, v in (record.variant.measure or {}).items()
              if k not in NOT_MEASUREMENT and k != "interleave"}  # what ran, below, instead
    measurement = record.measurement
    interleaved = (measurement.interleaved if measurement is not None
                   and measurement.interleaved is not None else record.interleave is not None)
    return {**fields, "interleaved": interleaved}


def _values(values: set[str]) -> str:
    return "/".join(sorted(values))


def measured_differently(pairs: Iterable[tuple[VariantRecord, VariantRecord]]) -> str | None:
    """What differs in how the compared (baseline, candidate) records were measured, or None
    where every pair was measured alike."""
    before: dict[str, set[str]] = {}
    after: dict[str, set[str]] = {}
    for base, cand in pairs:
        for side, record in ((before, base), (after, cand)):
            for key, value in _measure(record).items():
                side.setdefault(key, set()).add(str(value).lower())
    differ = [f"{key} {_values(before.get(key, {'-'}))} -> {_values(after.get(key, {'-'}))}"
              for key in sorted(set(before) | set(after))
              if before.get(key, {"-"}) != after.get(key, {"-"})]
    if not differ:
        return None
    return ("the two runs were measured differently (" + ", ".join(differ) + "; from --quick, "
            "--steps, --repeats, --no-interleave or the scenarios' [measure]): their step times "
            "differ in more than the code, so read the verdicts with care")
