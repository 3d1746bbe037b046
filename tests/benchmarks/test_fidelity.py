"""Fidelity: bench's headline is what the user's own loop gets (tests/benchmarks/fidelity.py).

The target is on the like-for-like figure: the plain loop that keeps one input iterator over its
epochs, whose figure is a step rate as the headline is. Run with `python -m pytest -m benchmark
tests/benchmarks/test_fidelity.py -s` (about an hour here: 5 rounds of six variants, each a
`bench run --only` and two plain loops).
"""

from __future__ import annotations

import pytest

from tests.benchmarks import fidelity

pytestmark = pytest.mark.benchmark

ROUNDS = 5


def test_the_headline_is_what_a_plain_loop_gets(benchmark) -> None:
    table = benchmark.pedantic(fidelity.measure, args=(ROUNDS,), rounds=1, iterations=1)
    benchmark.extra_info["bench_over_plain"] = table
    for vid, row in table.items():
        print(f"{vid}: median {row['one']['median']:.3f}, interval {row['one']['interval']}")
    for vid, row in table.items():
        assert 0.97 <= row["one"]["median"] <= 1.03, (vid, row["one"])
