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

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bench.data import pipeline
from bench.data.arrays import LoadedData, load_arrays, unavailable
from bench.data.examples import fit_arrays
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
    # what the model trains on: "sparse" (class ids), "one_hot", "binary", "regression", or
    # "float" (a user's real-valued labels, which only a loss can tell apart)
    label_kind: str

    @property
    def shape(self) -> Any:
        """One example's shape as stored, before preprocessing (each column's, for named
        features)."""

    @property
    def outputs(self) -> int:
        """How many outputs the model needs for these labels (a builder's `num_classes`)."""

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
    if cfg.is_user_function:
        from bench.data.user_source import load as load_user

        return load_user(cfg, split)
    if cfg.name == "tfrecord":
        from bench.data.tfrecord import load_files as load_source
    else:
        from bench.data.tfds_source import load_split as load_source
    try:
        return dataclasses.replace(load_source(cfg, split), label_kind=cfg.labels or "sparse")
    except DataUnavailable as exc:
        return unavailable(cfg, one_line(exc), split, tuple(cfg.shape), cfg.num_classes,
                            "Fix it or set")


def load_for(variant: Variant) -> Data:
    """The variant's training data, checked against what the variant will do with it: the model
    must take the examples (known only once files are read), and FILE sharding needs a file for
    every input pipeline (one per worker process of a cluster)."""
    data = load(variant.data)
    if isinstance(data.shape, tuple) and (
            problem := pairing_problem(variant.model.name, variant.data, data.shape)):
        field, message = problem
        raise DataUnavailable(f"{field}: {message}")
    from bench.data.tfrecord import FileData

    if isinstance(data, FileData):
        data.check_pipelines(variant.data, variant.workers if variant.is_cluster else 1)
    return data


def numpy_feed(data: Data, examples: int) -> tuple[Any, Any]:
    """The in-memory arrays for feed = "numpy": built-in arrays, or every example of a user's
    finite dataset (the scenario rules allow nothing else, so anything else here is a bug, not a
    user's mistake)."""
    from bench.data.user_source import UserData

    if isinstance(data, UserData):
        x, y = data.arrays()
        data = LoadedData(x=x, y=y, source=data.source, num_classes=data.num_classes,
                          label_kind=data.label_kind)
    if not isinstance(data, LoadedData):
        raise TypeError(f"feed = \"numpy\" needs in-memory arrays, not {type(data).__name__}")
    return fit_arrays(data, examples)


def train_examples(data: Data) -> int | None:
    """Examples in one pass over the training split: known for in-memory arrays (a user's
    function's arrays too), None for sources read as they stream."""
    return len(data.y) if hasattr(data, "y") else None


def cached_examples(data: Data, cfg: DataConfig) -> int | None:
    """How many examples a cached training pipeline makes its first pass over (tf.data's cache
    fills in it): in-memory arrays only; None when not cached, or the size is not known."""
    if not cfg.cache or cfg.feed == "numpy" or not isinstance(data, LoadedData):
        return None
    return train_examples(data)


@dataclass(frozen=True)
class ModelInputs:
    """What a model builder is told about the data: one example's shape after preprocessing (or
    each named feature's), the outputs its labels need, the id columns' vocabularies, and the
    labels' kind (which picks the default loss)."""

    shape: Any
    outputs: int
    vocabularies: dict[str, int]
    label_kind: str


def model_inputs(data: Data, cfg: DataConfig) -> ModelInputs:
    vocabularies = {name: f.vocab for name, f in (cfg.features or {}).items()
                    if f.vocab is not None}
    return ModelInputs(model_input_shape(data, cfg), data.outputs, vocabularies, data.label_kind)


def model_input_shape(data: Data, cfg: DataConfig) -> Any:
    """What the model is built for: one example's shape after preprocessing (each named
    column's shape, which preprocessing never touches)."""
    return output_shape(cfg, data.shape) if isinstance(data.shape, tuple) else data.shape


def make_dataset(data: Data, cfg: DataConfig, batch_size: int,
                 input_context: tf.distribute.InputContext | None = None, *,
                 train: bool = True, fill_cache: bool = False) -> tf.data.Dataset:
    """A fresh pipeline over `data`: infinite and shuffled for training, one ordered pass for
    evaluation (`train=False`); see `bench.data.pipeline.batched`.

    With `input_context` (distribute_datasets_from_function) `batch_size` is the GLOBAL batch:
    this pipeline reads only its shard and yields per-replica batches. `fill_cache`: a cached
    pipeline's first pass read before it is returned (bench.data.pipeline.filled).
    """
    examples = data.examples(cfg, input_context)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    one_hot = data.num_classes if data.label_kind == "one_hot" else None
    return pipeline.batched(examples, cfg, batch_size, train=train, one_hot_classes=one_hot,
                            fill_cache=fill_cache)


