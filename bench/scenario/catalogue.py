"""The models and strategies a scenario can name, with what each needs: pure, so validation and
`bench list` are instant.

The builders live in `bench.training.models` (worker side); this is the part the parent checks a
scenario against. A name not listed here is a user's builder, "package.module:function".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    # What input the model needs, checked at scenario load: None, or why `shape` does not fit.
    input_problem: Callable[[tuple[int, ...]], str | None] = lambda shape: None


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
                  "images [H, W, 3], H, W >= 32", _needs_images(3, 32)),
        ModelInfo("transformer", "One Transformer encoder block (4 heads, d_model 64, FFN 128) "
                  "over a sequence, or an image's rows as tokens", _needs_tokens),
    )
}



def input_problem(name: str, shape: tuple[int, ...]) -> str | None:
    """Why a registered model cannot take inputs of `shape` (None: it can, or it is a user's)."""
    info = MODELS.get(name)
    return info.input_problem(tuple(shape)) if info else None


def validate_model_name(name: str) -> None:
    """Accept a registered name or a well-formed import path; the import itself happens later."""
    if name in MODELS or _IMPORT_PATH.match(name):
        return
    known = ", ".join(sorted(MODELS))
    raise ValueError(f"unknown model '{name}' (known: {known}; or 'package.module:function')")


# What `bench list` says of each strategy a scenario can name (schema.StrategyName).
STRATEGY_DESCRIPTIONS: dict[str, str] = {
    "default": "No explicit strategy (tf.distribute default strategy): the baseline",
    "one_device": "OneDeviceStrategy on the first device",
    "mirrored": "MirroredStrategy: synchronous data parallelism over local devices",
    "central_storage": "CentralStorageStrategy: variables on one device, compute mirrored",
    "multi_worker_mirrored": "MultiWorkerMirroredStrategy: worker processes with TF_CONFIG, "
                             "collective all-reduce",
    "parameter_server": "ParameterServerStrategy: ps + worker processes, ClusterCoordinator loop",
    "tpu": "TPUStrategy: where a TPU is attached or named; skipped with the resolver's reason",
}
