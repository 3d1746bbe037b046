"""Why an interleaved window needs a settling step: what idling costs the steps after it.

Interleaving makes every variant idle at its gate while the others run their windows. This
script asks, in one process and with drift landing on every condition alike (the conditions take
turns in a freshly shuffled order every round), how a short window of steps runs

- `hot`: straight after the previous window (of whatever condition);
- `steady`: after `--lead` more steps run back to back, as in a sequential measurement;
- `idle`: after the process slept for `--gap` seconds, as at a gate while the machine is quiet;
- `busy`: after a second training process ran for `--gap` seconds, as at a gate while another
  variant runs its window;
- `spin`: after two plain-Python busy loops kept both cores busy for `--gap` seconds, so that no
  CPU went idle (a cold start that remains is not the CPUs' idle state).

`--input tensor` feeds one fixed batch instead of the tf.data pipeline, `--autotune off` turns
tf.data's autotuner off: what remains of the cold start then is not the input pipeline's.

It prints the median time of each step position per condition and its ratio to `hot` (over
30 steps, the median step of each span of positions and its ratio to `steady`). With `--design
S+W` it also prints what a turn of S settling steps and two windows of W steps reads after each
condition, as a share of the `steady` speed: the mean step of each window, the headline's window
first in half the turns and second in the other half, as a run's turns place it. A plain Keras
MLP on synthetic data, a custom-loop step that brings the loss to the host every step (on a CPU
the step's call returns with the step done, so doing so adds no wait: call_sync.py).
`--threads N` and `--cpu K` set the measured process's thread pools and pin it to one CPU. Usage
(about a minute here):
    python tests/benchmarks/cold_start.py --gap 0.06 --rounds 150
    python tests/benchmarks/cold_start.py --gap 0.2 --rounds 50 --steps 150 --design 24+16 --design 24+48
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

CONDITIONS = ("hot", "steady", "idle", "busy", "spin")
SPINNERS = 2


def training_step(tensor_input: bool = False, autotune: bool = True,
                  threads: int = 0) -> Callable[[], float]:
    """A warmed-up training step of a small MLP (784-256-128-10, batch 64) on a cached,
    shuffled, prefetched tf.data pipeline (or, with `tensor_input`, one fixed batch of it); each
    call runs one step and returns its loss. `threads` > 0 sets TensorFlow's intra- and inter-op
    thread pools to that many threads each (0: as TensorFlow sets them)."""
    import numpy as np
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((10000, 784), dtype=np.float32)
    y = rng.integers(0, 10, 10000)
    data = (tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(10000).repeat().batch(64)
            .prefetch(tf.data.AUTOTUNE))
    if not autotune:
        options = tf.data.Options()
        options.autotune.enabled = False
        data = data.with_options(options)
    model = tf.keras.Sequential([tf.keras.Input((784,)),
                                 tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(128, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    optimizer = tf.keras.optimizers.Adam(1e-3)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    iterator = iter(data)
    fixed = next(iterator)

    @tf.function
    def step() -> tf.Tensor:
        features, labels = fixed if tensor_input else next(iterator)
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for _ in range(60):  # compile and warm up
        float(step())
    return lambda: float(step())


def other_variant(conn: Connection) -> None:
    """The second process: trains for as long as it is asked, then says so."""
    run = training_step()
    conn.send("ready")
    while (seconds := conn.recv()) is not None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            run()
        conn.send("done")


def spinner(conn: Connection) -> None:
    """A core kept busy without TensorFlow: spins for as long as it is asked, then says so."""
    conn.send("ready")
    while (seconds := conn.recv()) is not None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        conn.send("done")


def design(text: str) -> tuple[int, int]:
    """`S+W` -> (S, W)."""
    settle, _, width = text.partition("+")
    return int(settle), int(width)


def print_positions(laps: dict[str, list[list[float]]], args: argparse.Namespace) -> None:
    hot = [statistics.median(w[k] for w in laps["hot"]) for k in range(args.steps)]
    print(f"median step by position in a window of {args.steps}, after a {args.gap * 1e3:.0f} ms "
          f"gap ({args.rounds} rounds); ratio to hot in brackets")
    for condition in CONDITIONS:
        medians = [statistics.median(w[k] for w in laps[condition]) for k in range(args.steps)]
        print(f"{condition:5} " + "  ".join(f"{m * 1e3:.2f} ms ({m / h:.2f})"
                                             for m, h in zip(medians, hot, strict=True)))


def spans(steps: int) -> list[tuple[int, int]]:
    """Positions from 0 in spans that widen with the distance from the window's start."""
    edges = [0, 1, 5, 15, 25, 40, 60, 80, 100] + list(range(125, steps, 25)) + [steps]
    return [(a, b) for a, b in zip(edges, edges[1:], strict=False) if a < b <= steps]


def print_spans(laps: dict[str, list[list[float]]], args: argparse.Namespace) -> None:
    steady = statistics.median(x for w in laps["steady"] for x in w)
    print(f"median step by span of positions in a window of {args.steps}, after a "
          f"{args.gap * 1e3:.0f} ms gap ({args.rounds} rounds), ÷ steady's median step "
          f"({steady * 1e3:.2f} ms)")
    print("      " + "  ".join(f"{a + 1:>3}-{b:<3}" for a, b in spans(args.steps)))
    for condition in CONDITIONS:
        print(f"{condition:6}" + "  ".join(
            f"{statistics.median(x for w in laps[condition] for x in w[a:b]) / steady:7.3f}"
            for a, b in spans(args.steps)))


def turn_step(windows: list[list[float]], settle: int, width: int) -> float:
    """The headline's mean step in a turn of `settle` steps and two windows of `width`: the
    median over rounds of each window place's mean step, the two places weighed alike."""
    places = [statistics.median(statistics.mean(w[a:a + width]) for w in windows)
              for a in (settle, settle + width)]
    return statistics.mean(places)


def window_spread(windows: list[list[float]], settle: int, width: int) -> tuple[float, float]:
    """How a turn's first window moves from round to round (SD of its log rate), and how its
    two windows move together (the correlation of their log rates)."""
    first = [math.log(statistics.mean(w[settle:settle + width])) for w in windows]
    second = [math.log(statistics.mean(w[settle + width:settle + 2 * width])) for w in windows]
    return statistics.stdev(first), statistics.correlation(first, second)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gap", type=float, default=0.06, help="seconds idle before a window")
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--steps", type=int, default=6, help="steps per window")
    parser.add_argument("--lead", type=int, default=100,
                        help="untimed steps run back to back before a steady window")
    parser.add_argument("--input", choices=("data", "tensor"), default="data",
                        help="the tf.data pipeline, or one fixed batch")
    parser.add_argument("--autotune", choices=("on", "off"), default="on",
                        help="tf.data's autotuner")
    parser.add_argument("--json", help="also write every lap here")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra- and inter-op threads of the measured process (0: TF's own)")
    parser.add_argument("--cpu", type=int, help="pin the measured process to this CPU")
    parser.add_argument("--design", action="append", default=[], type=design,
                        help="S+W: what S settling steps and two windows of W steps read "
                             "(repeatable; S + 2W at most --steps)")
    args = parser.parse_args()
    if any(s + 2 * w > args.steps for s, w in args.design):
        parser.error("--design S+W needs S + 2W steps in a window: raise --steps")

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    other = context.Process(target=other_variant, args=(theirs,), daemon=True)
    other.start()
    spinners = []
    for _ in range(SPINNERS):
        ask, answer = context.Pipe()
        context.Process(target=spinner, args=(answer,), daemon=True).start()
        spinners.append(ask)
    try:
        if args.cpu is not None:  # this process only: the other process and the spinners roam
            os.sched_setaffinity(0, {args.cpu})
        run = training_step(args.input == "tensor", args.autotune == "on", args.threads)
        for ask in spinners:
            ask.recv()  # ready
        if ours.recv() != "ready":
            raise SystemExit("the second process did not start")
        laps: dict[str, list[list[float]]] = {c: [] for c in CONDITIONS}
        rng = random.Random(1)
        for _ in range(args.rounds):
            for condition in rng.sample(CONDITIONS, len(CONDITIONS)):
                if condition == "idle":
                    time.sleep(args.gap)
                elif condition == "busy":
                    ours.send(args.gap)
                    ours.recv()
                elif condition == "spin":
                    for ask in spinners:
                        ask.send(args.gap)
                    for ask in spinners:
                        ask.recv()
                elif condition == "steady":
                    for _ in range(args.lead):
                        run()
                window = []
                for _ in range(args.steps):
                    started = time.perf_counter()
                    run()
                    window.append(time.perf_counter() - started)
                laps[condition].append(window)
        ours.send(None)
        for ask in spinners:
            ask.send(None)
    finally:
        other.join(timeout=30)
        if other.is_alive():
            other.kill()
    if args.steps <= 30:
        print_positions(laps, args)
    else:
        print_spans(laps, args)
    for settle, width in args.design:
        steady = statistics.median(statistics.mean(w) for w in laps["steady"])
        print(f"a turn of {settle} settling steps and two windows of {width}, headline ÷ steady: "
              + "  ".join(f"{c} {steady / turn_step(laps[c], settle, width):.3f}"
                          for c in CONDITIONS))
        print("  its first window from round to round, SD of the log rate (the two windows' "
              "correlation): " + "  ".join(
                  "{} {:.3f} ({:.2f})".format(c, *window_spread(laps[c], settle, width))
                  for c in CONDITIONS))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(laps, out)


if __name__ == "__main__":
    main()
