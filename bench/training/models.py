"""Model builders: the seeds' workloads by name, or a user's builder as "package.module:function".

Builders take `(input_shape, num_classes)` and return an uncompiled Keras model whose last layer
emits float32 logits, so that mixed-precision policies keep a numerically safe loss. The names,
descriptions and input rules a scenario is checked against live in `bench.scenario.catalogue`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def _mlp(input_shape: tuple[int, ...], num_classes: int) -> Any:
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(num_classes, dtype="float32"),
        ],
        name="mlp",
    )


def _cnn(input_shape: tuple[int, ...], num_classes: int) -> Any:
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(num_classes, dtype="float32"),
        ],
        name="cnn",
    )


def _lstm(input_shape: tuple[int, ...], num_classes: int) -> Any:
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Masking(mask_value=0.0),  # variable-length series are zero-padded
            keras.layers.LSTM(64, return_sequences=True),
            keras.layers.LSTM(64),
            keras.layers.Dense(num_classes, dtype="float32"),
        ],
        name="lstm",
    )


def _resnet50(input_shape: tuple[int, ...], num_classes: int) -> Any:
    import keras

    backbone = keras.applications.ResNet50(weights=None, include_top=False, pooling="avg",
                                           input_shape=input_shape)
    logits = keras.layers.Dense(num_classes, dtype="float32")(backbone.output)
    return keras.Model(backbone.input, logits, name="resnet50")


def _transformer(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """One pre-norm encoder block (4 heads, d_model 64, FFN 128) over a sequence; an image's rows
    become its tokens."""
    import keras

    inputs = keras.Input(shape=input_shape)
    x = inputs if len(input_shape) == 2 else keras.layers.Reshape(
        (input_shape[0], input_shape[1] * input_shape[2]))(inputs)
    steps = x.shape[1]
    x = keras.layers.Dense(64)(x)
    positions = keras.ops.expand_dims(keras.ops.arange(steps), 0)
    x = x + keras.layers.Embedding(steps, 64)(positions)
    h = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.MultiHeadAttention(num_heads=4, key_dim=16)(h, h)
    h = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.Dense(64)(keras.layers.Dense(128, activation="gelu")(h))
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization()(x))
    return keras.Model(inputs, keras.layers.Dense(num_classes, dtype="float32")(x),
                       name="transformer")


BUILDERS: dict[str, Callable[[tuple[int, ...], int], Any]] = {
    "mlp": _mlp, "cnn": _cnn, "lstm": _lstm, "resnet50": _resnet50, "transformer": _transformer,
}


def resolve_builder(name: str) -> Callable[[tuple[int, ...], int], Any]:
    """Return the builder for a registered name or import a user's `package.module:function`."""
    if name in BUILDERS:
        return BUILDERS[name]
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"model '{name}': cannot import {module_name}: {exc}") from None
    builder = getattr(module, attr, None)
    if not callable(builder):
        raise ValueError(f"model '{name}': {module_name} has no callable '{attr}'")
    return builder


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int,
                extra_matmul: int = 0) -> Any:
    model = resolve_builder(name)(tuple(input_shape), num_classes)
    if not hasattr(model, "trainable_variables"):
        raise ValueError(f"model '{name}': builder returned {type(model).__name__}, not a Keras model")
    return with_extra_matmul(model, input_shape, extra_matmul) if extra_matmul else model


def _zero_from(value: Any) -> Any:
    import keras

    return keras.ops.minimum(keras.ops.abs(value), 0.0)


def with_extra_matmul(model: Any, input_shape: tuple[int, ...], n: int) -> Any:
    """`model` behind a layer that multiplies an n x n matrix by itself on every forward pass.

    The matrix depends on the batch and the product feeds the output (both through a term that is
    always zero but that no optimiser can prove so), so the work is really done, in series with
    the step, while the model's numbers and trainable weights stay the same.
    """
    import keras

    class ExtraMatmul(keras.layers.Layer):
        def build(self, shape: Any) -> None:
            self.square = self.add_weight(shape=(n, n), initializer="random_normal",
                                          trainable=False, name="square")

        def call(self, x: Any) -> Any:
            # Tied to the input at both ends, so it cannot run off the critical path in parallel.
            # min(|s|, 0) is always 0, but unlike s * 0 no graph optimiser folds it away.
            square = self.square + keras.ops.cast(_zero_from(keras.ops.sum(x)), self.square.dtype)
            product = keras.ops.matmul(square, square)
            return x + keras.ops.cast(_zero_from(keras.ops.sum(product)), x.dtype)

    inputs = keras.Input(shape=tuple(input_shape))
    return keras.Model(inputs, model(ExtraMatmul(name="extra_matmul")(inputs)), name=model.name)
