"""A user's own training loop, independent of bench: the yardstick of bench's headline.

The seed MLP (784-256-128-10, logits) on 60,000 synthetic MNIST-shaped examples, batch 64 per
replica, under the default strategy or MirroredStrategy over N logical CPU devices, trained as
the tutorials train it and timed per epoch, as a careful person times their own job:

- `fit`: `model.fit(dataset, epochs=E)` with an epoch-level callback only (no batch hook, so Keras
  runs its steps exactly as for a plain fit);
- `ctl`: `for batch in dist_dataset: loss = train_step(batch)` with `strategy.run` inside a
  `tf.function`, the loss brought to the host once, at the epoch's end.

Two ways to feed the epochs, both common:

- `--iterators fresh`: the dataset is finite and every epoch makes a new iterator (a plain
  `fit(dataset, epochs=E)`, the tutorials' `for batch in dist_dataset`); the finished one is
  destroyed as the next epoch begins, and that wait is in the epoch's time;
- `--iterators one`: the dataset repeats and one iterator serves every epoch
  (`fit(dataset.repeat(), steps_per_epoch=..., epochs=E)`; the custom loop takes as many steps
  per epoch from one iterator), as tf-models' trainers do: no epoch ends an iterator.

The custom loop times an ending iterator's destruction apart (`end_s`): what an epoch waits for
between its last step and the next epoch's first. Prints one JSON line:
{"examples_per_sec": [...per epoch, the first included...], "end_s": [...]}.

    python tests/benchmarks/plain_loop.py --strategy mirrored --replicas 2 --api fit
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

EXAMPLES = 60_000


def make_strategy(kind: str, replicas: int) -> Any:
    """The default strategy, or MirroredStrategy over `replicas` logical CPU devices."""
    import tensorflow as tf

    if kind == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
        return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    return tf.distribute.get_strategy()


def synthetic_examples() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(EXAMPLES, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, size=EXAMPLES).astype("int32")
    return x, y


def seed_dataset(global_batch: int, repeat: bool = True, autotune: bool = True) -> Any:
    """The synthetic examples, cached, shuffled, batched and prefetched as the tutorials feed
    them; `repeat` makes it endless (one iterator can serve every epoch)."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(synthetic_examples()).cache().shuffle(
        10_000, seed=0)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    if not autotune:
        options = tf.data.Options()
        options.autotune.enabled = False
        dataset = dataset.with_options(options)
    return dataset


def seed_mlp(strategy: Any) -> tuple[Any, Any]:
    """The seed MLP (logits) and its Adam, made under the strategy's scope."""
    import keras

    with strategy.scope():
        model = keras.Sequential([
            keras.Input((28, 28, 1)), keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"), keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10)])
        return model, keras.optimizers.Adam(1e-3)


def custom_train_step(strategy: Any, model: Any, optimizer: Any, global_batch: int) -> Any:
    """The tutorials' step: `strategy.run` of the replica step under `tf.function`, the loss
    summed over the replicas."""
    import keras
    import tensorflow as tf

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    with strategy.scope():
        optimizer.build(model.trainable_variables)

    def replica_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(labels, model(features, training=True)),
                                              global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        per_replica = strategy.run(replica_step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return train_step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["default", "mirrored"], default="default")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--api", choices=["fit", "ctl"], default="fit")
    parser.add_argument("--iterators", choices=["fresh", "one"], default="fresh")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--autotune", choices=["on", "off"], default="on",
                        help="tf.data's autotuner (off: options.autotune.enabled = False)")
    args = parser.parse_args()

    import keras

    strategy = make_strategy(args.strategy, args.replicas)
    global_batch = 64 * strategy.num_replicas_in_sync
    dataset = seed_dataset(global_batch, args.iterators == "one", args.autotune == "on")
    steps = EXAMPLES // global_batch
    model, optimizer = seed_mlp(strategy)
    seconds: list[float] = []
    end_s: list[float] = []
    if args.api == "fit":
        with strategy.scope():
            model.compile(optimizer=optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        began: list[float] = []
        timer = keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: began.append(time.perf_counter()),
            on_epoch_end=lambda epoch, logs: seconds.append(time.perf_counter() - began[-1]))
        per_epoch = {"steps_per_epoch": steps} if args.iterators == "one" else {}
        model.fit(dataset, epochs=args.epochs, verbose=0, callbacks=[timer], **per_epoch)
    else:
        train_step = custom_train_step(strategy, model, optimizer, global_batch)
        dist_dataset = strategy.experimental_distribute_dataset(dataset)
        shared = iter(dist_dataset) if args.iterators == "one" else None
        ending = 0.0  # the previous epoch's iterator destruction: in this epoch's time
        for _ in range(args.epochs):
            began = time.perf_counter() - ending
            iterator = shared if shared is not None else iter(dist_dataset)
            loss = None
            # fresh: to its end, as `for batch in dist_dataset` runs; one: an epoch's steps
            for batch in (iterator if shared is None else (next(iterator) for _ in range(steps))):
                loss = train_step(batch)
            float(loss)
            last_step = time.perf_counter()
            seconds.append(last_step - began)
            if shared is None:
                del iterator  # the tutorials' loop lets it go here, at the epoch's end
                ending = time.perf_counter() - last_step
                end_s.append(ending)
    print(json.dumps({"examples_per_sec": [steps * global_batch / s for s in seconds],
                      "end_s": end_s}))


if __name__ == "__main__":
    main()
