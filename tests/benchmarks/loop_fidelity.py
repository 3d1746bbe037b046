"""bench's loop against a plain loop in one process: does a headline of turns read a loop's speed?

fidelity.py compares whole processes (a `bench run` beside a plain loop's process), and on a
2-core VM a pair of processes a minute apart moves by ±10–15%, more than the few percent in
question. Here both sides train the same model on the same pipeline in one process, taking
turns every few seconds, so the machine's drift lands on both sides of a pair alike:

- bench: `bench.training.loops.run_custom_loop` or `run_fit`, the code every bench variant runs,
  on the default scenario's plan (`--repeats` turns of `--settle` settling steps and two windows
  of `--steps`, lengthened to `--min-window-s` as a run lengthens them); its headline is the
  examples of its unobserved windows over their clocks. Without `--gap` its turns run back to
  back, as `bench run --no-interleave` runs them; with it each turn's gate idles that long, as
  a variant idles while the others run their turns.
- plain: the seed MLP's loop of plain_loop.py (`for batch: loss = train_step(batch)` with the
  loss brought to the host once; or one `fit` with a timestamp at the block's two ends), a
  block of `--block` steps after `--warmup`, as a user's epoch runs.

Per round, bench's headline ÷ the plain block's rate; prints each round's ratio, the median and
its bootstrap 95% interval, and the window length bench ran:

    python tests/benchmarks/loop_fidelity.py --api ctl --rounds 30 [--strategy mirrored
        --replicas 2] [--gap 0.2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # run as a script: the repository's packages

from bench.training.gate import Gate  # noqa: E402
from tests.benchmarks.loop_pairs import paired_rounds  # noqa: E402
from tests.benchmarks.plain_loop import (  # noqa: E402
    custom_train_step,
    make_strategy,
    seed_dataset,
    seed_mlp,
)


class IdleGate(Gate):
    """A gate that releases after `gap_s` asleep, as a run's gate does once the other variants
    have run their turns (none of them runs here)."""

    def __init__(self, gap_s: float) -> None:
        super().__init__(None, 0.0)
        self._gap_s = gap_s

    def wait(self, segment: str, index: int = 0) -> None:
        time.sleep(self._gap_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", choices=["ctl", "fit"], default="ctl")
    parser.add_argument("--strategy", choices=["default", "mirrored"], default="default")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--settle", type=int, default=24)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--min-window-s", type=float, default=0.1)
    parser.add_argument("--gap", type=float, default=0.0, help="seconds asleep at each gate")
    parser.add_argument("--block", type=int, default=400, help="the plain loop's timed steps")
    parser.add_argument("--json", help="also write every round's figures here")
    args = parser.parse_args()

    import keras

    from bench.training import loops
    from bench.training.objectives import CLASSIFIER
    from bench.training.schedule import Schedule

    strategy = make_strategy(args.strategy, args.replicas)
    global_batch = 64 * strategy.num_replicas_in_sync
    dataset = seed_dataset(global_batch)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    model, optimizer = seed_mlp(strategy)
    kept: list[Any] = []  # every iterator lives to the end: destroying one may wait (epoch ends)

    def schedule() -> Schedule:
        gate = IdleGate(args.gap) if args.gap else Gate(None, 0.0)
        return Schedule(warmup_steps=args.warmup, window_steps=args.steps, repeats=args.repeats,
                        gate=gate, settle_steps=args.settle, min_window_s=args.min_window_s,
                        observed_steps=args.steps)  # as variant_plan: only the headline's grows

    def bench_side() -> tuple[float, int]:
        common = {"objectives": CLASSIFIER, "metrics": [], "schedule": schedule(),
                  "steps_per_execution": 1, "jit_compile": False,
                  "progress": lambda done, of: None}
        if args.api == "ctl":
            result = loops.run_custom_loop(strategy, model, optimizer, dist_dataset,
                                           global_batch=global_batch, precision="float32",
                                           **common)
        else:
            with strategy.scope():  # as bench.training.loops.train runs a fit variant
                result = loops.run_fit(model, optimizer, loops.FitInput(dataset), **common)
        kept.extend(result.iterators)
        assert result.schedule is not None
        steps = result.schedule.window_steps
        return steps * args.repeats * global_batch / sum(result.clocks["unobserved"]), steps

    train_step = custom_train_step(strategy, model, optimizer, global_batch)

    def plain_side() -> float:
        if args.api == "ctl":
            iterator = iter(dist_dataset)
            kept.append(iterator)
            for _ in range(args.warmup):
                loss = train_step(next(iterator))
            float(loss)
            began = time.perf_counter()
            for _ in range(args.block):
                loss = train_step(next(iterator))
            float(loss)
            return args.block * global_batch / (time.perf_counter() - began)
        stamps: list[float] = []

        def stamp(batch: int, logs: object) -> None:
            if batch in (args.warmup - 1, args.warmup + args.block - 1):
                stamps.append(time.perf_counter())

        model.fit(dataset, epochs=1, steps_per_epoch=args.warmup + args.block, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=stamp)])
        return args.block * global_batch / (stamps[1] - stamps[0])

    paired_rounds(bench_side, plain_side, args.rounds,
                  f"{args.api}, {args.strategy} x {strategy.num_replicas_in_sync}, gap "
                  f"{args.gap:g} s", args.json)


if __name__ == "__main__":
    main()
