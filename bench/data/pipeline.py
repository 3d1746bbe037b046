"""The tf.data tail every source shares: scale, cache, shuffle, repeat, preprocess, batch, prefetch.

A source only says how to read its examples (arrays in memory, TFRecord shards, a tfds split,
each sharded over input pipelines its own way); everything after that is this one function, so
switching the source changes nothing else about the pipeline being measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.data import preprocess
from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf


def count(value: int | str) -> int:
    """"autotune" means tf.data.AUTOTUNE; anything else is a literal count."""
    import tensorflow as tf

    return tf.data.AUTOTUNE if value == "autotune" else int(value)


def _feature(x: tf.Tensor) -> tf.Tensor:
    """uint8 pixels to [0, 1] float32, other reals to float32; integer ids stay integers."""
    import tensorflow as tf

    if x.dtype == tf.uint8:
        return tf.cast(x, tf.float32) / 255.0
    return tf.cast(x, tf.float32) if x.dtype.is_floating else x


def normaliser(one_hot_classes: int | None = None) -> Any:
    """Map fn over (features, labels), after slicing (so no float copy of the whole set): every
    feature as `_feature` makes it; class ids as int32, or as one-hot rows of
    `one_hot_classes`; real-valued targets as float32."""
    import tensorflow as tf

    def normalise(x: Any, y: tf.Tensor) -> tuple[Any, tf.Tensor]:
        x = tf.nest.map_structure(_feature, x)
        if y.dtype.is_integer:
            y = (tf.one_hot(y, one_hot_classes) if one_hot_classes
                 else tf.cast(y, tf.int32))
        else:
            y = tf.cast(y, tf.float32)
        return x, y

    return normalise


# Examples per block of the vectorised map (the tf.data guide's "vectorizing mapping"); 0: one
# call per example (tests/benchmarks/first_pass.py sets it to compare).
NORMALISE_BLOCK = 1024


def normalised(examples: tf.data.Dataset, parallel: int,
               one_hot_classes: int | None = None) -> tf.data.Dataset:
    """Each example as `normaliser` makes it, in blocks of NORMALISE_BLOCK where every example
    has one fixed shape: the same examples in the same order, one op call a block instead of one
    an example. A cached pipeline's first pass runs this map over every example: per example
    that pass of Fashion-MNIST took 2.6 s against 0.5 s in blocks, and the pass that fills the
    cache ran slower than the ones that read it (measurements.md#first-pass)."""
    import tensorflow as tf

    fn = normaliser(one_hot_classes)
    specs = tf.nest.flatten(examples.element_spec)
    fixed = all(isinstance(s, tf.TensorSpec) and s.shape.is_fully_defined() for s in specs)
    if not NORMALISE_BLOCK or not fixed:
        return examples.map(fn, num_parallel_calls=parallel)
    ds = examples.batch(NORMALISE_BLOCK).map(fn, num_parallel_calls=parallel).unbatch()
    known = tf.get_static_value(examples.cardinality())  # unbatch forgets it; a pass needs it
    if known is None or known < 0:
        return ds
    return ds.apply(tf.data.experimental.assert_cardinality(int(known)))


def filled(cached: tf.data.Dataset) -> None:
    """Read `cached`, a pipeline that ends in its cache, through once, so that every pass of a
    pipeline built on it reads the cache: the first pass's map work is done before a clock
    starts, not inside it. The pipeline's order is unchanged (a shuffle after the cache is made
    afterwards and starts on its first permutation). Only where the pipeline is made eagerly;
    a pipeline a tf.function makes (a ParameterServer's workers') fills as it trains."""
    import tensorflow as tf

    if tf.executing_eagerly():  # read in blocks: one reduce step per 1,024 examples
        cached.batch(1024).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)


def options(cfg: DataConfig) -> tf.data.Options:
    """The auto-shard policy a multi-worker strategy applies to this pipeline; and prefetch = 0
    really off (tf.data otherwise injects a prefetch of its own after the last op)."""
    import tensorflow as tf

    policies = tf.data.experimental.AutoShardPolicy
    opts = tf.data.Options()
    opts.experimental_distribute.auto_shard_policy = {
        "auto": policies.AUTO, "data": policies.DATA, "file": policies.FILE, "off": policies.OFF,
    }[cfg.auto_shard]
    if cfg.prefetch == 0:
        opts.experimental_optimization.inject_prefetch = False
    return opts


def shard_examples(ds: tf.data.Dataset,
                   input_context: tf.distribute.InputContext | None) -> tf.data.Dataset:
    """This input pipeline's share of the examples (every n-th one), before any per-example
    work, so each pipeline maps, caches and shuffles only its own."""
    if input_context is None:
        return ds
    return ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)


def batched(examples: tf.data.Dataset, cfg: DataConfig, batch_size: int, *,
            train: bool = True, one_hot_classes: int | None = None,
            fill_cache: bool = False) -> tf.data.Dataset:
    """Training: an infinite, shuffled, augmented pipeline (the harness takes a fixed number of
    steps from it). Evaluation (`train=False`): one pass in order, deterministic preprocessing
    only, the last partial batch kept. With `one_hot_classes`, class ids become one-hot rows.
    `fill_cache`: the cache read through once here (`filled`)."""
    parallel = count(cfg.map_parallelism)
    ds = normalised(examples, parallel, one_hot_classes)
    if train:
        if cfg.cache:
            ds = ds.cache()
            if fill_cache:
                filled(ds)
        if cfg.shuffle_buffer > 0:
            ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed)
        ds = ds.repeat()
    # After the cache: augmentation must differ every epoch, and resized images would not fit.
    if (fn := preprocess.map_fn(cfg, train)) is not None:
        ds = ds.map(fn, num_parallel_calls=parallel)
    ds = ds.batch(batch_size, drop_remainder=train)
    if cfg.prefetch != 0:
        ds = ds.prefetch(count(cfg.prefetch))
    return ds.with_options(options(cfg))
