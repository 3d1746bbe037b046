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

    vocab: Annotated[int, Field(ge=2)] | None = Field(None, description=(
        "Integer ids below this (an embedding's input)."))
    shape: list[PositiveInt] = Field([], description="The shape of one example's real values.")

    @property
    def is_ids(self) -> bool:
        return self.vocab is not None


class DataConfig(Strict, AxisFields):
    """Which examples to feed and how the tf.data pipeline is shaped."""

    name: str = Field("synthetic", description=(
        "A built-in dataset (synthetic, mnist, fashion_mnist, tfrecord, tfds), or "
        "\"package.module:function\": a user's function that returns a tf.data.Dataset of unbatched "
        "(features, labels) examples."))
    path: str | None = Field(None, description=(
        "Explicit .npz file or directory of IDX files (mnist, fashion_mnist)."))
    download: bool = Field(False, description="Allow keras.datasets to fetch from the internet.")
    files: str | None = Field(None, description=(
        "tfrecord only: a glob of TFRecord shards in bench's schema (`bench data write-tfrecord`); gs:// "
        "works too."))
    eval_files: str | None = Field(None, description=(
        "tfrecord only: a glob of the held-out shards that check.accuracy evaluates on."))
    interleave_cycle_length: MapParallelism = Field("autotune", description="tfrecord: files read at once.")
    interleave_parallelism: MapParallelism = Field("autotune", description="tfrecord: threads reading them.")
    tfds_name: str | None = Field(None, description=(
        "tfds only: a dataset tensorflow_datasets can load (name[/config][:version]), already prepared "
        "under data_dir; never downloaded."))
    data_dir: str | None = Field(None, description=(
        "tfds only: where the prepared dataset is (default: tfds's own, ~/tensorflow_datasets)."))
    fallback: Literal["none", "synthetic"] = Field("none", description=(
        "none: fail when the data is missing; synthetic: use synthetic data of the same shape instead, and "
        "say so."))
    num_examples: PositiveInt = Field(10_000, description="Synthetic data's size (also a fallback's).")
    shape: list[PositiveInt] = Field(list(MNIST_SHAPE), description=(
        "One synthetic example's shape; also what a fallback to synthetic data substitutes for tfrecord "
        "and tfds."))
    variable_length: bool = Field(False, description=(
        "Synthetic [timesteps, features] only: each series is cut to a random length in [timesteps / 4, "
        "timesteps] and zero-padded (the LSTM masks the padding)."))
    num_classes: Annotated[int, Field(ge=2)] = Field(10, description=(
        "Classes of synthetic and tfrecord data."))
    labels: LabelKind | None = Field(None, description=(
        "What the labels are: class ids (\"sparse\", the default), one-hot rows (synthetic data, or any "
        "class-labelled dataset converted), 0/1 targets (\"binary\") or real-valued targets of "
        "`label_shape` (\"regression\", synthetic data). None: \"sparse\"; a user's dataset yields its own "
        "labels."))
    label_shape: list[PositiveInt] | None = Field(None, description=(
        "labels = \"regression\" only (default [1])."))
    features: dict[str, FeatureConfig] | None = Field(None, description=(
        "Synthetic only: named input columns instead of one tensor of `shape`, e.g. { item = { vocab = "
        "1000000 }, dense = { shape = [13] } } (features are then a dict)."))
    seed: int = Field(0, description="Seed of synthetic data, shuffling and the models' initial weights.")
    shuffle_buffer: NonNegativeInt = Field(10_000, description="Shuffle buffer size; 0 turns shuffling off.")
    cache: bool = Field(True, description=(
        "Keep the (parsed) examples in memory after the first pass; false reads the source every epoch."))
    prefetch: PipelineAxis[Prefetch] = Field("autotune", description=(
        "Batches prefetched (\"autotune\" lets tf.data tune it at run time); 0 turns prefetch off."))
    map_parallelism: PipelineAxis[MapParallelism] = Field("autotune", description=(
        "Threads of the tf.data map that preprocesses examples."))
    auto_shard: Literal["auto", "data", "file", "off"] = Field("auto", description=(
        "The distributed dataset's auto-shard policy (\"file\": tfrecord and tfds only)."))
    feed: Feed = Field("dataset", description=(
        "\"numpy\": Keras fit gets the in-memory arrays (fit(x, y, batch_size=...)) and builds the "
        "pipeline itself; in-memory data and api = \"fit\" only."))
    resize: ImageSize | None = Field(None, description=(
        "Host-side preprocessing in the tf.data map: resize to [H, W] (training and evaluation)."))
    random_crop: ImageSize | None = Field(None, description=(
        "A random [H, W] crop of training examples; evaluation takes a central crop of this size instead."))
    random_flip: bool = Field(False, description="Random left-right flips of training examples.")
    random_brightness: Annotated[float, Field(ge=0)] = Field(0.0, description=(
        "Largest brightness delta added to training examples (0: off)."))

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
