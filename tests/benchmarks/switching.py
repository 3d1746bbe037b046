"""What a pause, or other processes' turns, cost the steps after them: the plain loop's own step
(plain_loop.py, the default strategy's custom loop) driven by hand, outside bench.

    python tests/benchmarks/switching.py pause --pause 0.4 [--mode sleep|spin1|spin2]
        one process: turns of --steps steps, each after a pause (asleep, or with one or both
        cores busy in a spin loop); the median step by position in the turn
    python tests/benchmarks/switching.py token --processes 3 [--settle 50] [--steps 50]
        N processes pass a token round robin, each running --settle untimed steps and --steps
        timed ones a turn, as bench's gate lets variants go one at a time; each process's median
        step (ms) over its turns' timed steps, or with --settle 0 by position in the turn
    [--idle]: only the first process runs turns, the others hold their models and pipelines

On a CPU a step's call returns with the step done, so a stamp after each call is its end.
Thread pools are TensorFlow's defaults unless TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS
say otherwise. Measurements: docs/measuring/measurements.md#settling.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BINS = [(0, 1), (1, 5), (5, 25), (25, 50), (50, 100), (100, 200), (200, 400), (400, 800)]
WARM_STEPS = 1000  # before the first turn: compiled, the cache filled, the pipeline tuned


def warm_step() -> tuple[Any, Any]:
    """The plain loop's custom-loop step and its input iterator, warmed up."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(HERE))
    import plain_loop
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    model, optimizer = plain_loop.seed_mlp(strategy)
    step = plain_loop.custom_train_step(strategy, model, optimizer, 64)
    iterator = iter(strategy.experimental_distribute_dataset(plain_loop.seed_dataset(64, True)))
    loss = None
    for _ in range(WARM_STEPS):
        loss = step(next(iterator))
    float(loss)
    return step, iterator


def turn(step: Any, iterator: Any, steps: int) -> list[float]:
    """`steps` steps, each one's seconds."""
    stamps = [time.perf_counter()]
    loss = None
    for _ in range(steps):
        loss = step(next(iterator))
        stamps.append(time.perf_counter())
    float(loss)
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


def profile(turns: list[list[float]], steps: int) -> list[float]:
    """The median step (ms) in each span of positions, the first turn left out."""
    return [round(1e3 * statistics.median(x for t in turns[1:] for x in t[a:b]), 3)
            for a, b in BINS if b <= steps]


def pause(seconds: float, mode: str) -> None:
    if mode == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    other = (subprocess.Popen([sys.executable, "-c", "import time\nend = time.perf_counter() + "
                               f"{seconds}\nwhile time.perf_counter() < end: pass"])
             if mode == "spin2" else None)
    while time.perf_counter() < end:
        pass
    if other is not None:
        other.wait()


def run_pause(args: argparse.Namespace) -> None:
    step, iterator = warm_step()
    turns = []
    for _ in range(args.turns):
        pause(args.pause, args.mode)
        turns.append(turn(step, iterator, args.steps))
    print(json.dumps({"mode": args.mode, "pause_s": args.pause,
                      "median_ms_by_position": profile(turns, args.steps)}))


def run_token(args: argparse.Namespace) -> None:
    n = args.processes
    pipes = [os.pipe() for _ in range(n)]
    children = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            token_worker(i, n, pipes, args)
        children.append(pid)
    time.sleep(15 + 3 * n)  # every process warm
    os.write(pipes[0][1], b"x")
    os.waitpid(children[0], 0)
    for pid in children[1:]:
        if args.idle:
            os.kill(pid, 9)
        os.waitpid(pid, 0)


def token_worker(i: int, n: int, pipes: list[tuple[int, int]], args: argparse.Namespace) -> None:
    step, iterator = warm_step()
    read_end = pipes[i][0]
    if args.idle and i:
        os.read(read_end, 1)  # never comes: it idles, its model and pipeline alive
        os._exit(0)
    write_end = pipes[i][1] if args.idle else pipes[(i + 1) % n][1]
    turns = []
    for _ in range(args.turns // (1 if args.idle else n)):
        os.read(read_end, 1)
        if args.settle:
            turn(step, iterator, args.settle)
        turns.append(turn(step, iterator, args.steps))
        os.write(write_end, b"x")
    figure: Any = (profile(turns, args.steps) if not args.settle else
                   round(1e3 * statistics.median(statistics.median(t) for t in turns[2:]), 3))
    print(json.dumps({"processes": n, "process": i, "settle": args.settle, "ms": figure}),
          flush=True)
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pause")
    p.add_argument("--pause", type=float, default=0.4)
    p.add_argument("--mode", choices=["sleep", "spin1", "spin2"], default="sleep")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--turns", type=int, default=10)
    t = sub.add_parser("token")
    t.add_argument("--processes", type=int, default=3)
    t.add_argument("--settle", type=int, default=50)
    t.add_argument("--steps", type=int, default=50)
    t.add_argument("--turns", type=int, default=90, help="turns in all, shared by the processes")
    t.add_argument("--idle", action="store_true")
    args = parser.parse_args()
    (run_pause if args.what == "pause" else run_token)(args)


if __name__ == "__main__":
    main()
