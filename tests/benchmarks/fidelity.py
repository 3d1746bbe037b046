"""Fidelity: bench's headline against the plain loop a user writes (plain_loop.py), per variant.

Rounds of six variants of the default scenario (default strategy, Mirrored x1 and x2; fit and
the custom loop), each variant in a freshly shuffled place: its `bench run --only` (the variant
with its control twin and the yardstick, measured as scenarios/mnist_mirrored.toml measures, in
interleaved rounds) and its two plain loops (`--iterators one` and `fresh`), each its own
process, back to back, in an order reversed every other round. A variant's sides so run within
a minute or two of each other, and a drift across them lands on both sides alike over two
rounds. Per round and variant: bench's headline ÷ the plain loop's examples over the wall time
of its epochs (the first, which compiles, left out).

The like-for-like figure is the ratio to the plain loop that keeps one iterator over its epochs
(`--iterators one`): both are then a step rate, which is what the headline is. The ratio to the
plain loop with a fresh iterator each epoch (`--iterators fresh`, a plain `fit(dataset,
epochs=E)`) is printed beside it with that loop's epoch ends: destroying a finished tf.data
iterator often waits for tf.data's autotune thread (docs/measuring/design.md, #epoch-ends), a
cost per epoch that a step rate does not contain.

    python tests/benchmarks/fidelity.py --rounds 5 [--json out.json] [--only default-]
        [--scenario a copy of the default scenario with other [measure] values]
"""

from __future__ import annotations

import argparse
import json
import os
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

from tests.benchmarks.intervals import bootstrap_median_interval  # noqa: E402

SCENARIO = REPO / "scenarios" / "mnist_mirrored.toml"
# variant id in the default scenario -> the plain loop's arguments
VARIANTS = {
    "default-r1-fit-float32-gb64": ["--strategy", "default", "--api", "fit"],
    "default-r1-ctl-float32-gb64": ["--strategy", "default", "--api", "ctl"],
    "mirrored-r1-fit-float32-gb64": ["--strategy", "mirrored", "--replicas", "1", "--api", "fit"],
    "mirrored-r1-ctl-float32-gb64": ["--strategy", "mirrored", "--replicas", "1", "--api", "ctl"],
    "mirrored-r2-fit-float32-gb128": ["--strategy", "mirrored", "--replicas", "2", "--api", "fit"],
    "mirrored-r2-ctl-float32-gb128": ["--strategy", "mirrored", "--replicas", "2", "--api", "ctl"],
}
MODES = ("one", "fresh")  # the plain loop's iterator modes: like-for-like first
LONG_END_S = 0.5  # an epoch end longer than this waited for tf.data's autotune thread
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def plain(args: list[str], mode: str) -> dict[str, Any]:
    """One plain loop: its examples over the wall time of its epochs (the first, which compiles,
    left out), every epoch's rate, and (custom loop, fresh iterators) each epoch end's wait."""
    out = subprocess.run([sys.executable, str(HERE / "plain_loop.py"), *args,
                          "--iterators", mode], env=ENV,
                         capture_output=True, text=True, check=True, timeout=900)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    rates = figures["examples_per_sec"][1:]
    return {"rate": statistics.harmonic_mean(rates), "epochs": rates, "end_s": figures["end_s"]}


def bench_headline(work: Path, vid: str, scenario: Path = SCENARIO) -> float:
    """`bench run --only VID` of the default scenario: the variant's headline examples/s."""
    results = work / f"results-{random.random():.6f}"
    subprocess.run([sys.executable, "-m", "bench", "run", str(scenario), "--only", vid,
                    "--no-report", "-o", str(results)], env=ENV, capture_output=True, text=True,
                   check=True, timeout=900, cwd=REPO)
    (records,) = results.glob("*/records.jsonl")
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        if rec["variant_id"] == vid and rec["status"] == "ok":
            return float(rec["throughput"]["headline"])
    raise RuntimeError(f"{vid}: no ok record in {records}")


def measure(rounds: int, variants: list[str], scenario: Path) -> dict[str, dict[str, Any]]:
    """Per variant: bench ÷ plain loop for each iterator mode over the rounds, the median and its
    interval, the fresh-iterator loop's epoch ends, and every round's raw figures."""
    ratios: dict[str, dict[str, list[float]]] = {vid: {m: [] for m in MODES} for vid in variants}
    ends: dict[str, list[float]] = {vid: [] for vid in variants}
    raw: dict[str, list[dict[str, Any]]] = {vid: [] for vid in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            order = list(variants)
            random.Random(k).shuffle(order)
            for vid in order:
                sides = ["bench", *MODES] if k % 2 == 0 else [*reversed(MODES), "bench"]
                figures: dict[str, dict[str, Any]] = {}
                headline = 0.0
                for side in sides:
                    if side == "bench":
                        headline = bench_headline(Path(tmp), vid, scenario)
                    else:
                        figures[side] = plain(VARIANTS[vid], side)
                for m in MODES:
                    ratios[vid][m].append(headline / figures[m]["rate"])
                ends[vid] += figures["fresh"]["end_s"]
                raw[vid].append({"bench": headline, "plain": figures})
                print(f"round {k + 1} {vid}: {ratios[vid]['one'][-1]:.3f} "
                      f"(fresh {ratios[vid]['fresh'][-1]:.3f})", flush=True)
    table: dict[str, dict[str, Any]] = {}
    for vid in variants:
        row: dict[str, Any] = {"rounds": raw[vid], "end_s": ends[vid]}
        for m in MODES:
            values = ratios[vid][m]
            row[m] = {"ratios": values, "median": statistics.median(values),
                      "interval": bootstrap_median_interval(values)}
        table[vid] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", default="", help="the variants whose id starts with this")
    parser.add_argument("--scenario", type=Path, default=SCENARIO,
                        help="the default scenario, or a copy with other [measure] values")
    args = parser.parse_args()
    variants = [vid for vid in VARIANTS if vid.startswith(args.only)]
    if not variants:
        parser.error(f"--only {args.only!r}: no variant's id starts with it ({', '.join(VARIANTS)})")
    table = measure(args.rounds, variants, args.scenario.resolve())
    print("| variant | bench ÷ plain, one iterator (median) | 95% interval | "
          "bench ÷ plain, fresh iterator per epoch (median) | 95% interval | "
          "custom loop's epoch ends that waited (mean wait) |")
    print("|---|---|---|---|---|---|")
    for vid, row in table.items():
        (lo, hi), (flo, fhi) = row["one"]["interval"], row["fresh"]["interval"]
        long_ends = [s for s in row["end_s"] if s > LONG_END_S]
        waited = (f"{len(long_ends)} of {len(row['end_s'])} "
                  f"({statistics.mean(long_ends):.1f} s)" if long_ends
                  else f"0 of {len(row['end_s'])}" if row["end_s"] else "-")
        print(f"| {vid} | {row['one']['median']:.3f} | {lo:.3f}–{hi:.3f} | "
              f"{row['fresh']['median']:.3f} | {flo:.3f}–{fhi:.3f} | {waited} |")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
