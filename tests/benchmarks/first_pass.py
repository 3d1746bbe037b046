"""What a cached pipeline's first pass costs: a plain Keras `fit` of the seed MLP on
Fashion-MNIST (Debian's dataset-fashion-mnist) through bench's own pipeline, timed per interval
of 240 steps of 64 over two epochs, with `data.cache` on and off, alternating, each in its own
process. tf.data's cache fills during the first pass (937 steps), which runs each example's map
work; the later passes read the cache.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

INTERVAL, INTERVALS = 240, 8  # 1,920 steps of 64: a little over two passes of 60,000


def one(cache: bool) -> list[float]:
    """Examples/s of each interval of one fit, the first (which compiles) included."""
    import keras

    from bench.data import sources
    from bench.scenario.loading import load_variants

    _, variants = load_variants("scenarios/batch_scaling.toml")
    variant = variants[0]
    cfg = variant.data.model_copy(update={"cache": cache})
    dataset = sources.make_dataset(sources.load_for(variant), cfg, 64)
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
    parser.add_argument("--one", choices=["cache", "nocache"])
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one == "cache")))
        return
    rates: dict[str, list[list[float]]] = {"cache": [], "nocache": []}
    for k in range(args.rounds):
        for mode in (("cache", "nocache") if k % 2 == 0 else ("nocache", "cache")):
            out = subprocess.run([sys.executable, __file__, "--one", mode], capture_output=True,
                                 text=True, check=True)
            rates[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for mode, runs in rates.items():
        medians = [statistics.median(r[i] for r in runs) for i in range(INTERVALS)]
        print(f"{mode:8s} examples/s per interval of {INTERVAL} steps (median of {len(runs)}): "
              + ", ".join(f"{m:,.0f}" for m in medians))


if __name__ == "__main__":
    main()
