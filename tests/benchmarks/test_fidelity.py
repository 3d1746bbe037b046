"""Fidelity: bench's headline is what the user's own loop gets (tests/benchmarks/fidelity.py).

Run with `python -m pytest -m benchmark tests/benchmarks/test_fidelity.py -s` (about 15 minutes:
5 alternating rounds of six plain loops and one run of the default scenario).
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
        print(f"{vid}: median {row['median']:.3f}, interval {row['interval']}")
    for vid, row in table.items():
        assert 0.97 <= row["median"] <= 1.03, (vid, row)
