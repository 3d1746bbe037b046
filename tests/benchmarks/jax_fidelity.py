"""Fidelity on JAX: a JAX variant's headline against a plain Keras-on-JAX `fit` of the same
model (plain_jax_loop.py, one iterator over its epochs), as fidelity.py holds TensorFlow's.

Per round, each variant in a shuffled place: its `bench run --only` of scenarios/backends.toml
(the variant with its control twin and the yardstick, interleaved) and its plain loop, each its
own process, back to back, in an order reversed every other round. Per round and variant:
bench's headline ÷ the plain loop's examples over the wall time of its epochs (the first, which
compiles, left out).

    python tests/benchmarks/jax_fidelity.py --rounds 3 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))  # run as a script: the repository's tests package

from tests.benchmarks.fidelity import ENV, bench_headline  # noqa: E402
from tests.benchmarks.intervals import bootstrap_median_interval  # noqa: E402

SCENARIO = REPO / "scenarios" / "backends.toml"
VARIANTS = {
    "default-r1-jax-fit-float32-gb64": ["--strategy", "default"],
    "data_parallel-r2-jax-fit-float32-gb128": ["--strategy", "data_parallel", "--replicas", "2"],
}


def plain(args: list[str]) -> float | None:
    """One plain Keras-on-JAX fit: examples over the wall time of its epochs, the first left out;
    None where XLA aborted it (a DataParallel all-reduce stuck in its rendezvous, which the plain
    loop meets too: docs/measuring/measurements.md#jax)."""
    out = subprocess.run([sys.executable, str(HERE / "plain_jax_loop.py"), *args], env=ENV,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        print(f"plain loop {' '.join(args)} ended with {out.returncode}: round left out",
              flush=True)
        return None
    rates = json.loads(out.stdout.strip().splitlines()[-1])["examples_per_sec"][1:]
    return statistics.harmonic_mean(rates)


def measure(rounds: int, variants: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per variant: bench ÷ plain over the rounds, the median and its interval, the raw figures."""
    variants = variants or list(VARIANTS)
    ratios: dict[str, list[float]] = {vid: [] for vid in variants}
    raw: dict[str, list[dict[str, float]]] = {vid: [] for vid in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            order = list(variants)
            random.Random(k).shuffle(order)
            for vid in order:
                if k % 2 == 0:
                    headline, rate = bench_headline(Path(tmp), vid, SCENARIO), plain(VARIANTS[vid])
                else:
                    rate, headline = plain(VARIANTS[vid]), bench_headline(Path(tmp), vid, SCENARIO)
                if rate is None:
                    continue
                ratios[vid].append(headline / rate)
                raw[vid].append({"bench": headline, "plain": rate})
                print(f"round {k + 1} {vid}: {headline:,.0f} / {rate:,.0f} = "
                      f"{ratios[vid][-1]:.3f}", flush=True)
    return {vid: {"ratios": ratios[vid], "median": statistics.median(ratios[vid]),
                  "interval": bootstrap_median_interval(ratios[vid]), "rounds": raw[vid]}
            for vid in variants}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    table = measure(args.rounds)
    print("| variant | bench ÷ plain Keras-on-JAX fit, one iterator (median) | 95% interval |")
    print("|---|---|---|")
    for vid, row in table.items():
        lo, hi = row["interval"]
        print(f"| {vid} | {row['median']:.3f} | {lo:.3f}–{hi:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
