"""bench's JAX loop against a plain Keras-on-JAX `fit` in one process, as loop_fidelity.py
holds TensorFlow's: does a headline of turns read a JAX loop's speed?

jax_fidelity.py compares whole processes, and on a 2-core VM a pair of processes a minute apart
moves by more than the few percent in question. Here both sides train one seed MLP on one
tf.data pipeline (plain_loop.py's), on one JAX device or under keras.distribution.DataParallel
over N XLA host devices, taking turns every few seconds, so the machine's drift lands on both
sides of a pair alike:

- bench: `bench.training.loops.run_fit`, the code every JAX `fit` variant runs, on the default
  scenario's plan as `bench run --no-interleave` runs it (`--repeats` turns of two windows of
  `--steps`, lengthened to `--min-window-s`, back to back); its headline is the examples of its
  unobserved windows over their clocks.
- plain: `model.fit(dataset, steps_per_epoch=--block, epochs=2)` with an epoch-level callback
  only, as plain_jax_loop.py trains; its rate is the second epoch's (the first warms up).

Per round, bench's headline ÷ the plain epoch's rate; prints each round's ratio, the median and
its bootstrap 95% interval:

    python tests/benchmarks/jax_loop_fidelity.py --rounds 20 [--replicas 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # run as a script: the repository's packages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=1, help="DataParallel over N devices")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=12)
    # turns back to back, as `bench run --no-interleave` runs them: no settling (a gate that
    # does not interleave settles none, bench.training.schedule.variant_plan)
    parser.add_argument("--settle", type=int, default=0)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--min-window-s", type=float, default=0.1)
    parser.add_argument("--block", type=int, default=400, help="the plain epoch's steps")
    parser.add_argument("--json", help="also write every round's figures here")
    args = parser.parse_args()
    from bench.child_env import backend_env

    # the environment bench gives a JAX variant's process, set before Keras and JAX are imported
    os.environ.update(backend_env("jax", args.replicas))

    import keras

    from bench.training import loops
    from bench.training.gate import Gate
    from bench.training.objectives import CLASSIFIER
    from bench.training.schedule import Schedule
    from tests.benchmarks.loop_pairs import paired_rounds
    from tests.benchmarks.plain_loop import seed_dataset

    if args.replicas > 1:
        keras.distribution.set_distribution(keras.distribution.DataParallel(
            devices=[f"cpu:{i}" for i in range(args.replicas)]))
    global_batch = 64 * args.replicas
    dataset = seed_dataset(global_batch)

    def seed_mlp() -> Any:
        model = keras.Sequential([
            keras.Input((28, 28, 1)), keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])
        return model, keras.optimizers.Adam(1e-3)

    ours, theirs = seed_mlp(), seed_mlp()  # each side its own model: neither recompiles
    theirs[0].compile(optimizer=theirs[1],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def bench_side() -> tuple[float, int]:
        schedule = Schedule(warmup_steps=args.warmup, window_steps=args.steps,
                            repeats=args.repeats, gate=Gate(None, 0.0),
                            settle_steps=args.settle, min_window_s=args.min_window_s,
                            observed_steps=args.steps)  # as variant_plan: only the headline's grows
        result = loops.run_fit(*ours, loops.FitInput(dataset), objectives=CLASSIFIER,
                               metrics=[], schedule=schedule, steps_per_execution=1,
                               jit_compile=True, progress=lambda done, of: None)
        assert result.schedule is not None
        steps = result.schedule.window_steps
        return steps * args.repeats * global_batch / sum(result.clocks["unobserved"]), steps

    def plain_side() -> float:
        began: list[float] = []
        seconds: list[float] = []
        timer = keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: began.append(time.perf_counter()),
            on_epoch_end=lambda epoch, logs: seconds.append(time.perf_counter() - began[-1]))
        theirs[0].fit(dataset, steps_per_epoch=args.block, epochs=2, verbose=0,
                      callbacks=[timer])
        return args.block * global_batch / seconds[1]

    where = f"DataParallel x {args.replicas}" if args.replicas > 1 else "one device"
    paired_rounds(bench_side, plain_side, args.rounds, f"fit on JAX, {where}", args.json)


if __name__ == "__main__":
    main()
