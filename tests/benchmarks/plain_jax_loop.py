"""A user's own Keras-on-JAX `fit`, independent of bench: the yardstick of a JAX variant's
headline (jax_fidelity.py), as plain_loop.py is for TensorFlow's.

The seed MLP (784-256-128-10, logits) on plain_loop.py's 60,000 synthetic examples and tf.data
pipeline, batch 64 per replica, on one JAX device or under `keras.distribution.DataParallel`
over N XLA host devices (set here, before JAX is imported), trained with
`model.fit(dataset.repeat(), steps_per_epoch=..., epochs=E)` (one iterator over the epochs, an
epoch-level callback only) and timed per epoch. Prints one JSON line:
{"examples_per_sec": [...per epoch, the first included...], "end_s": []}.

    python tests/benchmarks/plain_jax_loop.py --strategy data_parallel --replicas 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plain_loop import EXAMPLES, seed_dataset  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["default", "data_parallel"], default="default")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    os.environ["KERAS_BACKEND"] = "jax"
    # the flags bench gives a JAX variant's process (bench.child_env.backend_env), so both
    # sides compile alike; without the scheduler flag DataParallel hangs here at times
    scheduler = (["--xla_cpu_enable_concurrency_optimized_scheduler=false"]
                 if args.replicas > 1 else [])
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *scheduler,
                                        f"--xla_force_host_platform_device_count={args.replicas}"])

    import keras

    replicas = args.replicas if args.strategy == "data_parallel" else 1
    if args.strategy == "data_parallel":
        keras.distribution.set_distribution(keras.distribution.DataParallel(
            devices=[f"cpu:{i}" for i in range(replicas)]))
    global_batch = 64 * replicas
    steps = EXAMPLES // global_batch
    model = keras.Sequential([
        keras.Input((28, 28, 1)), keras.layers.Flatten(),
        keras.layers.Dense(256, activation="relu"), keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    seconds: list[float] = []
    began: list[float] = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: began.append(time.perf_counter()),
        on_epoch_end=lambda epoch, logs: seconds.append(time.perf_counter() - began[-1]))
    model.fit(seed_dataset(global_batch), steps_per_epoch=steps, epochs=args.epochs, verbose=0,
              callbacks=[timer])
    print(json.dumps({"examples_per_sec": [steps * global_batch / s for s in seconds],
                      "end_s": []}))


if __name__ == "__main__":
    main()
