"""The checks' copies start from weights NumPy draws (bench.checks.alignment): the same seed,
the same weights, whatever the backend's generator drew first; an initialiser it does not know
keeps its own values, rearranged."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")


def model(seed: int, kernel_initializer: object = "glorot_uniform") -> object:
    keras.utils.set_random_seed(seed)
    built = keras.Sequential([keras.Input((6,)),
                              keras.layers.Dense(8, kernel_initializer=kernel_initializer),
                              keras.layers.Dense(3, kernel_initializer="he_normal",
                                                 bias_initializer="random_normal")])
    return built


def values(m: object) -> list[np.ndarray]:
    return [np.asarray(w.numpy()) for w in m.weights]


def test_the_same_seed_gives_the_same_weights_whatever_was_drawn_first() -> None:
    from bench.checks.alignment import align_weights

    one, two = model(1), model(2)
    assert not np.array_equal(values(one)[0], values(two)[0])  # the backend's own draws
    assert align_weights(one, 7) == {"drawn": 3, "permuted": 0}  # the zero bias is kept
    align_weights(two, 7)
    for a, b in zip(values(one), values(two), strict=True):
        np.testing.assert_array_equal(a, b)
    kernel = values(one)[0]
    limit = np.sqrt(6 / (6 + 8))  # glorot_uniform's
    assert np.abs(kernel).max() <= limit and kernel.std() > limit / 3
    assert not values(one)[1].any()  # zeros stay zeros
    other = model(1)
    align_weights(other, 8)
    assert not np.array_equal(values(other)[0], kernel)  # another seed, other weights


def test_an_unknown_initializer_keeps_its_values_rearranged() -> None:
    from bench.checks.alignment import align_weights

    m = model(1, keras.initializers.Orthogonal())
    before = values(m)[0]
    assert align_weights(m, 7) == {"drawn": 2, "permuted": 1}
    after = values(m)[0]
    assert not np.array_equal(before, after)
    np.testing.assert_array_equal(np.sort(before, axis=None), np.sort(after, axis=None))
