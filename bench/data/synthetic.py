"""Synthetic examples of every kind the tutorials train on, deterministic and learnable.

Features are one tensor of `data.shape`, or named columns (`data.features`: integer ids below a
vocabulary size, or real values), as a recommender sees them. Labels are class ids, one-hot rows
(class ids the pipeline turns into rows), 0/1 targets or real-valued targets:

- one tensor, class labels: Gaussian noise around one random prototype per class (2 classes for
  binary targets);
- one tensor, regression: Gaussian features, and targets a fixed random linear map of them;
- named columns: a score per example, the dense columns' fixed random projection plus a fixed
  random weight per id; targets threshold it (binary), cut it into equally full classes, or
  are the score (regression). Ids are drawn log-uniformly, so a few are hot, as in real logs.

The held-out split draws fresh examples around the same prototypes and weights. numpy only.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np

from bench.child_env import ChildEnv
from bench.data.examples import LoadedData
from bench.scenario.schema import DataConfig, FeatureConfig

SYNTHETIC_CLASS_SEPARATION = 0.5  # scale of the per-class offset; keeps the task learnable
SYNTHETIC_HELD_OUT = 5  # the synthetic test split has num_examples / 5 examples
TARGET_NOISE = 0.1  # standard deviation of the noise on regression targets


def synthetic_split(cfg: DataConfig, shape: tuple[int, ...], num_classes: int,
                    split: str) -> LoadedData:
    """The `split` of the synthetic data `cfg` describes (a fallback passes the shape and classes
    of the dataset it stands in for)."""
    data = _cached(cfg, shape, num_classes, split == "test")
    return _with_variable_lengths(data, cfg.seed) if cfg.variable_length else data


def _kind(cfg: DataConfig) -> str:
    return cfg.labels or "sparse"


def _cached(cfg: DataConfig, shape: tuple[int, ...], num_classes: int,
            held_out: bool) -> LoadedData:
    """Drawing 10,000 MNIST-sized examples takes a quarter of a second, paid again by every
    variant of a run; with a data cache (`ChildEnv.data_cache`: the runner sets it to the run's
    cache folder) the first variant saves the arrays and the others load the same bytes."""
    cache = ChildEnv.from_env().data_cache
    if not cache:
        return _draw(cfg, shape, num_classes, held_out)
    path = Path(cache) / f"synthetic-{_cache_key(cfg, shape, num_classes, held_out)}.npz"
    try:
        return _load(path, num_classes, _kind(cfg))
    except (OSError, KeyError, ValueError):
        pass  # not there yet (or torn): draw it
    data = _draw(cfg, shape, num_classes, held_out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    columns = data.x if isinstance(data.x, dict) else {"": data.x}
    np.savez(tmp, y=data.y, source=np.array(data.source),
             **{f"x.{name}": values for name, values in columns.items()})
    os.replace(tmp, path)
    return data


def _cache_key(cfg: DataConfig, shape: tuple[int, ...], num_classes: int, held_out: bool) -> str:
    columns = "x".join(map(str, shape)) if cfg.features is None else "-".join(
        f"{name}{f.vocab or ''}x{'x'.join(map(str, f.shape))}"
        for name, f in sorted(cfg.features.items()))
    labels = "" if _kind(cfg) == "sparse" else "-" + _kind(cfg) + "x".join(
        map(str, cfg.label_shape or []))
    return f"{cfg.seed}-{columns}-{num_classes}{labels}-{cfg.num_examples}-{int(held_out)}"


def _load(path: Path, num_classes: int, kind: str) -> LoadedData:
    with np.load(path, allow_pickle=False) as saved:
        columns = {key[2:]: saved[key] for key in saved.files if key.startswith("x.")}
        x = columns[""] if list(columns) == [""] else columns
        return LoadedData(x=x, y=saved["y"], source=str(saved["source"]),
                          num_classes=num_classes, label_kind=kind)


def _draw(cfg: DataConfig, shape: tuple[int, ...], num_classes: int,
          held_out: bool) -> LoadedData:
    kind, n, seed = _kind(cfg), cfg.num_examples, cfg.seed
    if cfg.features is not None:
        x, y = _columns(cfg.features, kind, num_classes, seed, n, held_out)
        described = ", ".join(f"{name}={'ids<' + str(f.vocab) if f.is_ids else list(f.shape)}"
                              for name, f in cfg.features.items())
    elif kind == "regression":
        x, y = _regression(shape, tuple(cfg.label_shape or [1]), seed, n, held_out)
        described = f"shape={list(shape)}"
    else:
        classes = 2 if kind == "binary" else num_classes
        x, y = _prototypes(seed, shape, classes, n, held_out)
        described = f"shape={list(shape)}, classes={classes}"
        if kind == "binary":
            y = y.astype(np.float32)[:, None]
    split = "held-out, " if held_out else ""
    labels = "" if kind == "sparse" else f", labels={kind}"
    source = f"synthetic({split}seed={seed}, {described}{labels}, n={len(y)})"
    return LoadedData(x=x, y=y, source=source, num_classes=num_classes, label_kind=kind)


def _prototypes(seed: int, shape: tuple[int, ...], num_classes: int, n: int,
                held_out: bool) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian noise around one random prototype per class; class ids."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, size=n, dtype=np.int32)
    prototypes = rng.standard_normal((num_classes, *shape), dtype=np.float32)
    if held_out:
        n = max(1, n // SYNTHETIC_HELD_OUT)
        rng = np.random.default_rng([seed, 1])
        y = rng.integers(0, num_classes, size=n, dtype=np.int32)
    x = rng.standard_normal((n, *shape), dtype=np.float32)
    x += SYNTHETIC_CLASS_SEPARATION * prototypes[y]
    return x, y


def _regression(shape: tuple[int, ...], label_shape: tuple[int, ...], seed: int, n: int,
                held_out: bool) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian features; targets a fixed random linear map of them, plus a little noise."""
    width = math.prod(shape)
    weights = np.random.default_rng(seed).standard_normal(
        (width, math.prod(label_shape)), dtype=np.float32) / np.float32(math.sqrt(width))
    rng = np.random.default_rng([seed, 1] if held_out else [seed, 0])
    n = max(1, n // SYNTHETIC_HELD_OUT) if held_out else n
    x = rng.standard_normal((n, *shape), dtype=np.float32)
    y = x.reshape(n, width) @ weights
    y += TARGET_NOISE * rng.standard_normal(y.shape, dtype=np.float32)
    return x, y.reshape(n, *label_shape)


def _columns(features: dict[str, FeatureConfig], kind: str, num_classes: int, seed: int, n: int,
             held_out: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Named columns and their labels, from one score per example (see the module's text)."""
    fixed = np.random.default_rng([seed, 2])  # the weights: the same in every split
    rng = np.random.default_rng([seed, 3] if held_out else [seed, 4])
    n = max(1, n // SYNTHETIC_HELD_OUT) if held_out else n
    x: dict[str, np.ndarray] = {}
    score = np.zeros(n, dtype=np.float32)
    for name, feature in features.items():
        shape = (n, *feature.shape)
        if feature.vocab is not None:
            ids = np.floor(np.exp(rng.uniform(0.0, math.log(feature.vocab), size=shape))) - 1
            x[name] = ids.astype(np.int64)
            weight = fixed.standard_normal(feature.vocab, dtype=np.float32)
            score += weight[x[name]].reshape(n, -1).mean(axis=1)
        else:
            x[name] = rng.standard_normal(shape, dtype=np.float32)
            width = max(1, math.prod(feature.shape))
            projection = fixed.standard_normal(width, dtype=np.float32) / np.float32(
                math.sqrt(width))
            score += x[name].reshape(n, width) @ projection
    return x, _labels_from_score(score, kind, num_classes, fixed)


def _labels_from_score(score: np.ndarray, kind: str, num_classes: int,
                       fixed: np.random.Generator) -> np.ndarray:
    if kind == "regression":
        return score[:, None].astype(np.float32)
    if kind == "binary":
        return (score > 0).astype(np.float32)[:, None]
    # equally full classes: cut at the quantiles of the score's distribution, drawn once
    reference = fixed.standard_normal(4096).astype(np.float32) * float(np.std(score) or 1.0)
    edges = np.quantile(reference, np.linspace(0, 1, num_classes + 1)[1:-1])
    return np.searchsorted(edges, score).astype(np.int32)


def _with_variable_lengths(data: LoadedData, seed: int) -> LoadedData:
    """Series of random lengths in [T/4, T], zero-padded at the end, as the seed's LSTM sees."""
    assert isinstance(data.x, np.ndarray)  # the rules allow variable lengths for series only
    rng = np.random.default_rng(seed + 1)
    steps = data.x.shape[1]
    lengths = rng.integers(max(1, steps // 4), steps + 1, size=len(data.x))
    data.x[np.arange(steps)[None, :] >= lengths[:, None]] = 0.0
    source = data.source.replace("synthetic(", "synthetic(variable lengths, ", 1)
    return dataclasses.replace(data, source=source)
