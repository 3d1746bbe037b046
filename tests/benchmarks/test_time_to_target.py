"""Examples to target from bench agree with a hand-written Keras loop (tests/benchmarks/
plain_target.py) of the same model, batch and learning rate, evaluated at the same examples
seen: within one evaluation interval, median over seeds, for the default strategy and Mirrored
x 2 through fit and the custom loop. Run with `python -m pytest -m benchmark
tests/benchmarks/test_time_to_target.py -s` (about 5 minutes on 2 cores; needs Debian's
dataset-fashion-mnist)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks import plain_target as plain
from tests.conftest import REPO, bench_run

pytestmark = pytest.mark.benchmark

SEEDS = 3
SCENARIO = f"""
[scenario]
name = "to_target_agreement"

[data]
name = "fashion_mnist"

[batch]
per_replica = {plain.PER_REPLICA}
learning_rate = {plain.LEARNING_RATE}

[train]
api = ["fit", "ctl"]

[measure]
warmup_steps = 1000
steps = 16
repeats = 2
trace_steps = 0
epochs = 0
control = false
timeout_s = 600

[target]
value = {plain.TARGET}
every_examples = {plain.EVERY}
max_examples = {plain.MAX_EXAMPLES}
max_seconds = 60
seeds = {SEEDS}

[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = 2
"""
PAIRS = {"default-r1-fit-float32-gb64": ("default", "fit"),
         "default-r1-ctl-float32-gb64": ("default", "ctl"),
         "mirrored-r2-fit-float32-gb128": ("mirrored2", "fit"),
         "mirrored-r2-ctl-float32-gb128": ("mirrored2", "ctl")}


def plain_examples(strategy: str, api: str) -> list[int | None]:
    proc = subprocess.run([sys.executable, "-m", "tests.benchmarks.plain_target", strategy, api,
                           str(SEEDS)], capture_output=True, text=True, cwd=REPO, timeout=900,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_of(values: list[int | None]) -> float:
    reached = [v for v in values if v is not None]
    assert len(reached) * 2 >= len(values), values
    return statistics.median(reached)


def test_examples_to_target_agree_with_a_plain_loop(tmp_path: Path, benchmark) -> None:
    if not Path(plain.DIR).exists():
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SCENARIO)

    def measure() -> dict[str, dict[str, object]]:
        run = bench_run(scenario, tmp_path / "results", timeout=1800)
        assert run.proc.returncode == 0, run.proc.stdout[-3000:]
        table = {}
        for vid, (strategy, api) in PAIRS.items():
            target = run.by_id()[vid]["target"]
            ours = [s["examples"] for s in target["seeds"]]
            theirs = plain_examples(strategy, api)
            table[vid] = {"bench": ours, "plain": theirs, "bench_median": median_of(ours),
                          "plain_median": median_of(theirs),
                          "agreement": target["agreement"]}
        return table

    table = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["examples_to_target"] = table
    for vid, row in table.items():
        print(f"{vid}: bench {row['bench']} (median {row['bench_median']:,.0f}), plain "
              f"{row['plain']} (median {row['plain_median']:,.0f}); measured ÷ projected "
              f"{row['agreement']}")
    for vid, row in table.items():
        assert abs(row["bench_median"] - row["plain_median"]) <= plain.EVERY, (vid, row)
