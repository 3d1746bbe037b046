"""bench.data: every data source with real files, and the tf.data pipeline with real TensorFlow."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import keras  # imported up front, under the real environment: keras fixes its home on import
import numpy as np
import pytest
import tensorflow as tf

from bench.data.arrays import DEBIAN_FASHION_MNIST_DIR, LoadedData, load_arrays
from bench.data.sources import make_dataset
from bench.errors import DataUnavailable
from bench.scenario.schema import DataConfig
from tests.browser import IN_CI

N = 20  # examples in the small hand-written datasets
IMAGES = "train-images-idx3-ubyte"
LABELS = "train-labels-idx1-ubyte"


# ---------------------------------------------------------------------------------------------
# helpers and fixtures


def idx_bytes(array: np.ndarray) -> bytes:
    """An unsigned-byte IDX file, written independently of the parser under test."""
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def write_file(path: Path, payload: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload) if path.name.endswith(".gz") else payload)
    return path


def write_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_idx_dir(directory: Path, x: np.ndarray, y: np.ndarray, suffix: str = ".gz") -> Path:
    write_file(directory / f"{IMAGES}{suffix}", idx_bytes(x))
    write_file(directory / f"{LABELS}{suffix}", idx_bytes(y))
    return directory


@pytest.fixture
def small() -> tuple[np.ndarray, np.ndarray]:
    """MNIST-like arrays as stored on disk: uint8 (N, 28, 28) images, uint8 labels covering 0..9."""
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, (N, 28, 28), dtype=np.uint8), np.arange(N, dtype=np.uint8) % 10


@pytest.fixture
def keras_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty keras cache (and home), so only what a test puts there can be found."""
    home = tmp_path / "keras-home"
    home.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path))
    return home


def assert_arrays(data: LoadedData, x: np.ndarray, y: np.ndarray) -> None:
    assert data.x.dtype == np.uint8 and data.x.shape == (*x.shape, 1)
    assert data.y.dtype == np.int32
    np.testing.assert_array_equal(data.x[..., 0], x)
    np.testing.assert_array_equal(data.y, y)
    assert data.num_classes == 10 and data.fallback_reason is None


def unavailable(cfg: DataConfig) -> str:
    with pytest.raises(DataUnavailable) as info:
        load_arrays(cfg)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------
# synthetic


def test_synthetic_is_deterministic_and_shaped() -> None:
    cfg = DataConfig(num_examples=64, shape=[8, 8, 3], num_classes=3, seed=7)
    first, second = load_arrays(cfg), load_arrays(cfg)
    np.testing.assert_array_equal(first.x, second.x)
    np.testing.assert_array_equal(first.y, second.y)
    assert first.x.shape == (64, 8, 8, 3) and first.x.dtype == np.float32
    assert first.y.shape == (64,) and first.y.dtype == np.int32
    assert set(first.y.tolist()) == {0, 1, 2}
    assert first.num_classes == 3 and first.fallback_reason is None
    assert first.source == "synthetic(seed=7, shape=[8, 8, 3], classes=3, n=64)"
    other = load_arrays(cfg.model_copy(update={"seed": 8}))
    assert not np.array_equal(other.x, first.x)


def test_synthetic_labels_are_learnable() -> None:
    """A nearest-class-mean classifier fit on one half must beat chance by far on the other."""
    data = load_arrays(DataConfig(num_examples=2000, seed=3))
    x, y = data.x.reshape(len(data.y), -1), data.y
    means = np.stack([x[:1000][y[:1000] == c].mean(axis=0) for c in range(10)])
    distances = ((x[1000:, None, :] - means[None]) ** 2).sum(axis=-1)
    accuracy = (distances.argmin(axis=1) == y[1000:]).mean()
    assert accuracy > 0.9


def test_load_arrays_does_not_import_tensorflow() -> None:
    code = ("import sys; from bench.data.arrays import load_arrays; "
            "from bench.scenario.schema import DataConfig;"
            "load_arrays(DataConfig(num_examples=8));"
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=60)


# ---------------------------------------------------------------------------------------------
# explicit path: IDX directory or .npz


@pytest.mark.parametrize("suffix", [".gz", ""])
def test_idx_directory_round_trip(tmp_path: Path, small, suffix: str) -> None:
    x, y = small
    directory = write_idx_dir(tmp_path / "idx", x, y, suffix)
    data = load_arrays(DataConfig(name="mnist", path=str(directory)))
    assert_arrays(data, x, y)
    assert data.source == f"idx:{directory} (train, {N} examples)"


def _bad_magic(payload: bytes) -> bytes:
    return payload[:2] + b"\x0d" + payload[3:]  # type code 0x0d (float32) instead of 0x08


@pytest.mark.parametrize(
    ("name", "corrupt", "reason"),
    [
        (f"{IMAGES}.gz", _bad_magic, "bad magic"),
        (f"{IMAGES}.gz", lambda payload: payload[:-100], "truncated"),
        (IMAGES, lambda payload: payload[:10], "truncated IDX header"),
        (f"{LABELS}.gz", lambda payload: payload + b"\0", "trailing bytes"),
        (f"{IMAGES}.gz", lambda payload: b"", "bad magic"),
    ],
)
def test_corrupt_idx_names_the_file(tmp_path: Path, small, name, corrupt, reason) -> None:
    x, y = small
    is_images = name.startswith(IMAGES)
    target, other = (x, (f"{LABELS}.gz", y)) if is_images else (y, (f"{IMAGES}.gz", x))
    directory = tmp_path / "idx"
    write_file(directory / other[0], idx_bytes(other[1]))
    write_file(directory / name, corrupt(idx_bytes(target)))
    message = unavailable(DataConfig(name="mnist", path=str(directory)))
    assert str(directory / name) in message and reason in message


def _damaged_deflate(payload: bytes) -> bytes:
    packed = bytearray(gzip.compress(payload))
    packed[20:40] = bytes(b ^ 0xFF for b in packed[20:40])
    return bytes(packed)


@pytest.mark.parametrize("damage", [lambda payload: payload, _damaged_deflate],
                         ids=["plain-bytes", "damaged-deflate"])
def test_bad_gzip_names_the_file(tmp_path: Path, small, damage) -> None:
    x, y = small
    directory = write_idx_dir(tmp_path / "idx", x, y)
    (directory / f"{LABELS}.gz").write_bytes(damage(idx_bytes(y)))
    message = unavailable(DataConfig(name="mnist", path=str(directory)))
    assert f"{directory / LABELS}.gz: unreadable" in message


def test_idx_directory_without_files(tmp_path: Path) -> None:
    message = unavailable(DataConfig(name="mnist", path=str(tmp_path)))
    assert f"no {IMAGES}[.gz] in {tmp_path}" in message


def test_npz_path(tmp_path: Path, small) -> None:
    x, y = small
    path = tmp_path / "digits.npz"
    np.savez(path, x_train=x, y_train=y, x_test=x[:2], y_test=y[:2])
    data = load_arrays(DataConfig(name="fashion_mnist", path=str(path)))
    assert_arrays(data, x, y)
    assert data.source == f"npz:{path} (train, {N} examples)"


def test_npz_without_keras_keys(tmp_path: Path, small) -> None:
    path = tmp_path / "other.npz"
    np.savez(path, images=small[0])
    message = unavailable(DataConfig(name="mnist", path=str(path)))
    assert str(path) in message and "x_train" in message


def test_labels_out_of_range_are_rejected(tmp_path: Path, small) -> None:
    path = tmp_path / "bad_labels.npz"
    np.savez(path, x_train=small[0], y_train=small[1] + 5)
    assert "labels must lie in [0, 10)" in unavailable(DataConfig(name="mnist", path=str(path)))


def test_missing_path_is_an_error_not_a_fall_through(keras_home: Path, tmp_path: Path,
                                                     small) -> None:
    np.savez(write_dir(keras_home / "datasets") / "mnist.npz", x_train=small[0], y_train=small[1])
    missing = tmp_path / "nowhere" / "mnist.npz"
    message = unavailable(DataConfig(name="mnist", path=str(missing)))
    assert f"path {missing}: missing" in message and "keras cache" not in message

    data = load_arrays(DataConfig(name="mnist", path=str(missing), fallback="synthetic"))
    assert data.source.startswith("synthetic(") and str(missing) in data.fallback_reason


# ---------------------------------------------------------------------------------------------
# keras cache, Debian package, download, nothing at all


def test_keras_cache_mnist(keras_home: Path, small) -> None:
    x, y = small
    path = write_dir(keras_home / "datasets") / "mnist.npz"
    np.savez(path, x_train=x, y_train=y)
    data = load_arrays(DataConfig(name="mnist"))
    assert_arrays(data, x, y)
    assert data.source == f"keras-cache:{path} (train, {N} examples)"


def test_keras_cache_fashion_mnist_comes_before_debian(keras_home: Path, small) -> None:
    x, y = small
    directory = write_idx_dir(keras_home / "datasets" / "fashion-mnist", x, y)
    data = load_arrays(DataConfig(name="fashion_mnist"))
    assert_arrays(data, x, y)
    assert data.source.startswith(f"keras-cache:{directory} ")


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST_DIR.exists() and not IN_CI,
                    reason="Debian package dataset-fashion-mnist is not installed")
@pytest.mark.usefixtures("keras_home")
def test_debian_fashion_mnist() -> None:
    assert DEBIAN_FASHION_MNIST_DIR.exists(), f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing"
    data = load_arrays(DataConfig(name="fashion_mnist"))
    assert data.source == f"idx:{DEBIAN_FASHION_MNIST_DIR} (train, 60000 examples)"
    assert data.x.shape == (60000, 28, 28, 1) and data.x.dtype == np.uint8
    assert data.y.dtype == np.int32
    np.testing.assert_array_equal(np.bincount(data.y), [6000] * 10)
    assert 0 < data.x.mean() < 255


def test_mnist_with_nothing_available(keras_home: Path) -> None:
    cfg = DataConfig(name="mnist", num_examples=50)
    message = unavailable(cfg)
    cache = keras_home / "datasets" / "mnist.npz"
    assert f"keras cache {cache}: missing; download: disabled" in message
    assert 'data.fallback = "synthetic"' in message

    data = load_arrays(cfg.model_copy(update={"fallback": "synthetic"}))
    assert data.source == "synthetic(seed=0, shape=[28, 28, 1], classes=10, n=50)"
    assert data.x.shape == (50, 28, 28, 1) and data.num_classes == 10
    assert str(cache) in data.fallback_reason and "download: disabled" in data.fallback_reason


@pytest.mark.usefixtures("keras_home")
def test_keras_download(small, monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = small
    monkeypatch.setattr(keras.datasets.mnist, "load_data", lambda: ((x, y), (x[:2], y[:2])))
    data = load_arrays(DataConfig(name="mnist", download=True))
    assert_arrays(data, x, y)
    assert data.source == f"keras-download:mnist (train, {N} examples)"


@pytest.mark.usefixtures("keras_home")
def test_keras_download_failure_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline() -> None:
        raise Exception("URL fetch failure on https://example.invalid/mnist.npz")  # noqa: TRY002

    monkeypatch.setattr(keras.datasets.mnist, "load_data", offline)
    cfg = DataConfig(name="mnist", download=True, fallback="synthetic")
    reason = load_arrays(cfg).fallback_reason
    assert "download: failed (URL fetch failure" in reason and "disabled" not in reason


# ---------------------------------------------------------------------------------------------
# make_dataset


def uint8_data(n: int = N) -> LoadedData:
    x = (np.arange(n * 28 * 28) % 256).astype(np.uint8).reshape(n, 28, 28, 1)
    return LoadedData(x=x, y=np.arange(n, dtype=np.int32) % 10, source="test", num_classes=10)


def first_batch(ds: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    x, y = next(iter(ds))
    return x.numpy(), y.numpy()


def test_make_dataset_specs_values_and_infinity() -> None:
    ds = make_dataset(uint8_data(), DataConfig(shuffle_buffer=16), batch_size=8)
    x_spec, y_spec = ds.element_spec
    assert x_spec.shape == (8, 28, 28, 1) and x_spec.dtype == tf.float32
    assert y_spec.shape == (8,) and y_spec.dtype == tf.int32
    assert ds.cardinality() == tf.data.INFINITE_CARDINALITY
    batches = list(ds.take(3 * N // 8 + 1))  # more than the data holds: repeat() is infinite
    assert len(batches) == 3 * N // 8 + 1
    assert all(x.shape == (8, 28, 28, 1) for x, _ in batches)  # drop_remainder
    values = np.concatenate([x.numpy() for x, _ in batches])
    assert values.min() >= 0.0 and values.max() <= 1.0 and values.max() > 0.9


@pytest.mark.parametrize(
    "overrides",
    [{}, {"cache": False, "prefetch": 0, "map_parallelism": 2}, {"prefetch": 3}],
)
def test_make_dataset_order_and_scaling_without_shuffle(overrides: dict) -> None:
    data = uint8_data()
    cfg = DataConfig(shuffle_buffer=0, **overrides)
    x, y = first_batch(make_dataset(data, cfg, batch_size=4))
    np.testing.assert_allclose(x, data.x[:4] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y, data.y[:4])


def test_make_dataset_keeps_float_input() -> None:
    data = load_arrays(DataConfig(num_examples=16, shape=[4, 4, 1]))
    x, _ = first_batch(make_dataset(data, DataConfig(shuffle_buffer=0), batch_size=4))
    np.testing.assert_array_equal(x, data.x[:4])


def test_make_dataset_shuffle_is_seeded() -> None:
    data, cfg = uint8_data(), DataConfig(shuffle_buffer=N, seed=5)
    _, first = first_batch(make_dataset(data, cfg, batch_size=N))
    _, again = first_batch(make_dataset(data, cfg, batch_size=N))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, data.y)
    assert sorted(first.tolist()) == sorted(data.y.tolist())


def test_make_dataset_with_input_context() -> None:
    data = uint8_data()
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=0, num_replicas_in_sync=2)
    ds = make_dataset(data, DataConfig(shuffle_buffer=0), batch_size=8, input_context=context)
    assert ds.element_spec[0].shape == (4, 28, 28, 1) and ds.element_spec[1].shape == (4,)
    x, _ = first_batch(ds)
    np.testing.assert_allclose(x, data.x[0:8:2] / 255.0, rtol=1e-6)  # pipeline 0's shard


@pytest.mark.parametrize(
    ("auto_shard", "policy"),
    [("auto", "AUTO"), ("data", "DATA"), ("file", "FILE"), ("off", "OFF")],
)
def test_make_dataset_auto_shard_option(auto_shard: str, policy: str) -> None:
    ds = make_dataset(uint8_data(), DataConfig(auto_shard=auto_shard), batch_size=4)
    expected = getattr(tf.data.experimental.AutoShardPolicy, policy)
    assert ds.options().experimental_distribute.auto_shard_policy == expected


def test_make_dataset_prefetch_zero_is_really_off() -> None:
    """tf.data injects a prefetch of its own unless told not to: prefetch = 0 must mean none."""
    assert make_dataset(uint8_data(), DataConfig(prefetch=0), batch_size=4).options() \
        .experimental_optimization.inject_prefetch is False
    assert make_dataset(uint8_data(), DataConfig(), batch_size=4).options() \
        .experimental_optimization.inject_prefetch is not False


def parallel_calls(ds: tf.data.Dataset) -> list[int]:
    """num_parallel_calls of every parallel map in the pipeline's graph, in graph order."""
    graph = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
    consts = {n.name: n for n in graph.node if n.op == "Const"}
    calls = []
    for node in graph.node:
        if node.op.startswith("ParallelMapDataset"):
            value = consts[node.input[1].split(":")[0]].attr["value"].tensor
            calls.append(int(tf.make_ndarray(value)))
    return calls


def test_map_parallelism_reaches_every_map() -> None:
    cfg = DataConfig(map_parallelism=3, resize=[30, 30], random_flip=True, cache=False)
    assert parallel_calls(make_dataset(uint8_data(), cfg, batch_size=4)) == [3, 3]
    auto = parallel_calls(make_dataset(uint8_data(), DataConfig(resize=[30, 30]), batch_size=4))
    assert auto == [tf.data.AUTOTUNE] * 2


def test_preprocessing_resizes_crops_and_augments_training_batches_only() -> None:
    data = uint8_data(8)
    cfg = DataConfig(shuffle_buffer=0, resize=[56, 56], random_crop=[40, 48], random_flip=True,
                     random_brightness=0.5, seed=1)
    x, _ = first_batch(make_dataset(data, cfg, batch_size=8))
    assert x.shape == (8, 40, 48, 1)
    eval_ds = make_dataset(data, cfg, batch_size=3, train=False)
    assert eval_ds.cardinality() == 3  # one pass, the last partial batch kept
    batches = [b.numpy() for b, _ in eval_ds]
    assert [len(b) for b in batches] == [3, 3, 2] and batches[0].shape[1:] == (40, 48, 1)
    # evaluation: the resize and a central crop, nothing random
    resized = tf.image.resize(data.x[:3].astype(np.float32) / 255.0, [56, 56]).numpy()
    np.testing.assert_allclose(batches[0], resized[:, 8:48, 4:52], rtol=1e-5, atol=1e-6)
    assert not np.allclose(x[:3], batches[0])  # training batches were augmented


def test_random_flip_flips_some_examples_left_right() -> None:
    data = uint8_data(16)
    cfg = DataConfig(shuffle_buffer=0, random_flip=True, seed=3)
    x, _ = first_batch(make_dataset(data, cfg, batch_size=16))
    plain = data.x / 255.0
    flipped = [bool(np.allclose(x[i], plain[i][:, ::-1])) for i in range(16)]
    kept = [bool(np.allclose(x[i], plain[i])) for i in range(16)]
    assert all(f or k for f, k in zip(flipped, kept, strict=True))
    assert 0 < sum(flipped) < 16


def test_test_splits_of_every_array_source(tmp_path: Path, small) -> None:
    x, y = small
    directory = write_idx_dir(tmp_path / "idx", x, y)
    write_file(directory / "t10k-images-idx3-ubyte.gz", idx_bytes(x[:5]))
    write_file(directory / "t10k-labels-idx1-ubyte.gz", idx_bytes(y[:5]))
    test = load_arrays(DataConfig(name="mnist", path=str(directory)), "test")
    assert test.source == f"idx:{directory} (test, 5 examples)"
    np.testing.assert_array_equal(test.y, y[:5])
    npz = tmp_path / "d.npz"
    np.savez(npz, x_train=x, y_train=y, x_test=x[:3], y_test=y[:3])
    assert len(load_arrays(DataConfig(name="mnist", path=str(npz)), "test").y) == 3
    cfg = DataConfig(num_examples=100, seed=4)
    train, held_out = load_arrays(cfg), load_arrays(cfg, "test")
    assert len(held_out.y) == 20 and held_out.source.startswith("synthetic(held-out, seed=4")
    assert not np.isin(held_out.x[:, 0, 0, 0], train.x[:, 0, 0, 0]).any()  # fresh examples
    with pytest.raises(DataUnavailable, match="dataset 'synthetic' has no split 'validation'"):
        load_arrays(cfg, "validation")


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST_DIR.exists() and not IN_CI,
                    reason="Debian package dataset-fashion-mnist is not installed")
@pytest.mark.usefixtures("keras_home")
def test_debian_fashion_mnist_test_split() -> None:
    assert DEBIAN_FASHION_MNIST_DIR.exists(), f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing"
    data = load_arrays(DataConfig(name="fashion_mnist"), "test")
    assert data.source == f"idx:{DEBIAN_FASHION_MNIST_DIR} (test, 10000 examples)"
    np.testing.assert_array_equal(np.bincount(data.y), [1000] * 10)


def test_synthetic_arrays_are_shared_through_the_run_cache(tmp_path: Path, monkeypatch) -> None:
    """Variants of a run load the first one's synthetic arrays: the very same examples."""
    cfg = DataConfig(name="synthetic", num_examples=300, shape=[6, 5, 1], seed=3)
    fresh = load_arrays(cfg)
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))
    first, second = load_arrays(cfg), load_arrays(cfg)
    (saved,) = (tmp_path / "cache").iterdir()
    assert saved.name == "synthetic-3-6x5x1-10-300-0.npz"
    for data in (first, second):
        np.testing.assert_array_equal(data.x, fresh.x)
        np.testing.assert_array_equal(data.y, fresh.y)
        assert data.source == fresh.source
    held_out = load_arrays(cfg, split="test")  # another split is another file, not the same one
    assert len(held_out.y) < len(fresh.y) and len(list((tmp_path / "cache").iterdir())) == 2


def test_a_pipeline_traced_into_a_function_takes_its_examples_as_inputs() -> None:
    """A ParameterServer coordinator traces its per-worker dataset function and sends it to every
    worker: the in-memory examples are the function's captured inputs, not constants in it, and
    the pipeline yields what the eager one does."""
    cfg = DataConfig(num_examples=512, seed=5)
    data = load_arrays(cfg)

    @tf.function
    def first_batch() -> tuple[tf.Tensor, tf.Tensor]:
        return next(iter(make_dataset(data, cfg, 32)))

    graph = first_batch.get_concrete_function().graph
    largest_constant = max((op.outputs[0].shape.num_elements() or 0)
                           for op in graph.get_operations() if op.type == "Const")
    assert largest_constant < data.x[0].size  # not even one example is embedded
    assert {tuple(t.shape) for t in graph.external_captures} >= {data.x.shape, data.y.shape}
    eager_x, eager_y = next(iter(make_dataset(data, cfg, 32)))
    traced_x, traced_y = first_batch()
    np.testing.assert_array_equal(traced_x.numpy(), eager_x.numpy())
    np.testing.assert_array_equal(traced_y.numpy(), eager_y.numpy())


def graph_ops(ds: tf.data.Dataset) -> list[str]:
    graph = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
    return [n.op for n in graph.node]


@pytest.mark.parametrize("one_hot", [None, 10])
def test_fixed_shape_examples_are_normalised_in_blocks_with_the_stream_unchanged(one_hot) -> None:
    """In blocks: one map call per 1,024 examples (the first pass of a cached pipeline runs it
    over every example), and exactly the examples, in the order, that a map per example makes."""
    from bench.data.pipeline import NORMALISE_BLOCK, normalised, normaliser

    rng = np.random.default_rng(0)
    n = NORMALISE_BLOCK * 2 + 37  # a last block of its own
    x = rng.integers(0, 256, (n, 6, 6), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.uint8)
    examples = tf.data.Dataset.from_tensor_slices((x, y))
    blocks = normalised(examples, tf.data.AUTOTUNE, one_hot)
    assert "UnbatchDataset" in graph_ops(blocks)
    each = examples.map(normaliser(one_hot))
    assert blocks.element_spec == each.element_spec
    got, want = list(blocks.batch(n)), list(each.batch(n))
    for a, b in zip(got[0], want[0], strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_filled_cache_is_read_by_the_pipeline_built_on_it_in_the_same_order() -> None:
    """`fill_cache`: the first pass's map work runs before the pipeline is returned, none of it
    while the pipeline is read, and the shuffle after the cache starts on the same permutation
    as an unfilled pipeline's (a target's seed trains on the same examples either way)."""
    from bench.data.pipeline import batched
    from bench.scenario.data_config import DataConfig

    mapped = tf.Variable(0, dtype=tf.int64)  # map calls: one a block of up to 1,024 examples

    def counted(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        mapped.assign_add(1)
        return x, y

    cfg = DataConfig(name="synthetic", seed=3, shuffle_buffer=500)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (3000, 4, 4), dtype=np.uint8)
    y = rng.integers(0, 10, 3000).astype(np.uint8)

    def pipeline(fill: bool) -> tf.data.Dataset:
        examples = tf.data.Dataset.from_tensor_slices((x, y)).batch(1).unbatch().map(counted)
        return batched(examples, cfg, 100, fill_cache=fill)

    plain = [b[1].numpy() for b in pipeline(False).take(60)]  # two passes
    mapped.assign(0)
    ds = pipeline(True)
    assert int(mapped) == 3000  # the whole pass, before any batch is read
    filled = [b[1].numpy() for b in ds.take(60)]
    assert int(mapped) == 3000  # nothing more: every pass read the cache
    for a, b in zip(plain, filled, strict=True):
        np.testing.assert_array_equal(a, b)


def test_examples_of_varying_shape_are_normalised_one_by_one() -> None:
    from bench.data.pipeline import normalised

    images = tf.data.Dataset.range(1, 4).map(lambda k: tf.ones([k, 2], tf.uint8) * 255)
    examples = tf.data.Dataset.zip(images, tf.data.Dataset.range(3))
    ds = normalised(examples, 1)
    assert "UnbatchDataset" not in graph_ops(ds)
    assert [x.shape[0] for x, _ in ds] == [1, 2, 3]
    assert all(float(tf.reduce_max(x)) == 1.0 for x, _ in ds)
