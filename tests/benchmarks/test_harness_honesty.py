"""Harness honesty: bench's headline examples/s vs a hand-written Keras fit, alternating.

Run with `nox -s benchmarks` or `python -m pytest -m benchmark tests/benchmarks -s`.
The figures go to pytest-benchmark's extra_info and are printed. Interference on this shared
machine comes in bursts of tens of seconds that can halve a run (rounds of the same code were
seen between 6.6k and 19.8k ex/s), so the two sides alternate in many short rounds and the gate
is the median of the per-round paired ratios, which tolerates a few contaminated pairs.

Two yardsticks:
- across processes (a `bench run` vs a hand-written process): bench's headline ex/s (examples /
  wall clock of its timed windows) over a plain fit timed per epoch (no batch hook),
  |median ratio - 1| <= 5% (issue #2). Separate processes of the
  same code differ by more than 2% here (block means of 200 steps in one process already spread
  by ~30%), so 10 such pairs cannot resolve issue #8's 2%.
- in one process (paired_overhead.py, 40 alternating pairs): |median ratio - 1| <= 2% (issue
  #8), with a bootstrap 95% interval printed. The overhead itself is measured in every bench
  loop (`timing.harness_share`) and asserted in test_self_perf.py.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.intervals import bootstrap_median_interval
from tests.conftest import bench_run

pytestmark = pytest.mark.benchmark

HERE = Path(__file__).parent


def handwritten() -> list[float]:
    """A user's plain fit: timed per epoch (epoch hooks only, no batch hook, so nothing per step
    but what Keras itself does), epoch 0 as warmup, then windows of honesty.toml's size."""
    args = ["--per-epoch", "--epochs", "3", "--steps", "100"]  # as in honesty.toml
    out = subprocess.run([sys.executable, str(HERE / "handwritten_fit.py"), *args],
                         capture_output=True,
                         text=True, check=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return json.loads(out.stdout.strip().splitlines()[-1])["examples_per_sec"]


ROUNDS = 10


def test_bench_fit_matches_a_handwritten_loop(benchmark, tmp_path: Path) -> None:
    bench_headlines: list[float] = []
    bench_medians: list[float] = []
    bench_mean_rates: list[float] = []
    hand_rates: list[float] = []

    def one_round() -> None:  # alternate so drift on the shared machine hits both sides of a pair
        run = bench_run(HERE / "honesty.toml", tmp_path / "results", "--no-control")
        (rec,) = run.records
        assert rec["status"] == "ok", rec["reason"]
        bench_headlines.append(rec["throughput"]["headline"])
        bench_medians.append(rec["throughput"]["median"])
        bench_mean_rates.append(rec["throughput"]["mean_rate"])
        hand_rates.append(statistics.median(handwritten()))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    paired = [b / h for b, h in zip(bench_headlines, hand_rates, strict=True)]
    paired_median = [b / h for b, h in zip(bench_medians, hand_rates, strict=True)]
    paired_mean_rate = [b / h for b, h in zip(bench_mean_rates, hand_rates, strict=True)]
    ratio = statistics.median(paired)
    best_ratio = max(bench_headlines) / max(hand_rates)
    benchmark.extra_info.update(best_ratio=best_ratio,
                                best_ratio_mean_rate=max(bench_mean_rates) / max(hand_rates))
    benchmark.extra_info.update(
        bench_headline_examples_per_sec=bench_headlines,
        bench_median_examples_per_sec=bench_medians, bench_mean_rate=bench_mean_rates,
        median_paired_ratio_typical_step=statistics.median(paired_median),
        handwritten_examples_per_sec=hand_rates, paired_ratios=paired,
        median_paired_ratio=ratio, median_paired_ratio_mean_rate=statistics.median(paired_mean_rate))
    print(f"\nbench headline ex/s per round: {[round(x) for x in bench_headlines]}"
          f"\nbench median ex/s per round:   {[round(x) for x in bench_medians]}"
          f"\nbench mean-rate ex/s per round: {[round(x) for x in bench_mean_rates]}"
          f"\nhand-written ex/s per round:   {[round(x) for x in hand_rates]}"
          f"\npaired ratios bench headline/hand: {[round(x, 3) for x in paired]}"
          f" -> median {ratio:.3f}"
          f"\npaired ratios bench mean-rate/hand: {[round(x, 3) for x in paired_mean_rate]}"
          f" -> median {statistics.median(paired_mean_rate):.3f}"
          f"\nbest round bench headline / best hand-written: {best_ratio:.3f}"
          f"\nbest round bench mean-rate / best hand-written: "
          f"{max(bench_mean_rates) / max(hand_rates):.3f}")
    assert abs(ratio - 1) <= 0.05, f"median paired bench headline/handwritten = {ratio:.3f}"


def test_bench_fit_loop_matches_a_handwritten_fit_in_one_process(benchmark) -> None:
    """The same question inside one process (paired_overhead.py), where a burst hits both sides
    of a pair alike: bench's timed fit loop against boundary-only timing, examples over time."""
    def measure() -> dict[str, list[float]]:
        out = subprocess.run([sys.executable, str(HERE / "paired_overhead.py"), "--rounds", "40"],
                             capture_output=True, text=True, check=True, timeout=1200,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        return json.loads(out.stdout.strip().splitlines()[-1])

    figures = benchmark.pedantic(measure, rounds=1, iterations=1)
    mean_rate = [b / h for b, h in zip(figures["bench_mean_rate"], figures["hand"], strict=True)]
    median = [b / h for b, h in zip(figures["bench_median"], figures["hand"], strict=True)]
    ratio = statistics.median(mean_rate)
    low, high = bootstrap_median_interval(mean_rate)
    benchmark.extra_info.update(paired_mean_rate=mean_rate, paired_median=median,
                                median_paired_ratio_mean_rate=ratio,
                                median_paired_ratio_ci95=[low, high],
                                median_paired_ratio_median=statistics.median(median))
    print(f"\npaired bench mean-rate/hand: {[round(x, 3) for x in mean_rate]} -> median "
          f"{ratio:.3f} (bootstrap 95% interval {low:.3f}-{high:.3f})"
          f"\npaired bench median/hand: {[round(x, 3) for x in median]} -> median "
          f"{statistics.median(median):.3f}")
    assert abs(ratio - 1) <= 0.02, f"median paired bench mean-rate/handwritten = {ratio:.3f}"
