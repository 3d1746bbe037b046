"""Fidelity: bench's headline against the plain loop a user writes (plain_loop.py), per variant.

Alternating rounds, each of them the six plain loops (default strategy, Mirrored x1 and x2;
fit and the custom loop; each its own process) and one `bench run` of the default scenario
(scenarios/mnist_mirrored.toml, as shipped: its 14 variants interleaved), the order reversed
every other round, so a drift across the round lands on both sides alike. Per round and
variant: bench's headline ÷ the plain loop's examples over the wall time of its epochs (the first
epoch, which compiles, left out), which is what the headline is too: examples over the wall time
of its windows, slow spells and slow iterators included. The plain loops' epochs can have two
speeds (a fresh iterator each epoch, and some epochs run at half speed), so the ratio to the
median of the fast epochs alone and the share of slow ones are printed beside it.

    python tests/benchmarks/fidelity.py --rounds 5 [--json out.json]
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
SLOW_MODE = 0.7  # an epoch under this share of the run's fastest is in the slow mode
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def plain(args: list[str]) -> dict[str, Any]:
    """One plain loop: its examples over the wall time of its epochs (examples/s), the median of
    its fast epochs, its share of slow epochs, and every epoch's rate (the first, which compiles,
    left out)."""
    out = subprocess.run([sys.executable, str(HERE / "plain_loop.py"), *args], env=ENV,
                         capture_output=True, text=True, check=True, timeout=900)
    rates = json.loads(out.stdout.strip().splitlines()[-1])["examples_per_sec"][1:]
    fast = [r for r in rates if r >= SLOW_MODE * max(rates)]
    return {"rate": statistics.harmonic_mean(rates), "fast_epochs": statistics.median(fast),
            "slow_share": 1 - len(fast) / len(rates), "epochs": rates}


def bench_headlines(work: Path) -> dict[str, float]:
    """One `bench run` of the default scenario: each variant's headline examples/s."""
    results = work / f"results-{random.random():.6f}"
    subprocess.run([sys.executable, "-m", "bench", "run", str(SCENARIO), "--no-report",
                    "-o", str(results)], env=ENV, capture_output=True, text=True, check=True,
                   timeout=1800, cwd=REPO)
    (records,) = results.glob("*/records.jsonl")
    out = {}
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        if rec["status"] == "ok" and rec["variant"].get("control") in (None, "baseline"):
            out[rec["variant_id"]] = rec["throughput"]["headline"]
    return out


def measure(rounds: int) -> dict[str, dict[str, object]]:
    ratios: dict[str, list[float]] = {vid: [] for vid in VARIANTS}
    to_fast: dict[str, list[float]] = {vid: [] for vid in VARIANTS}
    slow: dict[str, list[float]] = {vid: [] for vid in VARIANTS}
    raw: dict[str, list[dict[str, Any]]] = {vid: [] for vid in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            plain_first = k % 2 == 0
            sides = ["plain", "bench"] if plain_first else ["bench", "plain"]
            figures: dict[str, dict[str, float]] = {}
            headlines: dict[str, float] = {}
            for side in sides:
                if side == "bench":
                    headlines = bench_headlines(Path(tmp))
                else:
                    figures = {vid: plain(args) for vid, args in VARIANTS.items()}
            for vid in VARIANTS:
                ratios[vid].append(headlines[vid] / figures[vid]["rate"])
                to_fast[vid].append(headlines[vid] / figures[vid]["fast_epochs"])
                slow[vid].append(figures[vid]["slow_share"])
                raw[vid].append({"bench": headlines[vid], "plain_epochs": figures[vid]["epochs"]})
            print(f"round {k + 1}: " + ", ".join(f"{vid} {ratios[vid][-1]:.3f}"
                                                 for vid in VARIANTS), flush=True)
    return {vid: {"ratios": values, "median": statistics.median(values),
                  "interval": bootstrap_median_interval(values),
                  "to_fast_epochs": to_fast[vid],
                  "to_fast_median": statistics.median(to_fast[vid]),
                  "plain_slow_share": statistics.mean(slow[vid]), "rounds": raw[vid]}
            for vid, values in ratios.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    table = measure(args.rounds)
    print("| variant | bench ÷ plain (median) | 95% interval | range | "
          "bench ÷ plain's fast epochs (median) | plain slow epochs |")
    print("|---|---|---|---|---|---|")
    for vid, row in table.items():
        lo, hi = row["interval"]
        values = row["ratios"]
        print(f"| {vid} | {row['median']:.3f} | {lo:.3f}–{hi:.3f} | "
              f"{min(values):.3f}–{max(values):.3f} | {row['to_fast_median']:.3f} | "
              f"{row['plain_slow_share']:.0%} |")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
