"""What a cached pipeline's first pass costs, on Fashion-MNIST (Debian's dataset-fashion-mnist)
through bench's own pipeline at batch 64: the pipeline alone, seconds of a pass and of the next;
then a plain Keras `fit` of the seed MLP, examples/s per interval of 240 steps over two epochs.
Each for the pipeline cached as bench builds it (the map normalises examples in blocks), cached
with one map call per example, and not cached; in turn, each in its own process. tf.data's cache
fills during the first pass (938 steps), which runs the map over every example; the later
passes read the cache.

    python tests/benchmarks/first_pass.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

PASS_STEPS = 938  # batches of 64 in a pass over 60,000
INTERVAL, INTERVALS = 240, 8  # 1,920 steps of 64: a little over two passes of 60,000


MODES = ("cache", "per_example", "nocache")


def pipeline_for(mode: str) -> Any:
    """batch_scaling's training pipeline at batch 64. `cache`: bench's as it is;
    `per_example`: cached, normalised one example per map call (the pipeline before it
    normalised in blocks); `nocache`: no cache."""
    from bench.data import pipeline, sources
    from bench.scenario.loading import load_variants

    _, variants = load_variants("scenarios/batch_scaling.toml")
    variant = variants[0]
    cfg = variant.data.model_copy(update={"cache": mode != "nocache"})
    if mode == "per_example":
        pipeline.NORMALISE_BLOCK = 0
    return sources.make_dataset(sources.load_for(variant), cfg, 64)


def passes(mode: str) -> list[float]:
    """Seconds of the pipeline alone for its first pass (938 batches), then its second."""
    dataset = pipeline_for(mode)
    seconds = []
    for _ in range(2):
        began = time.perf_counter()
        dataset.take(PASS_STEPS).reduce(0, lambda n, _: n + 1)
        seconds.append(time.perf_counter() - began)
    return seconds


def one(mode: str) -> list[float]:
    """Examples/s of each interval of one fit, the first (which compiles) included."""
    import keras

    dataset = pipeline_for(mode)
    import tensorflow as tf
    from plain_loop import seed_mlp

    model, optimizer = seed_mlp(tf.distribute.get_strategy())
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    stamps: list[float] = []
    clock = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: stamps.append(time.perf_counter()),
        on_epoch_end=lambda epoch, logs: stamps.append(time.perf_counter()))
    model.fit(dataset, steps_per_epoch=INTERVAL, epochs=INTERVALS, verbose=0, callbacks=[clock])
    return [INTERVAL * 64 / (stamps[2 * i + 1] - stamps[2 * i]) for i in range(INTERVALS)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", choices=MODES)
    parser.add_argument("--passes", choices=MODES)
    args = parser.parse_args()
    if args.one or args.passes:
        print(json.dumps(one(args.one) if args.one else passes(args.passes)))
        return
    alone: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    for k in range(args.rounds):
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            out = subprocess.run([sys.executable, __file__, "--passes", mode],
                                 capture_output=True, text=True, check=True)
            alone[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for mode, runs in alone.items():
        first, second = (statistics.median(r[i] for r in runs) for i in (0, 1))
        print(f"{mode:11s} the pipeline alone, seconds a pass of {PASS_STEPS} batches (median of "
              f"{len(runs)}): first {first:.2f}, second {second:.2f}")
    rates: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    for k in range(args.rounds):
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            out = subprocess.run([sys.executable, __file__, "--one", mode], capture_output=True,
                                 text=True, check=True)
            rates[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for mode, runs in rates.items():
        medians = [statistics.median(r[i] for r in runs) for i in range(INTERVALS)]
        print(f"{mode:11s} examples/s per interval of {INTERVAL} steps (median of {len(runs)}): "
              + ", ".join(f"{m:,.0f}" for m in medians))


if __name__ == "__main__":
    main()
