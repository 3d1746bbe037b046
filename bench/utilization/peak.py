"""The machine's peak: a matmul microbenchmark per device kind and precision, cached per machine.

MFU needs a denominator. Vendor peaks are unknown for most CPUs (and for a shared VM's slice of
one), so bench measures what a large matmul achieves on this device in this dtype: the best of
several timed runs of a chain of n x n matmuls. The result is cached in
~/.cache/bench/peak.json (`ChildEnv.cache_dir` overrides), keyed by the device's model (the GPU's
for a GPU; for a CPU its model, matmul flags and usable CPUs, as two VMs' CPUs of one name can
differ in both), device kind, dtype and TensorFlow version, so it is measured per machine, not
per variant, and a cache shared by hosts with different devices keeps them apart.

The worker measures while it holds the machine alone (before it finishes: bench.worker), since
a matmul beside another variant's process reads a fraction of the peak.

One measurement on a shared machine can land in someone else's burst (274 against 369 GFLOP/s
in float32 were cached here), so the first MEASUREMENTS uses of a key each add a measurement,
taken in a different process and usually a different run, and the peak is the best of them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv
from bench.fingerprint import cpu_identity

MATMUL_N = 1024
CHAIN = 8
RUNS = 7
MEASUREMENTS = 3  # separate processes that each measure before the cached peak is settled
COMPUTE_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}


def cache_path() -> Path:
    root = ChildEnv.from_env().cache_dir or Path.home() / ".cache" / "bench"
    return Path(root) / "peak.json"


def measure_matmul_flops(device: str, dtype: str, n: int = MATMUL_N) -> float:
    """Best FLOP/s of a chain of n x n matmuls on `device` in `dtype`."""
    import tensorflow as tf

    with tf.device(device):
        a = tf.cast(tf.random.stateless_normal((n, n), seed=(3, 4)) / n ** 0.5, dtype)

        @tf.function
        def chain(x: Any) -> Any:
            for _ in range(CHAIN):
                x = tf.matmul(x, a)
            return tf.reduce_sum(tf.cast(x[:1, :1], tf.float32))

        float(chain(a))  # trace, warm up
        best = float("inf")
        for _ in range(RUNS):
            start = time.perf_counter()
            float(chain(a))
            best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 * CHAIN / best


def peak_key(model: str, device_kind: str, dtype: str, tf_version: str, n: int = MATMUL_N) -> str:
    """The cache key of one peak."""
    return f"{model}|{device_kind}|{dtype}|tf{tf_version}|n{n}"


def device_model(device: str, device_kind: str) -> str:
    """The model the peak on `device` belongs to: TensorFlow's name for a GPU, else the CPU's
    identity (fingerprint.cpu_identity).

    `device` is a logical GPU ("/gpu:1"); several logical GPUs may share one physical GPU, so
    the logical index is mapped onto the physical GPUs in the order TensorFlow creates them.
    """
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(device)
    if device_kind != "gpu" and (spec.device_type or "").upper() != "GPU":
        return cpu_identity()
    physical = tf.config.get_visible_devices("GPU")
    logical = max(len(tf.config.list_logical_devices("GPU")), len(physical), 1)
    index = (spec.device_index or 0) * len(physical) // logical
    if index < len(physical):
        name = tf.config.experimental.get_device_details(physical[index]).get("device_name")
        if name:
            return str(name)
    return "unknown GPU"


Cached = tuple[dict[str, Any], str, str, list[float]]  # the cache, a key, its model, samples


def _cached(device: str, device_kind: str, precision: str) -> Cached:
    """The whole cache, this peak's key and model, and its samples so far."""
    import tensorflow as tf

    model = device_model(device, device_kind)
    key = peak_key(model, device_kind, COMPUTE_DTYPE[precision], tf.__version__)
    try:
        cache = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        cache = {}
    entry = cache.get(key) or {}
    # A cache written before `samples` existed holds one measurement in `flops_per_s`.
    samples = entry.get("samples") or ([entry["flops_per_s"]] if entry else [])
    return cache, key, model, samples


def _add_measurement(device: str, precision: str, cached: Cached) -> dict[str, Any]:
    """Measure once more, write the cache with this peak's samples grown by it (`cached`: the
    cache as read just before), and return the peak's new entry."""
    cache, key, model, samples = cached
    dtype = COMPUTE_DTYPE[precision]
    samples = [*samples, measure_matmul_flops(device, dtype)]
    cache[key] = {"flops_per_s": max(samples), "samples": samples, "device": device,
                  "model": model, "dtype": dtype,
                  "method": f"best of {len(samples)} measurement(s), each the best of "
                  f"{RUNS} chains of {CHAIN} {MATMUL_N}x{MATMUL_N} matmuls",
                  "measured_at": time.time()}
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=2))
    os.replace(tmp, path)
    return cache[key]


def settle(device: str, device_kind: str, precision: str) -> list[float] | None:
    """Add a measurement to the cached peak while it has fewer than MEASUREMENTS, and say when
    ([start, end], Unix time; None when it was settled). Call it only while this process has
    the machine to itself."""
    cached = _cached(device, device_kind, precision)
    if len(cached[3]) >= MEASUREMENTS:
        return None
    start = time.time()
    _add_measurement(device, precision, cached)
    return [start, time.time()]


def peak_flops(device: str, device_kind: str, precision: str) -> dict[str, Any]:
    """Peak FLOP/s of one device for the policy's compute dtype: the cached peak, measured now
    only when the cache has none (`settle` adds the measurements that make it a peak)."""
    cached = _cached(device, device_kind, precision)
    cache, key, model, samples = cached
    entry = cache[key] if samples else _add_measurement(device, precision, cached)
    return {**entry, "model": model, "key": key, "cache": str(cache_path())}
