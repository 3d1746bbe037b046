"""How a timed window's length biases its rate: what `[measure] min_window_s` is chosen from.

One process, the seed MLP's custom loop (plain_loop.py's step, default strategy or Mirrored),
run as bench runs a turn: settling steps brought to the host, then a window of N steps timed
from that sync to the sync of its last step. Windows of every length in a round, in a shuffled
order, and each round's rates divided by its longest window's, so the machine's drift between
rounds cancels. A window that starts with the pipeline of steps empty and ends with one sync
pays a fixed cost a loop running on does not: its rate reads low by about that cost over the
window's time. Each round's window seconds are also fitted as a line in the steps (scipy's
linregress): its slope is the step a loop running on takes, its intercept that fixed cost. At
several batch sizes the intercept tells a fixed time from a share of a step.

    python tests/benchmarks/window_length.py [--rounds 30] [--strategy mirrored] [--batch 64]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: plain_loop beside it

from plain_loop import custom_train_step, make_strategy, seed_mlp, synthetic_examples  # noqa: E402

LENGTHS = (16, 24, 32, 48, 64, 128, 512)
SETTLE = 24


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--strategy", choices=["default", "mirrored"], default="default")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64, help="examples per replica and step")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2, for the quartiles")

    import tensorflow as tf
    from scipy import stats

    strategy = make_strategy(args.strategy, args.replicas)
    global_batch = args.batch * strategy.num_replicas_in_sync
    dataset = (tf.data.Dataset.from_tensor_slices(synthetic_examples()).cache()
               .shuffle(10_000, seed=0).repeat().batch(global_batch, drop_remainder=True)
               .prefetch(tf.data.AUTOTUNE))
    model, optimizer = seed_mlp(strategy)
    train_step = custom_train_step(strategy, model, optimizer, global_batch)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))

    def steps(n: int) -> float:
        """n steps from a sync to a sync: their seconds."""
        began = time.perf_counter()
        loss = None
        for _ in range(n):
            loss = train_step(next(iterator))
        float(loss)
        return time.perf_counter() - began

    steps(200)  # compile and warm up
    ratios: dict[int, list[float]] = {n: [] for n in LENGTHS}
    step_s: list[float] = []
    fits: list[tuple[float, float]] = []  # per round: (slope, intercept), seconds
    order = list(LENGTHS)
    for k in range(args.rounds):
        random.Random(k).shuffle(order)
        rate: dict[int, float] = {}
        for n in order:
            steps(SETTLE)
            rate[n] = n / steps(n)
        step_s.append(1 / rate[LENGTHS[-1]])
        line = stats.linregress(LENGTHS, [n / rate[n] for n in LENGTHS])
        fits.append((line.slope, line.intercept))
        for n in LENGTHS:
            ratios[n].append(rate[n] / rate[LENGTHS[-1]])
    step = statistics.median(step_s)
    slope = statistics.median(f[0] for f in fits)
    intercepts = [f[1] for f in fits]
    q = statistics.quantiles(intercepts, n=4)
    print(f"step {1000 * step:.2f} ms (median of the {LENGTHS[-1]}-step windows), "
          f"{args.rounds} rounds, global batch {global_batch}")
    print(f"window seconds = steps x {1000 * slope:.3f} ms + {1000 * statistics.median(intercepts):.2f}"
          f" ms (medians of the rounds' lines; intercept quartiles {1000 * q[0]:.2f} to "
          f"{1000 * q[2]:.2f} ms)")
    print("| window steps | window ms | rate ÷ the longest window's (median) | quartiles |")
    print("|---|---|---|---|")
    for n in LENGTHS:
        q = statistics.quantiles(ratios[n], n=4)
        print(f"| {n} | {1000 * n * step:.0f} | {statistics.median(ratios[n]):.3f} | "
              f"{q[0]:.3f}–{q[2]:.3f} |")
    print(json.dumps({str(n): ratios[n] for n in LENGTHS}))


if __name__ == "__main__":
    main()
