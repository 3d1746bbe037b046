"""A user's own input pipeline: `[data] name = "package.module:function"`.

The function returns a `tf.data.Dataset` of unbatched `(features, labels)` examples, features a
tensor or a dict of tensors. It is called with whichever of `input_context` (a
`tf.distribute.InputContext`: this input pipeline's share, for sharding files per worker),
`seed` and `split` ("train", or "test" for check.accuracy) its signature names. Everything after
it is bench's shared tail (`bench.data.pipeline`: cache, shuffle, repeat, batch, prefetch), as for
built-in data; a function that takes no input context is sharded by examples there.

What is wrong with the function shows only here, in the worker: each problem is one
WorkloadError line that names the function, and the variant fails with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data import pipeline
from bench.data.examples import model_outputs
from bench.errors import WorkloadError, one_line
from bench.scenario.imports import accepts, call_with, import_object
from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

# Examples `feed = "numpy"` reads into memory at most: past it, the dataset is not one that fits.
MAX_IN_MEMORY = 10_000_000
_BATCHING = ("BatchDataset", "PaddedBatchDataset", "ParallelBatchDataset", "DenseToRagged")


def _batched_in(ds: Any) -> bool:
    """Whether a `.batch()` is in the dataset's pipeline (tf.data's Python objects keep their
    inputs in `_input_dataset`, or `_datasets` for zip and concatenate)."""
    seen: list[Any] = [ds]
    while seen:
        node = seen.pop()
        if any(kind in type(node).__name__ for kind in _BATCHING):
            return True
        seen += [n for n in [getattr(node, "_input_dataset", None)] if n is not None]
        seen += list(getattr(node, "_datasets", None) or [])
    return False


def _shape(spec: Any) -> tuple[int | None, ...]:
    return tuple(spec.shape.as_list())


def call_dataset(cfg: DataConfig, split: str = "train",
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    """The user's dataset for `split`, this input pipeline's share of it when the function takes
    an input context, checked to be unbatched (features, labels) examples."""
    import tensorflow as tf

    what = f"data.name '{cfg.name}'"
    fn = import_object(cfg.name, "data.name")
    if split != "train" and not accepts(fn, "split"):
        raise WorkloadError(f"{what}: check.accuracy evaluates on the '{split}' split; give "
                            "the function a `split` parameter (\"train\" or \"test\")")
    try:
        ds = call_with(fn, {"input_context": input_context, "seed": cfg.seed, "split": split},
                       what)
    except WorkloadError:
        raise
    except Exception as exc:  # the user's function may raise anything
        raise WorkloadError(f"{what} raised {type(exc).__name__}: {one_line(exc)}") from None
    if not isinstance(ds, tf.data.Dataset):
        raise WorkloadError(f"{what} returned {type(ds).__name__}, not a tf.data.Dataset")
    spec = ds.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise WorkloadError(f"{what} yields {_describe(spec)}: bench needs (features, labels) "
                            "pairs")
    if _batched_in(ds):
        raise WorkloadError(f"{what} returns batched examples (a .batch() is in its pipeline): "
                            "return single examples; bench batches by the scenario's rule")
    return ds


def _describe(spec: Any) -> str:
    if isinstance(spec, dict):
        return "dicts of " + ", ".join(spec)
    if isinstance(spec, tuple):
        return f"tuples of {len(spec)}"
    return f"single tensors of shape {list(_shape(spec))}"


@dataclass(frozen=True)
class UserData:
    """A user's dataset function and what its examples look like."""

    cfg: DataConfig
    split: str
    element_spec: Any
    takes_context: bool
    num_classes: int
    label_kind: str  # "sparse" for integer labels; "float" for real-valued ones
    source: str
    fallback_reason: str | None = None

    @property
    def shape(self) -> Any:
        """One example's shape, or each named feature's."""
        features = self.element_spec[0]
        if isinstance(features, dict):
            return {name: _shape(spec) for name, spec in features.items()}
        return _shape(features)

    @property
    def outputs(self) -> int:
        labels = tuple(d or 1 for d in _shape(self.element_spec[1]))
        return model_outputs("sparse" if self.label_kind == "sparse" else "regression",
                             self.num_classes, labels)

    def examples(self, cfg: DataConfig,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        ds = call_dataset(cfg, self.split, input_context if self.takes_context else None)
        return ds if self.takes_context else pipeline.shard_examples(ds, input_context)

    def arrays(self) -> tuple[Any, np.ndarray]:
        """Every example in memory (feed = "numpy"), for a finite dataset that fits."""
        import tensorflow as tf

        ds = call_dataset(self.cfg, self.split)
        if ds.cardinality() == tf.data.INFINITE_CARDINALITY:
            raise WorkloadError(f"data.name '{self.cfg.name}' is infinite: feed = \"numpy\" "
                                "needs a finite dataset that fits in memory")
        xs, ys, count = [], [], 0
        for x, y in ds.batch(4096).as_numpy_iterator():
            xs.append(x)
            ys.append(y)
            count += len(y)
            if count > MAX_IN_MEMORY:
                raise WorkloadError(f"data.name '{self.cfg.name}' yields more than "
                                    f"{MAX_IN_MEMORY:,} examples: too many for feed = \"numpy\"")
        if isinstance(xs[0], dict):
            return {k: np.concatenate([x[k] for x in xs]) for k in xs[0]}, np.concatenate(ys)
        return np.concatenate(xs), np.concatenate(ys)


def load(cfg: DataConfig, split: str = "train") -> UserData:
    """Call the function once to learn what its examples look like."""
    fn = import_object(cfg.name, "data.name")
    ds = call_dataset(cfg, split)
    features, labels = ds.element_spec
    integer = labels.dtype.is_integer
    classes = cfg.num_classes
    if not integer and labels.shape.rank and (labels.shape[-1] or 1) > 1:
        classes = int(labels.shape[-1])  # one-hot rows (or several targets) set the width
    size = math.prod(d or 1 for d in _shape(labels))
    kinds = ", ".join(f"{k}: {list(_shape(v))}" for k, v in features.items()) if isinstance(
        features, dict) else str(list(_shape(features)))
    source = (f"{cfg.name}({split}; features {kinds}; labels {labels.dtype.name} "
              f"{list(_shape(labels))}{'' if integer else f', {size} per example'})")
    return UserData(cfg=cfg, split=split, element_spec=ds.element_spec,
                    takes_context=accepts(fn, "input_context"), num_classes=classes,
                    label_kind="sparse" if integer else "float", source=source)
