"""Harness overhead in one process: bench's timed fit loop vs a hand-written fit, alternating.

The cross-process honesty benchmark (test_harness_honesty.py) pairs separate `bench run`s with
separate hand-written processes; on this shared machine bursts make single rounds differ by
30-60%, far above a 2% question. Here both sides train the same model on the same pipeline in
the same process, alternating every ~1 s, so a burst hits both sides of a pair alike.

- hand-written: `model.fit` with a timestamp only at the two window boundaries;
- bench: `bench.training.loops.run_fit`, the code every bench `fit` variant runs (its callback,
  progress reports) on one turn: an unobserved window (the headline: examples over its clock)
  and an observed one (per-step samples, their median).
Both figures are examples/s over the same number of steps after the same warmup. Prints one
JSON line: {"hand": [...], "bench_mean_rate": [...], "bench_median": [...]}.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    import keras
    from handwritten_fit import seed_mlp  # this folder: the script runs as a file

    from bench.training import loops
    from bench.training.gate import Gate
    from bench.training.objectives import CLASSIFIER
    from bench.training.schedule import Schedule
    strategy, model, ds, global_batch = seed_mlp(replicas=2, per_replica=64)
    with strategy.scope():
        optimizer = keras.optimizers.Adam(1e-3)
    total = args.warmup + args.steps
    # one turn of an unobserved and an observed window; no gate: one process
    schedule = Schedule(warmup_steps=args.warmup, window_steps=args.steps, repeats=1,
                        gate=Gate(None, 1.0))
    out: dict[str, list[float]] = {"hand": [], "bench_mean_rate": [], "bench_median": []}
    def bench_side() -> None:
        with strategy.scope():  # as bench.training.loops.train runs it for a fit variant
            result = loops.run_fit(model, optimizer, loops.FitInput(ds), objectives=CLASSIFIER,
                                   metrics=[], schedule=schedule, steps_per_execution=1,
                                   jit_compile=False, progress=lambda done, of: None)
        (unobserved_s,) = result.clocks["unobserved"]
        (observed,) = result.samples["observed"]
        out["bench_mean_rate"].append(args.steps * global_batch / unobserved_s)
        out["bench_median"].append(global_batch / float(np.median(observed)))

    def hand_side() -> None:
        stamps: list[float] = []

        def stamp(batch: int, logs: object) -> None:
            if batch in (args.warmup - 1, total - 1):
                stamps.append(time.perf_counter())

        model.fit(ds, epochs=1, steps_per_epoch=total, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=stamp)])
        out["hand"].append(args.steps * global_batch / (stamps[1] - stamps[0]))

    bench_side()  # compiles the train function both sides then share
    out["bench_mean_rate"].clear()
    out["bench_median"].clear()
    for n in range(args.rounds):  # who goes first alternates, so order cannot bias the pairs
        for side in ((bench_side, hand_side) if n % 2 == 0 else (hand_side, bench_side)):
            side()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
