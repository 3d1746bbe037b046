"""tensorflow_datasets by name, offline: a tiny dataset prepared in the test, then read for real."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bench.data.arrays import LoadedData
from bench.data.sources import load, make_dataset
from bench.errors import DataUnavailable
from bench.scenario.schema import DataConfig
from tests.conftest import bench_run, write_scenario

try:
    import tensorflow_datasets as tfds
except ImportError:  # the [tfds] extra (in [test]) brings it; CI must not skip silently
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("tensorflow_datasets is not installed (pip install 'bench[tfds]')",
                allow_module_level=True)

NAME = "bench_tiny_images"
SIZES = {"train": 48, "test": 20}


def images(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """Dim noise with one bright band of two rows per class: learnable in a few steps."""
    band = np.arange(12)[None, :, None, None] // 2 == labels[:, None, None, None]
    noise = rng.integers(0, 64, (len(labels), 12, 10, 1), dtype=np.uint8)
    return np.where(band, np.uint8(255), noise)


def prepare(data_dir: Path, shards_hint: int = 1) -> dict[str, np.ndarray]:
    """A real tfds dataset on disk (dataset_info.json, features, TFRecord shards), built offline."""
    rng = np.random.default_rng(0)
    labels = {split: rng.integers(0, 5, n) for split, n in SIZES.items()}
    splits = {split: tf.data.Dataset.from_tensor_slices({"image": images(rng, y), "label": y})
              for split, y in labels.items()}
    features = tfds.features.FeaturesDict({
        "image": tfds.features.Image(shape=(12, 10, 1)),
        "label": tfds.features.ClassLabel(num_classes=5)})
    tfds.dataset_builders.store_as_tfds_dataset(
        name=NAME, version="1.0.0", features=features, split_datasets=splits,
        data_dir=str(data_dir))
    return labels


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    data_dir = tmp_path_factory.mktemp("tfds")
    return data_dir, prepare(data_dir)


def config(data_dir: Path, **overrides: object) -> DataConfig:
    return DataConfig(**{"name": "tfds", "tfds_name": NAME, "data_dir": str(data_dir),
                         "shuffle_buffer": 0, "cache": False, **overrides})


def test_a_prepared_dataset_loads_offline(prepared) -> None:
    data_dir, labels = prepared
    data = load(config(data_dir))
    assert data.shape == (12, 10, 1) and data.num_classes == 5 and data.fallback_reason is None
    assert data.source == (f"tfds:{NAME} (train, 48 examples, 1 file(s), under "
                           f"{data_dir / NAME / '1.0.0'})")
    x, y = next(iter(make_dataset(data, config(data_dir), batch_size=48)))
    assert x.shape == (48, 12, 10, 1) and x.dtype == tf.float32 and y.dtype == tf.int32
    assert sorted(y.numpy().tolist()) == sorted(labels["train"].tolist())
    assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0
    test = load(config(data_dir), split="test")
    assert test.source.startswith(f"tfds:{NAME} (test, 20 examples")
    # two input pipelines over a one-file split share its records, every example once
    shares = []
    for i in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
        shares.append([int(y) for _, y in data.examples(config(data_dir), context)])
    assert len(shares[0]) == len(shares[1]) == 24
    assert sorted(shares[0] + shares[1]) == sorted(labels["train"].tolist())


@pytest.mark.parametrize(("overrides", "message"), [
    ({"tfds_name": "mnist"}, "tfds dataset 'mnist' is not prepared under {dir} (bench never "
                             "downloads: run `tfds build mnist --data_dir DIR`"),
    ({"tfds_name": "no_such_dataset_anywhere"}, "tfds dataset 'no_such_dataset_anywhere': not a "
                                               "registered tfds dataset and nothing prepared "
                                               "under {dir}"),
])
def test_what_is_missing_is_said_in_one_line(tmp_path: Path, overrides: dict,
                                             message: str) -> None:
    with pytest.raises(DataUnavailable) as info:
        load(config(tmp_path, **overrides))
    text = str(info.value)
    assert text.startswith(message.format(dir=tmp_path)) and "\n" not in text
    assert text.endswith('data.fallback = "synthetic".')
    fallback = load(config(tmp_path, fallback="synthetic", num_examples=8, **overrides))
    assert isinstance(fallback, LoadedData) and fallback.source.startswith("synthetic(")
    assert fallback.fallback_reason.startswith(message.format(dir=tmp_path)[:40])


def test_a_split_the_dataset_lacks(prepared) -> None:
    with pytest.raises(DataUnavailable, match=f"tfds dataset '{NAME}' has no split 'validation' "
                                              r"\(it has test, train\)"):
        load(config(prepared[0]), split="validation")


def test_without_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # import now raises
    with pytest.raises(DataUnavailable, match=r"tfds dataset 'mnist': the tensorflow_datasets "
                                              r"package is not installed .*bench\[tfds\]"):
        load(config(tmp_path, tfds_name="mnist"))


@pytest.mark.slow
def test_bench_run_trains_and_checks_accuracy_on_a_tfds_split(prepared, tmp_path: Path) -> None:
    data_dir, _ = prepared
    body = f"""
strategies = [{{ name = "default" }}]
measure = {{ warmup_steps = 1, steps = 3, repeats = 1, trace_steps = 0 }}
[data]
name = "tfds"
tfds_name = "{NAME}"
data_dir = "{data_dir}"
resize = [16, 16]
[train]
api = "fit"
[check]
accuracy = {{ min = 0.8, steps = 20 }}
"""
    run = bench_run(write_scenario(tmp_path, body, name="tfds"), tmp_path / "results", "--no-control")
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    (rec,) = run.records
    assert rec["status"] == "ok", rec["reason"]
    assert rec["data_source"].startswith(f"tfds:{NAME} (train, 48 examples, 1 file(s)")
    check = rec["checks"]["accuracy"]
    # 5 classes: chance is 0.2; the bands are learnt in 20 steps (1.0 in a direct Keras fit)
    assert check["status"] == "ok" and check["accuracy"] >= check["min"] == 0.8, check
    assert check["eval_examples"] == 20
    assert check["eval_source"].startswith(f"tfds:{NAME} (test, 20 examples")
