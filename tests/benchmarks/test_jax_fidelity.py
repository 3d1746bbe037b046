"""Fidelity on JAX: a JAX variant's headline is what a plain Keras-on-JAX `fit` of the same model
gets (tests/benchmarks/jax_fidelity.py), one device and DataParallel x 2. Run with
`python -m pytest -m benchmark tests/benchmarks/test_jax_fidelity.py -s` (about 15 minutes here:
3 rounds of two variants, each a `bench run --only` and a plain loop).
"""

from __future__ import annotations

import pytest

from tests.benchmarks import jax_fidelity

pytestmark = pytest.mark.benchmark

ROUNDS = 3


def test_a_jax_headline_is_what_a_plain_keras_on_jax_fit_gets(benchmark) -> None:
    table = benchmark.pedantic(jax_fidelity.measure, args=(ROUNDS,), rounds=1, iterations=1)
    benchmark.extra_info["bench_over_plain"] = table
    for vid, row in table.items():
        print(f"{vid}: median {row['median']:.3f}, interval {row['interval']}")
    for vid, row in table.items():
        assert 0.97 <= row["median"] <= 1.03, (vid, row)
