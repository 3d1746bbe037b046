"""The interval the benchmarks quote beside a median of paired ratios."""

from __future__ import annotations

import random
import statistics


def bootstrap_median_interval(values: list[float], rounds: int = 5000) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the median (seeded: the same figures, the same
    interval)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]
