"""Examples held in memory, and what the model is built to emit for their labels.

numpy only: the parent process, `bench data write-tfrecord` and tests resolve them instantly.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data import pipeline
from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

Features = np.ndarray | dict[str, np.ndarray]
Arrays = tuple[Any, np.ndarray]


def model_outputs(label_kind: str, num_classes: int, label_shape: tuple[int, ...]) -> int:
    """How many outputs a model needs for these labels (what bench passes its builders as
    `num_classes`): one per class, one for 0/1 targets, one per target value."""
    if label_kind in ("sparse", "one_hot"):
        return num_classes
    return math.prod(label_shape) if label_kind == "regression" else 1


@dataclass(frozen=True)
class LoadedData:
    """Arrays held in memory (synthetic, MNIST, Fashion-MNIST)."""

    x: Features  # uint8 or float32 (N, ...), or named columns of N rows each
    y: np.ndarray  # class ids (int32, (N,)), or float32 targets (N, ...)
    source: str  # what was really used, human readable
    num_classes: int
    fallback_reason: str | None = None  # set only when fallback = "synthetic" was taken
    # what the model is trained on: class ids, one-hot rows (the feed turns ids into rows), 0/1
    # targets or real-valued targets
    label_kind: str = "sparse"

    @property
    def shape(self) -> Any:
        """One example's shape, or each named column's."""
        if isinstance(self.x, dict):
            return {name: tuple(values.shape[1:]) for name, values in self.x.items()}
        return tuple(self.x.shape[1:])

    @property
    def outputs(self) -> int:
        return model_outputs(self.label_kind, self.num_classes, tuple(self.y.shape[1:]))

    def examples(self, cfg: DataConfig,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        import tensorflow as tf

        arrays = self._host_tensors if tf.inside_function() else (self.x, self.y)
        return pipeline.shard_examples(tf.data.Dataset.from_tensor_slices(arrays), input_context)

    @functools.cached_property
    def _host_tensors(self) -> tuple[Any, Any]:
        """The arrays as eager tensors in host memory, made once, for a pipeline built while a
        function traces (a ParameterServer coordinator's per-worker dataset function, or
        tf-keras's DatasetCreator under it). The function captures them as its inputs, where
        numpy arrays would be embedded in it as constants that TensorFlow serialises into the
        function it sends every worker: 1.3 s more for 31 MB of examples
        (measurements.md#cluster-ending)."""
        import tensorflow as tf

        with tf.init_scope(), tf.device("/cpu:0"):
            return tf.nest.map_structure(tf.constant, (self.x, self.y))


def _as_fed(values: np.ndarray) -> np.ndarray:
    """uint8 pixels scaled to [0, 1] float32 (as the seeds prepare them); ids stay integers."""
    if values.dtype == np.uint8:
        return values.astype(np.float32) / 255.0
    return values.astype(np.float32, copy=False) if values.dtype.kind == "f" else values


def fit_arrays(data: LoadedData, examples: int) -> Arrays:
    """What `fit(x, y, batch_size=...)` is fed with data.feed = "numpy": the features as the
    pipeline would make them, the labels as the model is trained on (one-hot rows where the
    labels are one-hot), repeated to hold at least `examples`, so one epoch covers the whole run
    and no epoch boundary falls inside it."""
    x: Any = ({name: _as_fed(v) for name, v in data.x.items()} if isinstance(data.x, dict)
              else _as_fed(data.x))
    y = data.y
    if data.label_kind == "one_hot" and y.dtype.kind in "iu":
        y = np.eye(data.num_classes, dtype=np.float32)[y]
    elif y.dtype.kind in "iu":
        y = y.astype(np.int32, copy=False)
    reps = max(1, -(-examples // len(y)))
    if reps == 1:
        return x, y
    repeat = lambda values: np.concatenate([values] * reps)  # noqa: E731
    x = {name: repeat(v) for name, v in x.items()} if isinstance(x, dict) else repeat(x)
    return x, repeat(y)
