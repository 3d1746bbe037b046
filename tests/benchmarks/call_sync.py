"""Whether a training step's call returns before its step is done, on this machine's devices.

A window's clock ends when its last step's result is on the host. Where the host runs ahead of
the device (a GPU's asynchronous stream), a call returns at once, a short window starts with
nothing queued and its end waits for the queue to drain; where the call returns with the step
done, bringing the result to the host costs next to nothing and a window pays no such start or
end. This times, per step of the seed MLP (plain_loop.py's model, step and data; batch 64 per
replica), taking the next batch in Python
(`next` on the distributed iterator, as the tutorials' loop and bench's custom loop do), the
step's call (`strategy.run` under `tf.function`; and Keras' own train function, which `fit`
calls once per step), and bringing its loss to the host after it (`float`). Medians of
`--steps` steps after a warmup, one line per loop:

    python tests/benchmarks/call_sync.py [--replicas 2] [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

Step = Callable[[], tuple[Any, float | None, float]]


def medians_ms(run: Step, steps: int) -> dict[str, float]:
    """`run` takes one step and returns (loss, when its batch was taken or None where the call
    takes it, when its call returned): the median milliseconds of each part."""
    parts: dict[str, list[float]] = {"next": [], "call": [], "to host": []}
    for _ in range(steps):
        began = time.perf_counter()
        loss, taken, returned = run()
        float(loss)
        done = time.perf_counter()
        if taken is not None:
            parts["next"].append(taken - began)
        parts["call"].append(returned - (began if taken is None else taken))
        parts["to host"].append(done - returned)
    return {k: statistics.median(v) * 1e3 for k, v in parts.items() if v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=1,
                        help="MirroredStrategy over this many logical CPU devices (1: none)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()

    import keras
    from plain_loop import custom_train_step, make_strategy, seed_dataset, seed_mlp

    strategy = make_strategy("mirrored" if args.replicas > 1 else "default", args.replicas)
    global_batch = 64 * args.replicas
    data = seed_dataset(global_batch)
    model, optimizer = seed_mlp(strategy)
    train_step = custom_train_step(strategy, model, optimizer, global_batch)  # builds optimizer

    iterator = iter(strategy.experimental_distribute_dataset(data))

    def custom_loop() -> tuple[Any, float | None, float]:
        batch = next(iterator)
        taken = time.perf_counter()
        loss = train_step(batch)
        return loss, taken, time.perf_counter()

    with strategy.scope():  # the custom loop's optimizer, built already: both loops train it
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.make_train_function()
    fit_iterator = iter(strategy.experimental_distribute_dataset(data))

    def fit_step() -> tuple[Any, float | None, float]:
        logs = model.train_function(fit_iterator)  # it takes the batch inside its call
        return logs["loss"], None, time.perf_counter()

    loops: tuple[tuple[str, Step], ...] = (("custom loop", custom_loop),
                                           ("Keras train function (fit)", fit_step))
    for name, run in loops:
        for _ in range(args.warmup):
            float(run()[0])
        parts = medians_ms(run, args.steps)
        print(f"{name}, {args.replicas} replica(s): " + ", ".join(
            f"{part} {ms:.3f} ms" for part, ms in parts.items()))


if __name__ == "__main__":
    main()
