"""The models and strategies a scenario can name, with what each needs: pure, so validation and
`bench list` are instant.

The builders live in `bench.training.models` (worker side); this is the part the parent checks a
scenario against. A name not listed here is a user's builder, "package.module:function".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bench.scenario.strategy_kinds import KINDS

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# "applications.<Builder>": any keras.applications builder, weights=None, with a new head
APPLICATIONS_PREFIX = "applications."
_APPLICATION = re.compile(r"^applications\.[A-Z]\w*$")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    # What input the model needs, checked at scenario load: None, or why `shape` does not fit.
    input_problem: Callable[[tuple[int, ...]], str | None] = lambda shape: None
    # keras.applications models: the builder's name, and the layers of its base (include_top=False,
    # pooling="avg": len(base.layers), as the transfer-learning guide counts them), None if unknown
    application: str | None = None
    base_layers: int | None = None
    # "tensor": one input tensor (data.shape); "features": named columns (data.features), with
    # at least one of integer ids (an embedding's input)
    inputs: str = "tensor"


def _needs_images(channels: int | None = None, min_side: int = 1
                  ) -> Callable[[tuple[int, ...]], str | None]:
    def problem(shape: tuple[int, ...]) -> str | None:
        ok = (len(shape) == 3 and min(shape[:2]) >= min_side
              and (channels is None or shape[2] == channels))
        if ok:
            return None
        side = f"H, W >= {min_side}" if min_side > 1 else "H, W"
        return f"needs images [{side}, {channels if channels else 'C'}]"
    return problem


def _needs_sequences(shape: tuple[int, ...]) -> str | None:
    return None if len(shape) == 2 else "needs series [timesteps, features]"


def _needs_tokens(shape: tuple[int, ...]) -> str | None:
    return None if len(shape) in (2, 3) else "needs series [timesteps, features] or images"


MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        ModelInfo("mlp", "Seed MLP: flatten, Dense 256-128-10 (784-256-128-10 on MNIST)"),
        ModelInfo("cnn", "Seed CNN: 2x (Conv 3x3 + MaxPool), Dense 64, Dense 10",
                  _needs_images(min_side=10)),
        ModelInfo("lstm", "Seed LSTM: masking, 2x LSTM 64, Dense; variable-length series "
                  "[timesteps, features]", _needs_sequences),
        ModelInfo("resnet50", "ResNet50 from keras.applications, weights=None (no download); "
                  "images [H, W, 3], H, W >= 32; model.trainable: all | head | N",
                  _needs_images(3, 32), "ResNet50", 176),
        ModelInfo("transformer", "One Transformer encoder block (4 heads, d_model 64, FFN 128) "
                  "over a sequence, or an image's rows as tokens", _needs_tokens),
        ModelInfo("recommender", "Embedding recommender: an embedding table (dim 32) per id "
                  "column of data.features, concatenated with the dense columns, MLP 256-128, "
                  "one logit (binary clicks)", inputs="features"),
    )
}



# Layers of keras.applications bases (include_top=False, pooling="avg"), counted with Keras 3.15
# and tf-keras 2.21 (the same); other builders are counted by the worker once built.
APPLICATION_BASE_LAYERS = {
    "ResNet50": 176, "ResNet50V2": 191, "MobileNetV2": 155, "MobileNetV3Small": 158,
    "EfficientNetB0": 238, "EfficientNetV2B0": 271, "DenseNet121": 428, "VGG16": 20,
    "ConvNeXtTiny": 134,
}


def model_info(name: str) -> ModelInfo | None:
    """A registered model, or an "applications.<Builder>" one; None for a user's builder."""
    if name in MODELS:
        return MODELS[name]
    if _APPLICATION.match(name):
        builder = name.removeprefix(APPLICATIONS_PREFIX)
        return ModelInfo(name, f"keras.applications.{builder}, weights=None, new head",
                         _needs_images(3, 32), builder, APPLICATION_BASE_LAYERS.get(builder))
    return None


def input_problem(name: str, shape: tuple[int, ...]) -> str | None:
    """Why a registered model cannot take inputs of `shape` (None: it can, or it is a user's)."""
    info = model_info(name)
    return info.input_problem(tuple(shape)) if info else None


def trainable_problem(name: str, trainable: str | int) -> str | None:
    """Why `model.trainable = trainable` cannot apply to model `name` (None: it can)."""
    if trainable == "all":
        return None
    info = model_info(name)
    if info is None or info.application is None:
        return (f"{trainable!r} freezes the base of a keras.applications model (resnet50 or "
                f"\"applications.<Builder>\"); '{name}' has none: use \"all\"")
    if isinstance(trainable, int) and info.base_layers is not None and \
            trainable > info.base_layers:
        return (f"{trainable} is more layers than {info.application}'s base has "
                f"({info.base_layers})")
    return None


def validate_model_name(name: str) -> None:
    """Accept a registered name, "applications.<Builder>" or a well-formed import path; the
    import itself happens later."""
    if name in MODELS or _APPLICATION.match(name) or _IMPORT_PATH.match(name):
        return
    known = ", ".join(sorted(MODELS))
    raise ValueError(f"unknown model '{name}' (known: {known}; \"applications.<Builder>\" for "
                     "any keras.applications builder; or 'package.module:function')")


# What `bench list` says of each strategy a scenario can name (schema.StrategyName).
STRATEGY_DESCRIPTIONS: dict[str, str] = {name: kind.summary for name, kind in KINDS.items()}
