"""The `[data]` section: which examples to feed and how the tf.data pipeline is shaped."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from bench.scenario.fields import (
    AxisFields,
    Feed,
    NonNegativeInt,
    PipelineAxis,
    PositiveInt,
    Strict,
)
from bench.scenario.imports import IMPORT_PATH_HELP, is_import_path

Autotune = Literal["autotune"]
Prefetch = Autotune | NonNegativeInt
MapParallelism = Autotune | PositiveInt
ImageSize = Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [H, W]


ARRAY_DATASETS = ("synthetic", "mnist", "fashion_mnist")  # held in memory as numpy arrays
FILE_DATASETS = ("tfrecord", "tfds")  # read from files by tf.data
MNIST_SHAPE = (28, 28, 1)  # one example of the MNIST family (mnist, fashion_mnist), as stored


BUILTIN_DATASETS = (*ARRAY_DATASETS, *FILE_DATASETS)
LabelKind = Literal["sparse", "one_hot", "binary", "regression"]


class FeatureConfig(Strict):
    """One synthetic input column: integer ids below `vocab` (an embedding's input), or real
    values of `shape`."""

    vocab: Annotated[int, Field(ge=2)] | None = None
    shape: list[PositiveInt] = []

    @property
    def is_ids(self) -> bool:
        return self.vocab is not None


class DataConfig(Strict, AxisFields):
    """Which examples to feed and how the tf.data pipeline is shaped."""

    # a built-in dataset, or "package.module:function": a user's function that returns a
    # tf.data.Dataset of unbatched (features, labels) examples
    name: str = "synthetic"
    path: str | None = None  # explicit .npz file or directory of IDX files
    download: bool = False  # allow keras.datasets to fetch from the internet
    # tfrecord only: a glob of TFRecord shards in bench's schema (`bench data write-tfrecord`),
    # and of the held-out shards that check.accuracy evaluates on
    files: str | None = None
    eval_files: str | None = None
    interleave_cycle_length: MapParallelism = "autotune"  # files read at once
    interleave_parallelism: MapParallelism = "autotune"  # threads reading them
    # tfds only: a dataset tensorflow_datasets can load (name[/config][:version]), already
    # prepared under data_dir (default: tfds's own, ~/tensorflow_datasets); never downloaded
    tfds_name: str | None = None
    data_dir: str | None = None
    fallback: Literal["none", "synthetic"] = "none"
    num_examples: PositiveInt = 10_000  # synthetic data (also a fallback's size)
    # synthetic data; also what a fallback to synthetic data substitutes for tfrecord and tfds
    shape: list[PositiveInt] = list(MNIST_SHAPE)
    # synthetic [timesteps, features] only: each series is cut to a random length in
    # [timesteps / 4, timesteps] and zero-padded (the LSTM masks the padding)
    variable_length: bool = False
    num_classes: Annotated[int, Field(ge=2)] = 10  # synthetic and tfrecord data
    # What the labels are: class ids ("sparse", the default), one-hot rows (synthetic data, or
    # any class-labelled dataset converted), 0/1 targets or real-valued targets of `label_shape`
    # (synthetic data). None: "sparse"; a user's dataset yields its own labels.
    labels: LabelKind | None = None
    label_shape: list[PositiveInt] | None = None  # labels = "regression" only (default [1])
    # synthetic only: named input columns instead of one tensor of `shape`, e.g.
    # { item = { vocab = 1000000 }, dense = { shape = [13] } } (features are then a dict)
    features: dict[str, FeatureConfig] | None = None
    seed: int = 0
    shuffle_buffer: NonNegativeInt = 10_000  # 0 turns shuffling off
    cache: bool = True
    # Both may be lists: each value becomes a matrix axis (input-pipeline comparisons).
    prefetch: PipelineAxis[Prefetch] = "autotune"  # 0 turns prefetch off
    map_parallelism: PipelineAxis[MapParallelism] = "autotune"
    auto_shard: Literal["auto", "data", "file", "off"] = "auto"
    # "numpy": Keras fit gets the in-memory arrays (fit(x, y, batch_size=...)) and builds the
    # pipeline itself; in-memory data and api = "fit" only
    feed: Feed = "dataset"
    # Host-side image preprocessing in the tf.data map (train and eval: resize; train only:
    # the random augmentations; eval takes a central crop of random_crop's size instead).
    resize: ImageSize | None = None
    random_crop: ImageSize | None = None
    random_flip: bool = False  # left-right
    random_brightness: Annotated[float, Field(ge=0)] = 0.0  # max delta added (0: off)

    @field_validator("name")
    @classmethod
    def _known_source(cls, name: str) -> str:
        if name in BUILTIN_DATASETS or is_import_path(name):
            return name
        raise ValueError(f"unknown dataset '{name}' (built in: {', '.join(BUILTIN_DATASETS)}; "
                         f"or your own function returning a tf.data.Dataset, {IMPORT_PATH_HELP})")

    @property
    def is_user_function(self) -> bool:
        return self.name not in BUILTIN_DATASETS

    @property
    def label_kind(self) -> str | None:
        """The labels' kind (None: a user's dataset, whose labels only its examples tell)."""
        return None if self.is_user_function else self.labels or "sparse"
