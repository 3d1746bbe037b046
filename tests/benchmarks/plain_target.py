"""A hand-written Keras loop to a target, written as a user writes it (no bench code): the seed
MLP on Debian's Fashion-MNIST, Adam, evaluated on the test split every EVERY examples; prints
the examples to target per seed as JSON. `python -m tests.benchmarks.plain_target STRATEGY API
SEEDS` in a fresh process (STRATEGY default or mirrored2, API fit or ctl)."""

from __future__ import annotations

import gzip
import json
import sys

import numpy as np

DIR = "/usr/share/datasets/fashion-mnist"
PER_REPLICA, LEARNING_RATE, TARGET, EVERY, MAX_EXAMPLES = 64, 0.001, 0.85, 15360, 245760


def idx(name: str) -> np.ndarray:
    with gzip.open(f"{DIR}/{name}.gz", "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def main(strategy_name: str, api: str, seeds: int) -> list[int | None]:
    import tensorflow as tf

    if strategy_name == "mirrored2":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(2)])
    else:
        strategy = tf.distribute.get_strategy()
    import keras

    x = idx("train-images-idx3-ubyte")[..., None].astype(np.float32) / 255.0
    y = idx("train-labels-idx1-ubyte").astype(np.int32)
    tx = idx("t10k-images-idx3-ubyte")[..., None].astype(np.float32) / 255.0
    ty = idx("t10k-labels-idx1-ubyte").astype(np.int32)
    batch = PER_REPLICA * strategy.num_replicas_in_sync
    steps = EVERY // batch
    def one_seed(seed: int) -> int | None:
        keras.utils.set_random_seed(seed)
        train = (tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(10000, seed=seed)
                 .repeat().batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
        with strategy.scope():
            model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                      keras.layers.Dense(256, activation="relu"),
                                      keras.layers.Dense(128, activation="relu"),
                                      keras.layers.Dense(10)])
            optimizer = keras.optimizers.Adam(LEARNING_RATE)
            loss_fn = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="none")

        def accuracy() -> float:
            logits = model.predict(tx, batch_size=1024, verbose=0)
            return float(np.mean(np.argmax(logits, axis=-1) == ty))

        reached = None
        if api == "fit":
            with strategy.scope():
                model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))

            class Stop(keras.callbacks.Callback):
                def on_epoch_end(self, epoch: int, logs: object = None) -> None:
                    nonlocal reached
                    if accuracy() >= TARGET:
                        reached = (epoch + 1) * steps * batch
                        self.model.stop_training = True

            model.fit(train, epochs=MAX_EXAMPLES // EVERY, steps_per_epoch=steps, verbose=0,
                      callbacks=[Stop()])
        else:
            with strategy.scope():
                optimizer.build(model.trainable_variables)

            def replica_step(bx: tf.Tensor, by: tf.Tensor) -> tf.Tensor:
                with tf.GradientTape() as tape:
                    loss = tf.nn.compute_average_loss(loss_fn(by, model(bx, training=True)),
                                                      global_batch_size=batch)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
                return loss

            @tf.function
            def step(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
                losses = strategy.run(replica_step, args=inputs)
                return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

            iterator = iter(strategy.experimental_distribute_dataset(train))
            for interval in range(MAX_EXAMPLES // EVERY):
                for _ in range(steps):
                    step(next(iterator))
                if accuracy() >= TARGET:
                    reached = (interval + 1) * steps * batch
                    break
        return reached

    return [one_seed(seed) for seed in range(seeds)]


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
