"""In-memory datasets as numpy arrays: synthetic, MNIST and Fashion-MNIST, from the first source
that works (a path, the Keras cache, Debian's package, a download when allowed), or a synthetic
substitute only when the scenario says `fallback = "synthetic"`.

numpy only: the parent process, `bench data write-tfrecord` and tests resolve them instantly.
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

import numpy as np

from bench.data.examples import LoadedData
from bench.data.synthetic import synthetic_split
from bench.errors import DataUnavailable, one_line
from bench.scenario.schema import MNIST_SHAPE, DataConfig

log = logging.getLogger(__name__)

# Where Debian's `dataset-fashion-mnist` package installs Fashion-MNIST (IDX, gzipped).
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

MNIST_CLASSES = 10
IDX_UBYTE = 0x08  # IDX type code for unsigned bytes, the only type MNIST-family files use
SPLITS = ("train", "test")
# The upstream MNIST-family file names of each split (images, labels).
IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
# What keras.datasets caches under $KERAS_HOME/datasets (see keras/src/datasets/<name>.py).
KERAS_CACHE_ENTRY = {"mnist": "mnist.npz", "fashion_mnist": "fashion-mnist"}
Arrays = tuple[np.ndarray, np.ndarray]


class _Missing(DataUnavailable):
    """A source that simply is not there: normal, so not worth a warning when another works."""


@dataclass(frozen=True)
class _Source:
    """One place real data may come from; `load` raises DataUnavailable with a short reason."""

    label: str  # how the source is named in "tried: ..." messages
    kind: str  # prefix of LoadedData.source
    location: str
    load: Callable[[], Arrays]


def load_arrays(cfg: DataConfig, split: str = "train") -> LoadedData:
    """Resolve `cfg` to arrays: synthetic, the first real source that works, or fallback.

    Raises DataUnavailable (one line, listing what was tried) when nothing works and the scenario
    allows no fallback.
    """
    if split not in SPLITS:
        raise DataUnavailable(f"dataset '{cfg.name}' has no split '{split}' (it has "
                              f"{', '.join(SPLITS)})")
    if cfg.name == "synthetic":
        return synthetic_split(cfg, tuple(cfg.shape), cfg.num_classes, split)
    failures: list[str] = []
    for source in _sources(cfg, split):
        try:
            x, y = _as_image_batch(*source.load())
        except DataUnavailable as exc:
            failures.append(f"{source.label}: {one_line(exc)}")
            if not isinstance(exc, _Missing):  # broken, not absent: worth a word even if
                log.warning("dataset %r: skipping %s", cfg.name, failures[-1])  # another works
            continue
        described = f"{source.kind}:{source.location} ({split}, {len(y)} examples)"
        return LoadedData(x=x, y=y, source=described, num_classes=MNIST_CLASSES,
                          label_kind=cfg.labels or "sparse")
    if not cfg.download and not cfg.path:
        failures.append("download: disabled")
    hint = "Fix data.path or set" if cfg.path else "Set data.path, data.download = true, or"
    return unavailable(cfg, f"dataset '{cfg.name}' unavailable (tried: {'; '.join(failures)})",
                        split, MNIST_SHAPE, MNIST_CLASSES, hint)


def unavailable(cfg: DataConfig, tried: str, split: str, shape: tuple[int, ...], classes: int,
                 hint: str) -> LoadedData:
    """No real source worked: substitute synthetic data only if the scenario allows it."""
    if cfg.fallback == "synthetic":
        log.warning("%s; using synthetic data instead", tried)
        data = synthetic_split(cfg, shape, classes, split)
        return dataclasses.replace(data, fallback_reason=tried)
    raise DataUnavailable(f'{tried}. {hint} data.fallback = "synthetic".')


# ---------------------------------------------------------------------------------------------
# Real sources, in the order they are tried


def _sources(cfg: DataConfig, split: str) -> list[_Source]:
    """An explicit path is the only candidate: a broken path must not be silently replaced."""
    if cfg.path:
        path = Path(cfg.path).expanduser()
        return [_Source(f"path {path}", _file_kind(path), str(path),
                        lambda: _load_path(path, split))]
    cache = _keras_home() / "datasets" / KERAS_CACHE_ENTRY[cfg.name]
    sources = [_Source(f"keras cache {cache}", "keras-cache", str(cache),
                       lambda: _load_path(cache, split))]
    if cfg.name == "fashion_mnist":
        debian = DEBIAN_FASHION_MNIST_DIR
        sources.append(_Source(f"debian package {debian}", "idx", str(debian),
                               lambda: _load_path(debian, split)))
    if cfg.download:
        sources.append(_Source("download", "keras-download", cfg.name,
                               lambda: _keras_download(cfg.name, split)))
    return sources


def _keras_home() -> Path:
    """The directory keras.datasets caches into, resolved the way keras/src/backend/config does."""
    if "KERAS_HOME" in os.environ:
        return Path(os.environ["KERAS_HOME"]).expanduser()
    home = Path("~").expanduser()
    return (home if os.access(home, os.W_OK) else Path("/tmp")) / ".keras"


def _file_kind(path: Path) -> str:
    return "idx" if path.is_dir() else "npz"


def _load_path(path: Path, split: str) -> Arrays:
    """A directory holds IDX files; a file is a keras-format .npz."""
    if path.is_dir():
        return _load_idx_dir(path, split)
    if path.is_file():
        return _load_npz(path, split)
    raise _Missing("missing")


def _load_npz(path: Path, split: str) -> Arrays:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return archive[f"x_{split}"], archive[f"y_{split}"]
    except KeyError as exc:
        detail = f"no array {exc} (keras format needs x_{split}, y_{split})"
        raise DataUnavailable(f"{path}: {detail}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError) as exc:
        raise DataUnavailable(f"{path}: not a readable .npz file ({one_line(exc)})") from None


def _load_idx_dir(directory: Path, split: str) -> Arrays:
    images, labels = IDX_FILES[split]
    return read_idx(_idx_file(directory, images)), read_idx(_idx_file(directory, labels))


def _idx_file(directory: Path, stem: str) -> Path:
    """IDX files may be gzipped or plain; prefer the gzipped one, as the upstream mirrors ship."""
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            return candidate
    raise _Missing(f"no {stem}[.gz] in {directory}")


def _keras_download(name: str, split: str) -> Arrays:
    """Last resort before fallback: keras.datasets fetches from the internet."""
    try:
        import keras

        train, test = getattr(keras.datasets, name).load_data()
    except Exception as exc:  # noqa: BLE001 -- keras raises bare Exception("URL fetch failure")
        raise DataUnavailable(f"failed ({one_line(exc)})") from None
    return train if split == "train" else test


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
        raise DataUnavailable(f"{path}: unreadable ({one_line(exc)})") from None


def _as_image_batch(x: np.ndarray, y: np.ndarray) -> Arrays:
    """Check arrays look like an MNIST-family split; give images a channel axis."""
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
