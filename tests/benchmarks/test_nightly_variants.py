"""The nightly scenarios' variants through pytest-benchmark's `benchmark` fixture.

For people who live in pytest: `python -m pytest -m benchmark tests/benchmarks/test_nightly_variants.py
--benchmark-autosave`, later `--benchmark-compare` (or `pytest-benchmark compare`). Each round is
one isolated `bench run --only VARIANT` (a fresh process, as bench always runs variants), so the
time pytest-benchmark records is the variant's whole run, start-up included; the figures that
matter ride along in `extra_info`: median examples/s, step time, spread. Gate on those with
`bench compare`, which tests per-step samples; pytest-benchmark's own compare-fail sees only
the round times (see DESIGN.md). `bench export --format pytest-benchmark` gives a run with the
per-step samples as rounds instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.nightly import NIGHTLY_SCENARIOS
from bench.scenario.loading import load_variants
from tests.conftest import REPO, bench_run

pytestmark = pytest.mark.benchmark

ROUNDS = int(os.environ.get("BENCH_BENCHMARK_ROUNDS", "1"))
CASES = [(path, v.id) for path in NIGHTLY_SCENARIOS for v in load_variants(REPO / path)[1]]


@pytest.mark.parametrize(("scenario", "variant_id"), CASES, ids=[c[1] for c in CASES])
def test_nightly_variant(benchmark, scenario: Path, variant_id: str, tmp_path: Path) -> None:
    runs = []

    def one_run() -> None:
        runs.append(bench_run(REPO / scenario, tmp_path / f"results{len(runs)}", "--only",
                              variant_id, "--no-report"))

    benchmark.pedantic(one_run, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    records = [r for run in runs for r in run.records]
    assert len(records) == ROUNDS and all(r["variant_id"] == variant_id for r in records)
    if records[0]["status"] == "skipped":
        pytest.skip(records[0]["reason"])
    assert all(r["status"] == "ok" for r in records), [r.get("reason") for r in records]
    throughputs = sorted(r["throughput"]["median"] for r in records)
    benchmark.extra_info.update(
        scenario=str(scenario), variant=variant_id,
        examples_per_sec=throughputs[len(throughputs) // 2],
        examples_per_sec_per_round=throughputs,
        step_time_median_s=records[0]["step_time"]["median"],
        spread_pct=records[0]["throughput"]["spread_pct"])
