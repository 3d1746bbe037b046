"""Input data: arrays from the first source that works, then a tf.data pipeline over them.

`load_arrays` is numpy only (no TensorFlow import) so the parent process and tests can resolve and
describe a data source instantly; TensorFlow is imported inside `make_dataset` and the
keras-download branch. The source that was really used is always recorded in `LoadedData.source`,
and a synthetic substitute is only ever used when the scenario says `fallback = "synthetic"`,
with `fallback_reason` saying why: a benchmark must never substitute data silently.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import math
import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench.errors import DataUnavailable
from bench.scenario import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

log = logging.getLogger(__name__)

# Where Debian's `dataset-fashion-mnist` package installs Fashion-MNIST (IDX, gzipped).
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

MNIST_SHAPE = (28, 28, 1)
MNIST_CLASSES = 10
IDX_UBYTE = 0x08  # IDX type code for unsigned bytes, the only type MNIST-family files use
IDX_FILES = {"images": "train-images-idx3-ubyte", "labels": "train-labels-idx1-ubyte"}
# What keras.datasets caches under $KERAS_HOME/datasets (see keras/src/datasets/<name>.py).
KERAS_CACHE_ENTRY = {"mnist": "mnist.npz", "fashion_mnist": "fashion-mnist"}
SYNTHETIC_CLASS_SEPARATION = 0.5  # scale of the per-class offset; keeps the task learnable

Arrays = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class LoadedData:
    """Training arrays plus an honest record of where they came from."""

    x: np.ndarray  # uint8 or float32, (N, H, W, C)
    y: np.ndarray  # int32, (N,)
    source: str  # what was really used, human readable
    num_classes: int
    fallback_reason: str | None = None  # set only when fallback = "synthetic" was taken


class _Missing(DataUnavailable):
    """A source that simply is not there: normal, so not worth a warning when another works."""


@dataclass(frozen=True)
class _Source:
    """One place real data may come from; `load` raises DataUnavailable with a short reason."""

    label: str  # how the source is named in "tried: ..." messages
    kind: str  # prefix of LoadedData.source
    location: str
    load: Callable[[], Arrays]


# ---------------------------------------------------------------------------------------------
# Public API


def load_arrays(cfg: DataConfig) -> LoadedData:
    """Resolve `cfg` to training arrays: synthetic, the first real source that works, or fallback.

    Raises DataUnavailable (one line, listing what was tried) when nothing works and the scenario
    allows no fallback.
    """
    if cfg.name == "synthetic":
        data = _synthetic(cfg.seed, tuple(cfg.shape), cfg.num_classes, cfg.num_examples)
        return _with_variable_lengths(data, cfg.seed) if cfg.variable_length else data
    failures: list[str] = []
    for source in _sources(cfg):
        try:
            x, y = _as_image_batch(*source.load())
        except DataUnavailable as exc:
            failures.append(f"{source.label}: {_one_line(exc)}")
            if not isinstance(exc, _Missing):  # broken, not absent: worth a word even if
                log.warning("dataset %r: skipping %s", cfg.name, failures[-1])  # another works
            continue
        described = f"{source.kind}:{source.location} (train, {len(y)} examples)"
        return LoadedData(x=x, y=y, source=described, num_classes=MNIST_CLASSES)
    if not cfg.download and not cfg.path:
        failures.append("download: disabled")
    return _unavailable(cfg, f"dataset '{cfg.name}' unavailable (tried: {'; '.join(failures)})")


def _unavailable(cfg: DataConfig, tried: str) -> LoadedData:
    """No real source worked: substitute synthetic data only if the scenario allows it."""
    if cfg.fallback == "synthetic":
        log.warning("%s; using synthetic data instead", tried)
        data = _synthetic(cfg.seed, MNIST_SHAPE, MNIST_CLASSES, cfg.num_examples)
        return dataclasses.replace(data, fallback_reason=tried)
    hint = "Fix data.path or set" if cfg.path else "Set data.path, data.download = true, or"
    raise DataUnavailable(f'{tried}. {hint} data.fallback = "synthetic".')


def normalise(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Map fn: uint8 pixels to [0, 1] float32 (after slicing, so no float copy of the whole set)."""
    import tensorflow as tf

    x = tf.cast(x, tf.float32) / 255.0 if x.dtype == tf.uint8 else tf.cast(x, tf.float32)
    return x, tf.cast(y, tf.int32)


def make_dataset(data: LoadedData, cfg: DataConfig, batch_size: int,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    """A fresh, infinite, batched pipeline; the harness takes a fixed number of steps from it.

    With `input_context` (distribute_datasets_from_function) `batch_size` is the GLOBAL batch:
    this pipeline reads only its shard and yields per-replica batches.
    """
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((data.x, data.y))
    if input_context is not None:
        # Shard first so each pipeline maps, caches and shuffles only its own examples.
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    ds = ds.map(normalise, num_parallel_calls=_tf_count(cfg.map_parallelism))
    if cfg.cache:
        ds = ds.cache()
    if cfg.shuffle_buffer > 0:
        ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed)
    ds = ds.repeat().batch(batch_size, drop_remainder=True)
    if cfg.prefetch != 0:
        ds = ds.prefetch(_tf_count(cfg.prefetch))
    return ds.with_options(_options(cfg))


# ---------------------------------------------------------------------------------------------
# tf.data helpers


def _tf_count(value: int | str) -> int:
    """"autotune" means tf.data.AUTOTUNE; anything else is a literal count."""
    import tensorflow as tf

    return tf.data.AUTOTUNE if value == "autotune" else int(value)


def _options(cfg: DataConfig) -> tf.data.Options:
    import tensorflow as tf

    policies = tf.data.experimental.AutoShardPolicy
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = {
        "auto": policies.AUTO, "data": policies.DATA, "file": policies.FILE, "off": policies.OFF,
    }[cfg.auto_shard]
    return options


# ---------------------------------------------------------------------------------------------
# Synthetic data


def _synthetic(seed: int, shape: tuple[int, ...], num_classes: int, n: int) -> LoadedData:
    """Gaussian noise around one random prototype per class: deterministic, and learnable."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, size=n, dtype=np.int32)
    prototypes = rng.standard_normal((num_classes, *shape), dtype=np.float32)
    x = rng.standard_normal((n, *shape), dtype=np.float32)
    x += SYNTHETIC_CLASS_SEPARATION * prototypes[y]
    source = f"synthetic(seed={seed}, shape={list(shape)}, classes={num_classes}, n={n})"
    return LoadedData(x=x, y=y, source=source, num_classes=num_classes)


def _with_variable_lengths(data: LoadedData, seed: int) -> LoadedData:
    """Series of random lengths in [T/4, T], zero-padded at the end, as the seed's LSTM sees."""
    rng = np.random.default_rng(seed + 1)
    steps = data.x.shape[1]
    lengths = rng.integers(max(1, steps // 4), steps + 1, size=len(data.x))
    data.x[np.arange(steps)[None, :] >= lengths[:, None]] = 0.0
    source = data.source.replace("synthetic(", "synthetic(variable lengths, ", 1)
    return LoadedData(x=data.x, y=data.y, source=source, num_classes=data.num_classes)


# ---------------------------------------------------------------------------------------------
# Real sources, in the order they are tried


def _sources(cfg: DataConfig) -> list[_Source]:
    """An explicit path is the only candidate: a broken path must not be silently replaced."""
    if cfg.path:
        path = Path(cfg.path).expanduser()
        return [_Source(f"path {path}", _file_kind(path), str(path), lambda: _load_path(path))]
    cache = _keras_home() / "datasets" / KERAS_CACHE_ENTRY[cfg.name]
    sources = [_Source(f"keras cache {cache}", "keras-cache", str(cache),
                       lambda: _load_path(cache))]
    if cfg.name == "fashion_mnist":
        debian = DEBIAN_FASHION_MNIST_DIR
        sources.append(_Source(f"debian package {debian}", "idx", str(debian),
                               lambda: _load_path(debian)))
    if cfg.download:
        sources.append(_Source("download", "keras-download", cfg.name,
                               lambda: _keras_download(cfg.name)))
    return sources


def _keras_home() -> Path:
    """The directory keras.datasets caches into, resolved the way keras/src/backend/config does."""
    if "KERAS_HOME" in os.environ:
        return Path(os.environ["KERAS_HOME"]).expanduser()
    home = Path("~").expanduser()
    return (home if os.access(home, os.W_OK) else Path("/tmp")) / ".keras"


def _file_kind(path: Path) -> str:
    return "idx" if path.is_dir() else "npz"


def _load_path(path: Path) -> Arrays:
    """A directory holds IDX files; a file is a keras-format .npz."""
    if path.is_dir():
        return _load_idx_dir(path)
    if path.is_file():
        return _load_npz(path)
    raise _Missing("missing")


def _load_npz(path: Path) -> Arrays:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return archive["x_train"], archive["y_train"]
    except KeyError as exc:
        detail = f"no array {exc} (keras format needs x_train, y_train)"
        raise DataUnavailable(f"{path}: {detail}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError) as exc:
        raise DataUnavailable(f"{path}: not a readable .npz file ({_one_line(exc)})") from None


def _load_idx_dir(directory: Path) -> Arrays:
    images = read_idx(_idx_file(directory, IDX_FILES["images"]))
    labels = read_idx(_idx_file(directory, IDX_FILES["labels"]))
    return images, labels


def _idx_file(directory: Path, stem: str) -> Path:
    """IDX files may be gzipped or plain; prefer the gzipped one, as the upstream mirrors ship."""
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            return candidate
    raise _Missing(f"no {stem}[.gz] in {directory}")


def _keras_download(name: str) -> Arrays:
    """Last resort before fallback: keras.datasets fetches from the internet."""
    try:
        import keras

        (x, y), _ = getattr(keras.datasets, name).load_data()
    except Exception as exc:  # noqa: BLE001 -- keras raises bare Exception("URL fetch failure")
        raise DataUnavailable(f"failed ({_one_line(exc)})") from None
    return x, y


# ---------------------------------------------------------------------------------------------
# Formats and validation


def read_idx(path: Path) -> np.ndarray:
    """Parse one IDX file (big-endian: 0x0000, type 0x08, ndim, ndim uint32 sizes, uint8 data)."""
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] != IDX_UBYTE or raw[3] == 0:
        raise DataUnavailable(f"{path}: not an unsigned-byte IDX file (bad magic "
                              f"0x{raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataUnavailable(f"{path}: truncated IDX header")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected, actual = math.prod(dims), len(raw) - header
    if actual != expected:
        problem = "truncated" if actual < expected else "has trailing bytes"
        raise DataUnavailable(f"{path}: {problem}: header says {dims} = {expected} bytes of data, "
                              f"found {actual}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _read_bytes(path: Path) -> bytes:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise DataUnavailable(f"{path}: unreadable ({_one_line(exc)})") from None


def _as_image_batch(x: np.ndarray, y: np.ndarray) -> Arrays:
    """Check arrays look like an MNIST-family training split; give images a channel axis."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 3:
        x = x[..., np.newaxis]
    problems = _image_problems(x, y)
    if problems:
        raise DataUnavailable(problems)
    return x, y.astype(np.int32, copy=False)


def _image_problems(x: np.ndarray, y: np.ndarray) -> str | None:
    if x.ndim != 4:
        return f"images must be (N, H, W[, C]), got shape {x.shape}"
    if x.dtype not in (np.uint8, np.float32):
        return f"images must be uint8 or float32, got {x.dtype}"
    if y.ndim != 1 or len(y) != len(x):
        return f"labels shape {y.shape} does not match {len(x)} images"
    if not np.issubdtype(y.dtype, np.integer):
        return f"labels must be integers, got {y.dtype}"
    if len(y) and (y.min() < 0 or y.max() >= MNIST_CLASSES):
        return f"labels must lie in [0, {MNIST_CLASSES}), got [{y.min()}, {y.max()}]"
    return None


def _one_line(exc: BaseException) -> str:
    """Exception text squeezed onto one line, so every DataUnavailable message stays one line."""
    return " ".join(str(exc).split()) or type(exc).__name__
