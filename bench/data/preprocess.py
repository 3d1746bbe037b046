"""Host-side image preprocessing in the tf.data map: resize, random crop, flip and brightness.

It runs per example on the CPU inside the input pipeline (`num_parallel_calls` =
`data.map_parallelism`), so a costly recipe can leave the model waiting for input: the case
`scenarios/input_bound.toml` measures. Training batches get the whole recipe; evaluation gets
only its deterministic part (the resize, and a central crop of random_crop's size), so both see
examples of one shape. The shapes it yields are computed without TensorFlow, in `bench.scenario.rules`:
scenario validation pairs the model with what the pipeline will yield before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.scenario.rules import requested_image_options
from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

def map_fn(cfg: DataConfig, train: bool) -> Callable[[Any, Any], tuple[Any, Any]] | None:
    """The per-example map for the pipeline, or None when there is nothing to do."""
    if not requested_image_options(cfg):
        return None
    import tensorflow as tf

    def preprocess(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        if cfg.resize:
            x = tf.image.resize(x, cfg.resize)
        if cfg.random_crop:
            height, width = cfg.random_crop
            if train:
                x = tf.image.random_crop(x, [height, width, x.shape[-1]], seed=cfg.seed)
            else:
                x = tf.image.resize_with_crop_or_pad(x, height, width)  # the central crop
        if train and cfg.random_flip:
            x = tf.image.random_flip_left_right(x, seed=cfg.seed)
        if train and cfg.random_brightness:
            x = tf.image.random_brightness(x, cfg.random_brightness, seed=cfg.seed)
        return x, y

    return preprocess
