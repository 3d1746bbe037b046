"""Harness honesty: bench's median examples/s vs a hand-written Keras fit loop, alternating.

Run with `nox -s benchmarks` or `python -m pytest -m benchmark tests/benchmarks -s`.
The figures go to pytest-benchmark's extra_info and are printed; the gate is |ratio - 1| <= 5%.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import bench_run

pytestmark = pytest.mark.benchmark

HERE = Path(__file__).parent


def handwritten() -> list[float]:
    out = subprocess.run([sys.executable, str(HERE / "handwritten_fit.py")], capture_output=True,
                         text=True, check=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return json.loads(out.stdout.strip().splitlines()[-1])["examples_per_sec"]


def test_bench_fit_matches_a_handwritten_loop(benchmark, tmp_path: Path) -> None:
    bench_figures: list[float] = []
    bench_mean_rates: list[float] = []
    hand_figures: list[float] = []

    def one_round() -> None:  # alternate so drift on the shared machine hits both sides
        run = bench_run(HERE / "honesty.toml", tmp_path / "results")
        (rec,) = run.records
        assert rec["status"] == "ok", rec["reason"]
        bench_figures.append(rec["throughput"]["median"])
        bench_mean_rates.append(rec["throughput"]["mean_rate"])
        hand_figures.append(statistics.median(handwritten()))

    benchmark.pedantic(one_round, rounds=3, iterations=1, warmup_rounds=0)
    bench_median = statistics.median(bench_figures)
    hand_median = statistics.median(hand_figures)
    ratio = bench_median / hand_median
    benchmark.extra_info.update(
        bench_examples_per_sec=bench_figures, bench_mean_rate=bench_mean_rates,
        handwritten_examples_per_sec=hand_figures, ratio_of_medians=ratio)
    print(f"\nbench median ex/s per round: {[round(x) for x in bench_figures]}"
          f"\nbench mean-rate ex/s:        {[round(x) for x in bench_mean_rates]}"
          f"\nhand-written ex/s per round: {[round(x) for x in hand_figures]}"
          f"\nratio of medians bench/hand: {ratio:.3f}")
    assert abs(ratio - 1) <= 0.05, f"bench/handwritten = {ratio:.3f}"
