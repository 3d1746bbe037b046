"""One start for a checked copy on every backend and strategy.

Keras' initialisers draw from the backend's own generator (TensorFlow's stateless RNG, or
jax.random), so the same seed gives different weights on TensorFlow and on JAX. Each floating
variable of the copy is drawn again from NumPy, seeded by (the scenario's seed, the variable's
index in `model.weights`), from its own initialiser's distribution where that is one of Keras'
random families (the variance-scaling ones, Glorot, He and LeCun among them, and the normal,
truncated normal and uniform ones; the initialiser found as Keras names it, `kernel` ->
`kernel_initializer` on the variable's layer): the very same weights on both backends.
Another initialiser's values are kept, sorted, and laid out by a NumPy permutation: two
backends' draws of one distribution have nearly the same sorted values (its quantiles), so
both start from nearly the same weights. Constant variables (zeros, ones) are left as they are.
"""

from __future__ import annotations

import math
from typing import Any

TRUNCATED_STDDEV = 0.87962566103423978  # the stddev of a unit normal truncated at ±2


def align_weights(model: Any, seed: int) -> dict[str, int]:
    """Lay out every floating variable of `model` as above; how many were drawn again
    ("drawn") and how many rearranged ("permuted")."""
    import numpy as np

    counts = {"drawn": 0, "permuted": 0}
    layers = _layers_by_path(model)
    for index, variable in enumerate(model.weights):
        values = np.asarray(variable.numpy())
        if not np.issubdtype(values.dtype, np.floating) or values.size < 2:
            continue
        flat = np.sort(values, axis=None)
        if flat[0] == flat[-1]:  # a constant start is the same everywhere
            continue
        rng = np.random.default_rng([seed, index])
        drawn = _draw(_initializer_of(variable, layers), values.shape, rng)
        kind = "drawn" if drawn is not None else "permuted"
        if drawn is None:
            drawn = flat[rng.permutation(flat.size)].reshape(values.shape)
        variable.assign(drawn.astype(values.dtype))
        counts[kind] += 1
    return counts


def _layers_by_path(model: Any) -> dict[str, Any]:
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:
        return {}
    return {str(layer.path): layer for layer in flatten(include_self=True)
            if getattr(layer, "path", None)}


def _initializer_of(variable: Any, layers: dict[str, Any]) -> Any:
    """The initialiser the variable's layer keeps for it (Keras 3), or None."""
    path = str(getattr(variable, "path", "") or "")
    layer = layers.get(path.rpartition("/")[0])
    return getattr(layer, f"{variable.name}_initializer", None) if layer is not None else None


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Keras' fan-in and fan-out of a weight's shape (a kernel's last two axes, times the
    receptive field of a convolution's)."""
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _draw(initializer: Any, shape: tuple[int, ...], rng: Any) -> Any:
    """NumPy's draw from the initialiser's distribution, as Keras defines it; None for one it
    does not know."""
    from bench.training import flavour

    inits = flavour.keras().initializers
    if initializer is None:
        return None
    if isinstance(initializer, inits.VarianceScaling):
        if getattr(initializer, "input_axes", None) is not None:
            return None
        fan_in, fan_out = _fans(shape)
        fan = {"fan_in": fan_in, "fan_out": fan_out}.get(initializer.mode,
                                                         (fan_in + fan_out) / 2.0)
        scale = initializer.scale / max(1.0, fan)
        if initializer.distribution == "truncated_normal":
            return _truncated(rng, shape, 0.0, math.sqrt(scale) / TRUNCATED_STDDEV)
        if initializer.distribution == "untruncated_normal":
            return rng.normal(0.0, math.sqrt(scale), shape)
        limit = math.sqrt(3.0 * scale)
        return rng.uniform(-limit, limit, shape)
    if isinstance(initializer, inits.TruncatedNormal):
        return _truncated(rng, shape, initializer.mean, initializer.stddev)
    if isinstance(initializer, inits.RandomNormal):
        return rng.normal(initializer.mean, initializer.stddev, shape)
    if isinstance(initializer, inits.RandomUniform):
        return rng.uniform(initializer.minval, initializer.maxval, shape)
    return None


def _truncated(rng: Any, shape: tuple[int, ...], mean: float, stddev: float) -> Any:
    """A normal draw with every value beyond two standard deviations drawn again, as Keras'
    truncated normal."""
    values = rng.normal(0.0, 1.0, shape)
    outside = abs(values) > 2
    while outside.any():
        values[outside] = rng.normal(0.0, 1.0, int(outside.sum()))
        outside = abs(values) > 2
    return mean + stddev * values
