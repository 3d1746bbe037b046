"""Model builders: the seeds' workloads by name, or a user's builder as "package.module:function".

A builder is called with whichever of `input_shape` (one example's shape, or a dict of each
named feature's), `num_classes` (the outputs the labels need: classes, 1 for 0/1 targets, the
target's size for regression) and `vocabularies` (each id column's vocabulary size) its
signature names, inside the strategy's scope. bench's own builders return an uncompiled model
whose last layer emits float32 logits, so that mixed-precision policies keep a numerically safe
loss; a user's may return a compiled one (`bench.training.workload` then trains with its loss,
optimizer and metrics). The names, descriptions and input rules a scenario is checked against
live in `bench.scenario.catalogue`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bench.errors import WorkloadError, one_line
from bench.scenario.catalogue import model_info
from bench.scenario.imports import call_with, import_object
from bench.training.flavour import keras as keras_module
from bench.training.flavour import ops as keras_ops

EMBEDDING_DIM = 32  # the recommender's embedding width


def _mlp(input_shape: tuple[int, ...], num_classes: int) -> Any:
    keras = keras_module()

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
    keras = keras_module()

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
    keras = keras_module()

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


def _transformer(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """One pre-norm encoder block (4 heads, d_model 64, FFN 128) over a sequence; an image's rows
    become its tokens."""
    keras = keras_module()

    inputs = keras.Input(shape=input_shape)
    x = inputs if len(input_shape) == 2 else keras.layers.Reshape(
        (input_shape[0], input_shape[1] * input_shape[2]))(inputs)
    steps = x.shape[1]
    x = keras.layers.Dense(64)(x)
    x = _PositionEmbedding(keras, steps, 64)(x)
    h = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.MultiHeadAttention(num_heads=4, key_dim=16)(h, h)
    h = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.Dense(64)(keras.layers.Dense(128, activation="gelu")(h))
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization()(x))
    return keras.Model(inputs, keras.layers.Dense(num_classes, dtype="float32")(x),
                       name="transformer")


def _recommender(input_shape: dict[str, tuple[int, ...]], num_classes: int,
                 vocabularies: dict[str, int]) -> Any:
    """The embedding workload ParameterServer exists for: a table of EMBEDDING_DIM per id column
    (1,000,000 ids make 128 MB of float32), concatenated with the dense columns, an MLP, and
    one logit per output (a click's)."""
    keras = keras_module()
    inputs = {name: keras.Input(shape=shape, name=name,
                                dtype="int64" if name in vocabularies else "float32")
              for name, shape in input_shape.items()}
    columns = []
    for name, tensor in inputs.items():
        if name in vocabularies:
            tensor = keras.layers.Embedding(vocabularies[name], EMBEDDING_DIM,
                                            name=f"{name}_embedding")(tensor)
        flat = keras.layers.Flatten(name=f"{name}_flat") if len(tensor.shape) > 2 else None
        columns.append(flat(tensor) if flat else tensor)
    # every layer named after what it does: a column may be called "dense" (tf-keras names
    # layers from one namespace with the inputs)
    x = keras.layers.Concatenate(name="columns")(columns) if len(columns) > 1 else columns[0]
    x = keras.layers.Dense(256, activation="relu", name="hidden_256")(x)
    x = keras.layers.Dense(128, activation="relu", name="hidden_128")(x)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="recommender")


def _PositionEmbedding(keras: Any, steps: int, width: int) -> Any:  # noqa: N802 (a layer)
    """A learned embedding of each position, added to the tokens (what Embedding over
    arange(steps) computes, written so that Keras 3 and tf-keras build it the same way)."""

    class PositionEmbedding(keras.layers.Layer):
        def build(self, shape: Any) -> None:
            self.table = self.add_weight(name="positions", shape=(steps, width),
                                         initializer="uniform")

        def call(self, x: Any) -> Any:
            return x + keras_ops().cast(self.table, x.dtype)

    return PositionEmbedding()


def transfer(application: str, input_shape: tuple[int, ...], num_classes: int,
             trainable: str | int) -> Any:
    """A keras.applications base (weights=None: nothing can be downloaded; the compute is the
    same) with a new head, as the transfer-learning guide builds it: the base runs in inference
    mode (`training=False`, so BatchNormalization keeps its statistics), frozen ("head"), or
    with its last `trainable` layers trainable (fine-tuning)."""
    keras = keras_module()
    base = getattr(keras.applications, application)(weights=None, include_top=False,
                                                    pooling="avg", input_shape=input_shape)
    if isinstance(trainable, int):
        if trainable > len(base.layers):
            raise ValueError(f"model.trainable: {trainable} is more layers than "
                             f"{application}'s base has ({len(base.layers)})")
        for layer in base.layers[:-trainable]:
            layer.trainable = False
    else:
        base.trainable = False
    inputs = keras.Input(shape=input_shape)
    features = base(inputs, training=False)
    logits = keras.layers.Dense(num_classes, dtype="float32")(features)
    return keras.Model(inputs, logits, name=f"{application.lower()}_{trainable}")


def _application(application: str) -> Callable[[tuple[int, ...], int], Any]:
    def build(input_shape: tuple[int, ...], num_classes: int) -> Any:
        keras = keras_module()
        backbone = getattr(keras.applications, application)(
            weights=None, include_top=False, pooling="avg", input_shape=input_shape)
        logits = keras.layers.Dense(num_classes, dtype="float32")(backbone.output)
        return keras.Model(backbone.input, logits, name=application.lower())
    return build


BUILDERS: dict[str, Callable[..., Any]] = {
    "mlp": _mlp, "cnn": _cnn, "lstm": _lstm, "resnet50": _application("ResNet50"),
    "transformer": _transformer, "recommender": _recommender,
}


def resolve_builder(name: str) -> Callable[..., Any]:
    """Return the builder for a registered name or import a user's `package.module:function`."""
    if name in BUILDERS:
        return BUILDERS[name]
    if (info := model_info(name)) is not None and info.application:
        return _application(info.application)
    builder = import_object(name, "model")
    if not callable(builder):
        raise WorkloadError(f"model '{name}' is a {type(builder).__name__}, not a function")
    return builder


def build_model(name: str, input_shape: Any, num_classes: int, extra_matmul: int = 0,
                trainable: str | int = "all", vocabularies: dict[str, int] | None = None) -> Any:
    """The model `name` builds for these inputs and outputs (see the module's text)."""
    info = model_info(name)
    if trainable != "all" and info is not None and info.application:
        model = transfer(info.application, tuple(input_shape), num_classes, trainable)
    elif info is not None:
        model = call_with(resolve_builder(name), {"input_shape": input_shape,
                                                  "num_classes": num_classes,
                                                  "vocabularies": vocabularies or {}}, name)
    else:
        model = _user_model(name, input_shape, num_classes, vocabularies or {})
    if extra_matmul and isinstance(input_shape, dict):
        raise WorkloadError(f"model.extra_matmul needs one input tensor; '{name}' takes named "
                            "features")
    return with_extra_matmul(model, input_shape, extra_matmul) if extra_matmul else model


def _user_model(name: str, input_shape: Any, num_classes: int,
                vocabularies: dict[str, int]) -> Any:
    """A user's builder, called with what it asks for; what goes wrong is one line naming it."""
    builder = resolve_builder(name)
    available = {"input_shape": input_shape, "num_classes": num_classes,
                 "vocabularies": vocabularies}
    try:
        model = call_with(builder, available, f"model '{name}'")
    except WorkloadError:
        raise
    except Exception as exc:  # the user's builder may raise anything
        raise WorkloadError(f"model '{name}' raised {type(exc).__name__}: "
                            f"{one_line(exc)}") from None
    keras = keras_module()
    if not isinstance(model, keras.Model):
        raise WorkloadError(f"model '{name}' returned {type(model).__name__}, not a Keras model "
                            f"(keras.Model of {keras.__name__} {keras.__version__})")
    return model


def parameter_counts(model: Any) -> dict[str, int]:
    """Trainable and total weights: what model.trainable (a frozen base) leaves to train."""
    def size(weights: Any) -> int:
        return sum(math.prod(int(d) for d in w.shape) for w in weights)
    return {"trainable": size(model.trainable_weights), "total": size(model.weights)}


def build_configured(cfg: Any, input_shape: Any, num_classes: int,
                     vocabularies: dict[str, int] | None = None) -> Any:
    """The model a variant's [model] table describes (a scenario.schema.ModelConfig)."""
    return build_model(cfg.name, input_shape, num_classes, cfg.extra_matmul, cfg.trainable,
                       vocabularies)


def _zero_from(value: Any) -> Any:
    ops = keras_ops()
    return ops.minimum(ops.abs(value), 0.0)


def with_extra_matmul(model: Any, input_shape: tuple[int, ...], n: int) -> Any:
    """`model` behind a layer that multiplies an n x n matrix by itself on every forward pass.

    The matrix depends on the batch and the product feeds the output (both through a term that is
    always zero but that no optimiser can prove so), so the work is really done, in series with
    the step, while the model's numbers and trainable weights stay the same.
    """
    keras = keras_module()

    class ExtraMatmul(keras.layers.Layer):
        def build(self, shape: Any) -> None:
            self.square = self.add_weight(shape=(n, n), initializer="random_normal",
                                          trainable=False, name="square")

        def call(self, x: Any) -> Any:
            # Tied to the input at both ends, so it cannot run off the critical path in parallel.
            # min(|s|, 0) is always 0, but unlike s * 0 no graph optimiser folds it away.
            ops = keras_ops()
            square = self.square + ops.cast(_zero_from(ops.sum(x)), self.square.dtype)
            product = ops.matmul(square, square)
            return x + ops.cast(_zero_from(ops.sum(product)), x.dtype)

    inputs = keras.Input(shape=tuple(input_shape))
    return keras.Model(inputs, model(ExtraMatmul(name="extra_matmul")(inputs)), name=model.name)
