"""A hand-written Keras `fit` benchmark, independent of bench, as the yardstick for harness honesty.

Seed MLP (784-256-128-10) under MirroredStrategy over N logical CPU devices, per-replica batch 64.
Timed the way a careful person does by hand: one `fit` call of warmup + repeats x steps steps, with
a timestamp only at each window boundary (no per-step bookkeeping), examples/s = steps x global
batch / window time. `--per-epoch` instead times whole epochs (epoch 0 is warmup), which also
counts Keras's per-epoch overhead. Prints one JSON line: {"examples_per_sec": [...per window...]}.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np


def seed_mlp(replicas: int, per_replica: int) -> tuple[Any, Any, Any, int]:
    """The seed MLP (uncompiled) under MirroredStrategy over `replicas` logical CPUs, and its
    synthetic pipeline: (strategy, model, dataset, global batch). Shared with
    paired_overhead.py, so both yardsticks train the same thing."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    import keras

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    global_batch = per_replica * replicas
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
    return strategy, model, ds, global_batch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--per-replica", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4, help="with --per-epoch")
    parser.add_argument("--per-epoch", action="store_true")
    parser.add_argument("--sync-callback", action="store_true",
                        help="add a no-op batch callback (makes Keras dispatch callbacks inline)")
    args = parser.parse_args()

    import keras

    strategy, model, ds, global_batch = seed_mlp(args.replicas, args.per_replica)
    with strategy.scope():
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=False)
    stamps: list[float] = []
    if args.per_epoch:
        timer = keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda e, logs: stamps.append(time.perf_counter()),
            on_epoch_end=lambda e, logs: stamps.append(time.perf_counter()))
        callbacks = [timer]
        if args.sync_callback:
            callbacks.append(keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: None))
        model.fit(ds, epochs=args.epochs, steps_per_epoch=args.steps, verbose=0,
                  callbacks=callbacks)
        windows = [stamps[i + 1] - stamps[i] for i in range(0, len(stamps), 2)][1:]
    else:
        boundaries = {args.warmup - 1 + r * args.steps for r in range(args.repeats + 1)}

        def stamp(batch: int, logs: object) -> None:
            if batch in boundaries:
                stamps.append(time.perf_counter())

        model.fit(ds, epochs=1, steps_per_epoch=args.warmup + args.repeats * args.steps,
                  verbose=0, callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=stamp)])
        windows = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    print(json.dumps({"examples_per_sec": [args.steps * global_batch / t for t in windows]}))


if __name__ == "__main__":
    main()
