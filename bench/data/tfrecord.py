"""TFRecord shards: bench's example schema, a writer for any built-in dataset, and the reader.

Schema of one `tf.train.Example` (written by `write_shards`, read by `FileData`):

    image   bytes      the pixels, raw, C order, little-endian, in the type `dtype` names
    dtype   bytes      "uint8" or "float32"
    shape   int64 x k  the example's shape, e.g. [28, 28, 1]
    label   int64      the class, in [0, data.num_classes)

Every example of a shard set has one shape and dtype; the reader learns them from the first
record, so a scenario needs only the glob. Reading is `list_files` (sorted, then shuffled with
the scenario's seed) → `interleave` of `TFRecordDataset`s → parse; the rest of the pipeline is
the shared tail in `bench.data.pipeline`. Input pipelines share the files, never the examples: with an
input context each pipeline takes every n-th file, and a multi-worker strategy's FILE auto-shard
policy does the same when it distributes the dataset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data import pipeline
from bench.errors import BenchError, DataUnavailable
from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

DTYPES = ("uint8", "float32")
SUFFIX = ".tfrecord"


def shard_names(prefix: str, shards: int) -> list[str]:
    """`<prefix>-00000-of-00004.tfrecord`, ...: sorted names are the shards in order."""
    return [f"{prefix}-{i:05d}-of-{shards:05d}{SUFFIX}" for i in range(shards)]


def example_bytes(x: np.ndarray, label: int) -> bytes:
    """One example in bench's schema, serialised."""
    import tensorflow as tf

    pixels = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<"))
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[pixels.tobytes()])),
        "dtype": tf.train.Feature(bytes_list=tf.train.BytesList(value=[x.dtype.name.encode()])),
        "shape": tf.train.Feature(int64_list=tf.train.Int64List(value=list(x.shape))),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_shards(x: np.ndarray, y: np.ndarray, out_dir: Path, prefix: str,
                 shards: int) -> list[Path]:
    """Write the examples in order as `shards` files of consecutive examples; never overwrites."""
    import tensorflow as tf

    if x.dtype.name not in DTYPES:
        raise BenchError(f"examples are {x.dtype.name}; bench's TFRecord schema holds "
                         f"{' or '.join(DTYPES)}")
    if not 1 <= shards <= len(y):
        raise BenchError(f"--shards: {shards} shards for {len(y)} examples (1 to {len(y)})")
    paths = [out_dir / name for name in shard_names(prefix, shards)]
    if existing := [p for p in paths if p.exists()]:
        raise BenchError(f"{existing[0]}: exists; not overwriting")
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, indices in zip(paths, np.array_split(np.arange(len(y)), shards), strict=True):
        with tf.io.TFRecordWriter(str(path)) as writer:
            for i in indices:
                writer.write(example_bytes(x[i], int(y[i])))
    return paths


@dataclass(frozen=True)
class FileData:
    """A shard set in bench's schema: what the files hold, learnt from their first record."""

    pattern: str
    files: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    num_classes: int
    source: str
    fallback_reason: str | None = None
    label_kind: str = "sparse"  # class ids, or one-hot rows the pipeline makes of them

    @property
    def outputs(self) -> int:
        return self.num_classes

    def examples(self, cfg: DataConfig,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        import tensorflow as tf

        files = tf.data.Dataset.list_files(self.pattern, shuffle=False)  # sorted
        by_file = False
        if input_context is not None:
            self.check_pipelines(cfg, input_context.num_input_pipelines)
            # "file", or "auto" with a file for every pipeline (as tf.distribute's AUTO does)
            by_file = cfg.auto_shard == "file" or (
                cfg.auto_shard == "auto" and len(self.files) >= input_context.num_input_pipelines)
        if by_file:  # before the shuffle, so the pipelines split one order of files
            files = files.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
        files = files.shuffle(len(self.files), seed=cfg.seed)
        records = files.interleave(
            tf.data.TFRecordDataset, cycle_length=pipeline.count(cfg.interleave_cycle_length),
            num_parallel_calls=pipeline.count(cfg.interleave_parallelism), deterministic=True)
        if not by_file:  # DATA, or too few files: all pipelines read all, keep every n-th record
            records = pipeline.shard_examples(records, input_context)
        return records.map(self._parser(), num_parallel_calls=pipeline.count(cfg.map_parallelism))

    def check_pipelines(self, cfg: DataConfig, pipelines: int) -> None:
        """FILE sharding gives each input pipeline its own files: there must be enough."""
        if cfg.auto_shard == "file" and len(self.files) < pipelines:
            raise DataUnavailable(f"data.files: {len(self.files)} file(s) match '{self.pattern}' "
                                  f"but auto_shard = 'file' needs one per input pipeline "
                                  f"({pipelines})")

    def _parser(self) -> Any:
        import tensorflow as tf

        spec = {"image": tf.io.FixedLenFeature([], tf.string),
                "label": tf.io.FixedLenFeature([], tf.int64)}
        dtype, shape = tf.dtypes.as_dtype(self.dtype), list(self.shape)

        def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            features = tf.io.parse_single_example(record, spec)
            x = tf.reshape(tf.io.decode_raw(features["image"], dtype), shape)
            return x, tf.cast(features["label"], tf.int32)

        return parse


def load_files(cfg: DataConfig, split: str = "train") -> FileData:
    """The shard set of `split` ("train": data.files, "test": data.eval_files), described."""
    import tensorflow as tf

    field = "files" if split == "train" else "eval_files"
    pattern = cfg.files if split == "train" else cfg.eval_files
    if pattern is None:
        raise DataUnavailable(f"data.{field}: not set, so there is no '{split}' split")
    pattern = str(Path(pattern).expanduser()) if "://" not in pattern else pattern
    try:
        files = tuple(sorted(tf.io.gfile.glob(pattern)))
    except tf.errors.OpError as exc:
        raise DataUnavailable(f"data.{field}: cannot list '{pattern}' ({exc.message})") from None
    if not files:
        raise DataUnavailable(f"data.{field}: no files match '{pattern}'")
    shape, dtype = _first_example_layout(files, field)
    source = (f"tfrecord:{pattern} ({split}, {len(files)} file{'s' if len(files) > 1 else ''}, "
              f"examples {list(shape)} {dtype})")
    return FileData(pattern=pattern, files=files, shape=shape, dtype=dtype,
                    num_classes=cfg.num_classes, source=source)


def _first_example_layout(files: tuple[str, ...], field: str) -> tuple[tuple[int, ...], str]:
    """Shape and dtype from the first record found (a shard may be empty), checked."""
    import tensorflow as tf

    for path in files:
        try:
            raw = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError as exc:
            raise DataUnavailable(f"data.{field}: {path}: not a TFRecord file "
                                  f"({_first_line(exc.message)})") from None
        if raw is not None:
            return _layout(tf.train.Example.FromString(raw.numpy()), path, field)
    raise DataUnavailable(f"data.{field}: all {len(files)} file(s) matching are empty")


def _layout(example: Any, path: str, field: str) -> tuple[tuple[int, ...], str]:
    features = example.features.feature
    missing = [k for k in ("image", "dtype", "shape", "label") if k not in features]
    if missing:
        raise DataUnavailable(f"data.{field}: {path}: records lack {', '.join(missing)} (bench's "
                              "schema: image, dtype, shape, label; see bench data write-tfrecord)")
    dtype = features["dtype"].bytes_list.value[0].decode(errors="replace")
    shape = tuple(int(d) for d in features["shape"].int64_list.value)
    if dtype not in DTYPES:
        raise DataUnavailable(f"data.{field}: {path}: dtype '{dtype}' (expected "
                              f"{' or '.join(DTYPES)})")
    size = len(features["image"].bytes_list.value[0])
    if not shape or size != math.prod(shape) * np.dtype(dtype).itemsize:
        raise DataUnavailable(f"data.{field}: {path}: image has {size} bytes, not shape "
                              f"{list(shape)} of {dtype}")
    return shape, dtype


def _first_line(text: str) -> str:
    return " ".join(text.split(";")[0].split())


@dataclass(frozen=True)
class Written:
    """What `write_dataset` wrote, and the glob a scenario's data.files takes to read it."""

    paths: list[Path]
    pattern: str
    examples: int
    shape: tuple[int, ...]
    dtype: str
    num_classes: int
    source: str
    fallback_reason: str | None


def write_dataset(cfg: DataConfig, out_dir: Path, shards: int, split: str = "train",
                  prefix: str | None = None) -> Written:
    """Write an in-memory dataset's `split` (whatever `load_arrays` resolves `cfg` to) as
    TFRecord shards in bench's schema."""
    from bench.data.arrays import load_arrays

    data = load_arrays(cfg, split)
    prefix = prefix or f"{cfg.name}-{split}"
    paths = write_shards(data.x, data.y, out_dir, prefix, shards)
    return Written(paths=paths, pattern=str(out_dir / f"{prefix}-*-of-*{SUFFIX}"),
                   examples=len(data.y), shape=data.shape, dtype=data.x.dtype.name,
                   num_classes=data.num_classes, source=data.source,
                   fallback_reason=data.fallback_reason)
