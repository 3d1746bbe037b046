"""Input data: find the examples a scenario names, then build the tf.data pipeline over them.

`load` resolves `[data]` to a `Data`: numpy arrays held in memory (synthetic, MNIST, Fashion-MNIST:
`bench.data.arrays`, numpy only, so the parent process and tests resolve and describe them instantly),
TFRecord shards (`bench.data.tfrecord`) or a prepared tensorflow_datasets split (`bench.data.tfds_source`).
Each kind only says how to read its examples; `make_dataset` hands them to the one shared tail
in `bench.data.pipeline`. The source that was really used is always recorded in `Data.source`, and a
synthetic substitute is only ever used when the scenario says `fallback = "synthetic"`, with
`fallback_reason` saying why: a benchmark must never substitute data silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from bench.data import pipeline
from bench.data.arrays import LoadedData, fit_arrays, load_arrays, unavailable
from bench.errors import DataUnavailable, one_line
from bench.scenario.rules import output_shape, pairing_problem
from bench.scenario.schema import ARRAY_DATASETS, DataConfig, Variant

if TYPE_CHECKING:
    import tensorflow as tf


class Data(Protocol):
    """Examples of one split, wherever they live, plus an honest record of where they came from."""

    source: str  # what was really used, human readable
    num_classes: int
    fallback_reason: str | None  # set only when fallback = "synthetic" was taken

    @property
    def shape(self) -> tuple[int, ...]:
        """One example's shape as stored, before preprocessing."""

    def examples(self, cfg: DataConfig,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        """Unbatched (x, y) examples; with an input context, only this input pipeline's share."""


# ---------------------------------------------------------------------------------------------
# Public API


def load(cfg: DataConfig, split: str = "train") -> Data:
    """Resolve `cfg` to the examples of `split` (see `load_arrays` for the in-memory datasets).

    Raises DataUnavailable (one line) when the source is missing or broken and the scenario
    allows no fallback.
    """
    if cfg.name in ARRAY_DATASETS:
        return load_arrays(cfg, split)
    if cfg.name == "tfrecord":
        from bench.data.tfrecord import load_files as load_source
    else:
        from bench.data.tfds_source import load_split as load_source
    try:
        return load_source(cfg, split)
    except DataUnavailable as exc:
        return unavailable(cfg, one_line(exc), split, tuple(cfg.shape), cfg.num_classes,
                            "Fix it or set")


def load_for(variant: Variant) -> Data:
    """The variant's training data, checked against what the variant will do with it: the model
    must take the examples (known only once files are read), and FILE sharding needs a file for
    every input pipeline (one per worker process of a cluster)."""
    data = load(variant.data)
    if problem := pairing_problem(variant.model.name, variant.data, data.shape):
        field, message = problem
        raise DataUnavailable(f"{field}: {message}")
    from bench.data.tfrecord import FileData

    if isinstance(data, FileData):
        data.check_pipelines(variant.data, variant.workers if variant.is_cluster else 1)
    return data


def numpy_feed(data: Data, examples: int) -> tuple[Any, Any]:
    """The in-memory arrays for feed = "numpy" (the scenario rules allow it for in-memory data
    only, so anything else here is a bug, not a user's mistake)."""
    if not isinstance(data, LoadedData):
        raise TypeError(f"feed = \"numpy\" needs in-memory arrays, not {type(data).__name__}")
    return fit_arrays(data, examples)


def model_input_shape(data: Data, cfg: DataConfig) -> tuple[int, ...]:
    """What the model is built for: one example's shape after preprocessing."""
    return output_shape(cfg, data.shape)


def make_dataset(data: Data, cfg: DataConfig, batch_size: int,
                 input_context: tf.distribute.InputContext | None = None, *,
                 train: bool = True) -> tf.data.Dataset:
    """A fresh pipeline over `data`: infinite and shuffled for training, one ordered pass for
    evaluation (`train=False`); see `bench.data.pipeline.batched`.

    With `input_context` (distribute_datasets_from_function) `batch_size` is the GLOBAL batch:
    this pipeline reads only its shard and yields per-replica batches.
    """
    examples = data.examples(cfg, input_context)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    return pipeline.batched(examples, cfg, batch_size, train=train)


