"""bench.data.tfrecord: real shard files written and read back with real TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.distribute import input_ops  # the rewrite MultiWorkerMirrored applies

from bench.data.arrays import LoadedData, load_arrays
from bench.data.sources import load, make_dataset
from bench.data.tfrecord import FileData, load_files, write_dataset, write_shards
from bench.errors import BenchError, DataUnavailable
from bench.scenario.schema import DataConfig
from tests.conftest import bench

N = 40  # examples: label i is example i's index, so every example can be traced to its file


@pytest.fixture
def images() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, (N, 6, 5, 1), dtype=np.uint8), np.arange(N, dtype=np.int32)


def written(tmp_path: Path, x: np.ndarray, y: np.ndarray, shards: int = 4) -> str:
    write_shards(x, y, tmp_path, "set", shards)
    return str(tmp_path / "set-*.tfrecord")


def config(pattern: str, **overrides: object) -> DataConfig:
    return DataConfig(**{"name": "tfrecord", "files": pattern, "shuffle_buffer": 0,
                         "cache": False, "num_classes": N, **overrides})


def read_all(ds: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    pairs = list(ds.as_numpy_iterator())
    return np.stack([x for x, _ in pairs]), np.array([y for _, y in pairs])


def test_round_trip_keeps_every_example_and_describes_the_files(tmp_path: Path, images) -> None:
    x, y = images
    pattern = written(tmp_path, x, y)
    data = load_files(config(pattern))
    assert isinstance(data, FileData)
    assert data.shape == (6, 5, 1) and data.dtype == "uint8" and data.num_classes == N
    assert data.source == f"tfrecord:{pattern} (train, 4 files, examples [6, 5, 1] uint8)"
    assert [Path(f).name for f in data.files] == [f"set-{i:05d}-of-00004.tfrecord"
                                                  for i in range(4)]
    xs, ys = read_all(data.examples(config(pattern)))
    assert sorted(ys.tolist()) == list(range(N))
    np.testing.assert_array_equal(xs[np.argsort(ys)], x)  # raw pixels, as written


def test_float_examples_and_the_shared_pipeline_tail(tmp_path: Path) -> None:
    data = load_arrays(DataConfig(num_examples=16, shape=[4, 4, 2], num_classes=3))
    pattern = written(tmp_path, data.x, data.y, shards=2)
    cfg = config(pattern, num_classes=3)
    batch_x, batch_y = next(iter(make_dataset(load(cfg), cfg, batch_size=16)))
    assert batch_x.dtype == tf.float32 and batch_y.dtype == tf.int32
    np.testing.assert_array_equal(np.sort(batch_y.numpy()), np.sort(data.y))
    assert np.isclose(batch_x.numpy().sum(), data.x.sum(), rtol=1e-4)  # float32: not rescaled


def test_file_order_is_shuffled_with_the_seed(tmp_path: Path, images) -> None:
    pattern = written(tmp_path, *images, shards=8)
    data = load_files(config(pattern))

    def first_labels(seed: int) -> list[int]:
        _, ys = read_all(data.examples(config(pattern, seed=seed, interleave_cycle_length=1)))
        return ys.tolist()

    assert first_labels(1) == first_labels(1)
    assert first_labels(1) != first_labels(2)
    assert first_labels(1) != list(range(N))  # shuffled, not the sorted order


def pipeline_labels(data: FileData, cfg: DataConfig, pipelines: int) -> list[set[int]]:
    out = []
    for i in range(pipelines):
        context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=i)
        out.append(set(read_all(data.examples(cfg, context))[1].tolist()))
    return out


def file_of(label: int, shards: int = 4) -> int:
    return label // (N // shards)  # write_shards writes consecutive examples per file


def test_each_input_pipeline_reads_its_own_files(tmp_path: Path, images) -> None:
    pattern = written(tmp_path, *images)
    data = load_files(config(pattern))
    for auto_shard in ("file", "auto"):
        first, second = pipeline_labels(data, config(pattern, auto_shard=auto_shard), 2)
        assert first.isdisjoint(second) and first | second == set(range(N))
        assert {file_of(y) for y in first}.isdisjoint({file_of(y) for y in second})
        assert len({file_of(y) for y in first}) == 2
    # DATA: every pipeline reads every file and keeps every other record
    first, second = pipeline_labels(data, config(pattern, auto_shard="data"), 2)
    assert first.isdisjoint(second) and first | second == set(range(N))
    assert {file_of(y) for y in first} == set(range(4))


def test_auto_shards_records_when_files_are_too_few(tmp_path: Path, images) -> None:
    pattern = written(tmp_path, *images, shards=1)
    data = load_files(config(pattern))
    shares = pipeline_labels(data, config(pattern), 2)
    assert shares[0].isdisjoint(shares[1]) and shares[0] | shares[1] == set(range(N))
    with pytest.raises(DataUnavailable) as info:
        data.examples(config(pattern, auto_shard="file"),
                      tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0))
    assert str(info.value) == (f"data.files: 1 file(s) match '{pattern}' but auto_shard = 'file' "
                               "needs one per input pipeline (2)")


def test_multi_worker_file_auto_sharding_splits_the_files(tmp_path: Path, images) -> None:
    """The FILE policy the pipeline carries is what tf.distribute applies per worker."""
    pattern = written(tmp_path, *images)
    cfg = config(pattern, auto_shard="file")
    ds = make_dataset(load(cfg), cfg, batch_size=5, train=False)
    shares = []
    for worker in range(2):
        sharded = input_ops.auto_shard_dataset(ds, 2, worker, 2)
        shares.append({int(y) for _, batch in sharded.as_numpy_iterator() for y in batch})
    assert shares[0].isdisjoint(shares[1]) and shares[0] | shares[1] == set(range(N))
    assert {file_of(y) for y in shares[0]}.isdisjoint({file_of(y) for y in shares[1]})


def test_no_matching_files_is_one_line_or_a_recorded_fallback(tmp_path: Path) -> None:
    pattern = str(tmp_path / "none-*.tfrecord")
    with pytest.raises(DataUnavailable) as info:
        load(config(pattern))
    message = str(info.value)
    assert message.startswith(f"data.files: no files match '{pattern}'") and "\n" not in message
    assert 'data.fallback = "synthetic"' in message
    fallback = load(config(pattern, fallback="synthetic", shape=[6, 5, 1], num_examples=8))
    assert isinstance(fallback, LoadedData) and fallback.shape == (6, 5, 1)
    assert fallback.source.startswith("synthetic(") and "no files match" in fallback.fallback_reason


def test_files_that_are_not_bench_records_name_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk-0.tfrecord"
    junk.write_bytes(b"this is not a TFRecord file at all")
    with pytest.raises(DataUnavailable, match=f"data.files: {junk}: not a TFRecord file"):
        load(config(str(junk)))
    other = tmp_path / "other-0.tfrecord"
    with tf.io.TFRecordWriter(str(other)) as writer:
        writer.write(tf.train.Example().SerializeToString())
    with pytest.raises(DataUnavailable, match=f"{other}: records lack image, dtype, shape, label"):
        load(config(str(other)))
    with pytest.raises(DataUnavailable, match="data.eval_files: not set"):
        load(config(str(other)), split="test")


def test_writer_refuses_to_overwrite_and_bad_shard_counts(tmp_path: Path, images) -> None:
    x, y = images
    write_shards(x, y, tmp_path, "set", 2)
    with pytest.raises(BenchError, match="set-00000-of-00002.tfrecord: exists; not overwriting"):
        write_shards(x, y, tmp_path, "set", 2)
    with pytest.raises(BenchError, match="--shards: 41 shards for 40 examples"):
        write_shards(x, y, tmp_path, "other", 41)


def test_write_dataset_from_a_built_in_dataset(tmp_path: Path) -> None:
    cfg = DataConfig(name="synthetic", num_examples=30, shape=[3, 3, 1], num_classes=4)
    out = write_dataset(cfg, tmp_path, shards=3, split="test")
    assert out.examples == 6 and out.shape == (3, 3, 1) and out.dtype == "float32"
    assert out.pattern == str(tmp_path / "synthetic-test-*-of-*.tfrecord")
    read = load(DataConfig(name="tfrecord", files=out.pattern, num_classes=4))
    assert read.source.startswith(f"tfrecord:{out.pattern} (train, 3 files")
    _, ys = read_all(read.examples(DataConfig(name="tfrecord", files=out.pattern)))
    held_out = load_arrays(cfg, "test")
    assert sorted(ys.tolist()) == sorted(held_out.y.tolist())


def test_cli_rejects_what_it_cannot_write_in_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('[scenario]\nname = "s"\n[data]\nname = "tfrecord"\nfiles = "x/*"\n'
                        '[batch]\nper_replica = 8\n[[strategies]]\nname = "default"\n')
    for source, message in ((str(scenario), f"{scenario}: data.name: 'tfrecord' is read from "
                                            "files already"),
                            ("imagenet", "imagenet: neither a scenario file nor one of")):
        proc = bench("data", "write-tfrecord", source, "--out", str(tmp_path / "out"))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith(f"error: {message}") and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_cluster_needs_a_file_per_worker_for_file_sharding(tmp_path: Path, images) -> None:
    from bench.data.sources import load_for
    from bench.scenario.loading import parse_scenario
    from bench.scenario.matrix import expand

    pattern = written(tmp_path, *images, shards=1)
    doc = {"scenario": {"name": "s"}, "batch": {"per_replica": 8}, "train": {"api": "ctl"},
           "data": {"name": "tfrecord", "files": pattern, "auto_shard": "file", "num_classes": N},
           "strategies": [{"name": "default"}, {"name": "multi_worker_mirrored", "workers": 2}]}
    single, cluster = expand(parse_scenario(doc))
    assert load_for(single).files == (str(tmp_path / "set-00000-of-00001.tfrecord"),)
    with pytest.raises(DataUnavailable, match=r"1 file\(s\) match .* needs one per input "
                                              r"pipeline \(2\)"):
        load_for(cluster)
