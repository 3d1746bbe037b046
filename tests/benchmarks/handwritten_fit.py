"""A hand-written Keras `fit` benchmark, independent of bench, as the yardstick for harness honesty.

Seed MLP (784-256-128-10) under MirroredStrategy over N logical CPU devices, per-replica batch 64.
Timed the way people time by hand: wall time of whole epochs (epoch 0 is warmup), no per-step hooks.
Prints one JSON line: {"examples_per_sec": [...per timed epoch...]}.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--per-replica", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()

    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas)
    import keras

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.replicas)])
    global_batch = args.per_replica * args.replicas
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10_000, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, size=10_000).astype("int32")
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(10_000, seed=0).repeat()
          .batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
    with strategy.scope():
        model = keras.Sequential([
            keras.Input((28, 28, 1)), keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"), keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10)])
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=False)
    stamps: list[float] = []
    timer = keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: stamps.append(
        time.perf_counter()), on_epoch_end=lambda e, logs: stamps.append(time.perf_counter()))
    model.fit(ds, epochs=args.epochs, steps_per_epoch=args.steps, verbose=0, callbacks=[timer])
    epochs = [stamps[i + 1] - stamps[i] for i in range(0, len(stamps), 2)][1:]  # drop warmup
    print(json.dumps({"examples_per_sec": [args.steps * global_batch / t for t in epochs]}))


if __name__ == "__main__":
    main()
