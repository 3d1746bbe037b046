"""Host-side image preprocessing in the tf.data map: resize, random crop, flip and brightness.

It runs per example on the CPU inside the input pipeline (`num_parallel_calls` =
`data.map_parallelism`), so a costly recipe can leave the model waiting for input: the case
`scenarios/input_bound.toml` measures. Training batches get the whole recipe; evaluation gets
only its deterministic part (the resize, and a central crop of random_crop's size), so both see
examples of one shape. Shapes are computed without TensorFlow: scenario validation pairs the
model with what the pipeline will yield before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

IMAGE_OPTIONS = ("resize", "random_crop", "random_flip", "random_brightness")


def _requested(cfg: DataConfig) -> list[str]:
    return [name for name in IMAGE_OPTIONS if getattr(cfg, name)]


def output_shape(cfg: DataConfig, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of one example after preprocessing (what the model is built for)."""
    size = cfg.random_crop or cfg.resize
    return (*size, shape[-1]) if size else tuple(shape)


def preprocess_problem(cfg: DataConfig, shape: tuple[int, ...]) -> tuple[str, str] | None:
    """(field, why) when the preprocessing options do not fit examples of `shape`."""
    requested = _requested(cfg)
    if requested and len(shape) != 3:
        return f"data.{requested[0]}", (f"applies to images [H, W, C]; data '{cfg.name}' gives "
                                        f"examples of shape {list(shape)}")
    if requested and None in shape[:2] and not cfg.resize:
        return "data.resize", (f"data '{cfg.name}' has images of varying size {list(shape)}: "
                               "set data.resize so batches have one shape")
    if cfg.random_crop:
        image = cfg.resize or list(shape[:2])
        if any(c > s for c, s in zip(cfg.random_crop, image, strict=True)):
            after = " after data.resize" if cfg.resize else ""
            return "data.random_crop", f"{cfg.random_crop} is larger than the image {image}{after}"
    return None


def map_fn(cfg: DataConfig, train: bool) -> Callable[[Any, Any], tuple[Any, Any]] | None:
    """The per-example map for the pipeline, or None when there is nothing to do."""
    if not _requested(cfg):
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
