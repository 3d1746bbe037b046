"""Rounds of bench's loop against a plain one in one process (loop_fidelity.py,
jax_loop_fidelity.py): who goes first alternates, so order cannot bias the pairs."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

from tests.benchmarks.intervals import bootstrap_median_interval


def paired_rounds(bench_side: Callable[[], tuple[float, int]], plain_side: Callable[[], float],
                  rounds: int, label: str, json_path: str | None = None) -> list[dict[str, float]]:
    """`rounds` pairs of bench's headline (and its window's steps) and the plain loop's rate,
    after one untimed call of each (both sides traced or compiled); prints each round's ratio,
    then the median and its bootstrap 95% interval under `label`; writes every round's figures
    to `json_path` where given."""
    bench_side()
    plain_side()
    pairs: list[dict[str, float]] = []
    for n in range(rounds):
        if n % 2 == 0:
            (bench, steps), plain = bench_side(), plain_side()
        else:
            plain = plain_side()
            bench, steps = bench_side()
        pairs.append({"bench": bench, "plain": plain, "ratio": bench / plain,
                      "window_steps": steps})
        print(f"round {n + 1}: bench {bench:,.0f} ex/s, plain {plain:,.0f} ex/s, "
              f"÷ {bench / plain:.3f} (windows of {steps} steps)", flush=True)
    ratios = [p["ratio"] for p in pairs]
    low, high = bootstrap_median_interval(ratios)
    print(f"{label}: bench ÷ plain median {statistics.median(ratios):.3f} (95% interval "
          f"{low:.3f}–{high:.3f}) over {len(ratios)} rounds; windows of "
          f"{statistics.median(p['window_steps'] for p in pairs):.0f} steps")
    if json_path:
        Path(json_path).write_text(json.dumps(pairs))
    return pairs
