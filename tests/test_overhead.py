"""The run's time breakdown: phases add up to what the parent measured, duty cycle is honest."""

from __future__ import annotations

import pytest

from bench.perf import overhead
from bench.record.model import VariantRecord, load_all


def record(vid: str, timed: list[list[float]], k: int = 1, harness_s: float = 0.0) -> dict:
    return {
        "variant_id": vid,
        "wall_s": 4.7,
        "samples": {"warmup": [0.5, 0.1, 0.1], "timed": timed, "traced": [0.1, 0.1]},
        "trace": {"start_s": 0.05, "stop_s": 0.15},
        "timing": {"steps_per_sample": k, "worker_s": 4.5,
                   # loop: first step, warmup, timed, traced, profiler, then 0.3 s of its own
                   "phases": {"start": 0.1, "import": 0.01, "build": 0.8,
                              "loop": (0.7 + 0.2 + sum(map(sum, timed))) * k + 0.2 + 0.3,
                              "final_loss": 0.01, "utilization": 0.1, "checks": 0.0},
                   "parent": {"analysis_s": 0.3, "total_s": 5.2},
                   **overhead.harness_overhead(harness_s, 3 + 5 * len(timed), 0.2)},
    }


def test_phases_add_up_to_the_variants_total() -> None:
    phases = overhead.variant_phases(VariantRecord.load(record("a", [[0.2] * 5, [0.2] * 5])))
    assert sum(phases.values()) == pytest.approx(5.2)
    assert phases["timed"] == pytest.approx(2.0)
    assert phases["first_step"] == pytest.approx(0.5)
    assert phases["warmup"] == pytest.approx(0.2)
    assert phases["profiler"] == pytest.approx(0.2)
    assert phases["loop_other"] == pytest.approx(0.3)  # loop minus every window in it
    assert phases["teardown"] == pytest.approx(0.2)  # process wall minus the worker's own
    assert phases["other"] == pytest.approx(5.2 - 4.92)
    assert overhead.fixed_cost_s(phases) == pytest.approx(5.2 - 2.0 - 0.2)


def test_a_clusters_restarts_are_their_own_phase_not_teardown() -> None:
    restarted = record("a", [[0.2] * 5, [0.2] * 5])
    restarted["wall_s"] += 2.5  # the supervisor's wall: two failed attempts, then this one
    restarted["timing"]["parent"]["total_s"] += 2.5
    restarted["cluster"] = {"attempts": 3, "restart_s": 2.5}
    phases = overhead.variant_phases(VariantRecord.load(restarted))
    assert phases["restarts"] == pytest.approx(2.5)
    assert phases["teardown"] == pytest.approx(0.2)  # as without the restarts
    assert sum(phases.values()) == pytest.approx(5.2 + 2.5)


def test_settling_steps_are_their_own_phase_and_no_fixed_cost() -> None:
    settled = record("a", [[0.2] * 5, [0.2] * 5])
    settled["timing"]["phases"]["loop"] += 0.25  # two windows' settling steps, inside the loop
    settled["timing"]["parent"]["total_s"] += 0.25  # and so inside the variant's whole time
    settled["measurement"] = {"settling_s": 0.25}
    phases = overhead.variant_phases(VariantRecord.load(settled))
    assert phases["settling"] == pytest.approx(0.25)
    assert phases["loop_other"] == pytest.approx(0.3)  # not counted twice
    assert overhead.fixed_cost_s(phases) == pytest.approx(
        overhead.fixed_cost_s(overhead.variant_phases(
            VariantRecord.load(record("a", [[0.2] * 5, [0.2] * 5])))))
    line = overhead.describe(overhead.run_breakdown(load_all([settled]), wall_s=6.0))
    assert "2.0 s in timed windows and 0.2 s settling before them" in line


def test_blocks_of_steps_count_k_steps_each() -> None:
    phases = overhead.variant_phases(VariantRecord.load(record("a", [[0.1] * 4], k=4)))
    assert phases["timed"] == pytest.approx(1.6)


def test_duty_cycle_is_timed_time_over_the_run_wall() -> None:
    records = [record("a", [[0.2] * 5]), record("b", [[0.2] * 10])]
    breakdown = overhead.run_breakdown(load_all(records), wall_s=12.0,
                                       extra={"runner_peak_rss_mb": 50.0})
    assert breakdown["timed_s"] == pytest.approx(3.0)
    assert breakdown["duty_cycle"] == pytest.approx(0.25)
    # without harness: build 0.8 + loop setup 0.3 + first step 0.5 + warmup 0.2 + traced 0.2
    # each, and timed 3.0
    assert breakdown["duty_cycle_ceiling"] == pytest.approx(3.0 / (3.0 + 2 * 2.0))
    # two variants building and warming up at once (interleaved rounds on two cores): their
    # build, loop setup, first step and warmup (1.8 s each) cost the wall clock half their sum
    side_by_side = overhead.run_breakdown(load_all(records), wall_s=12.0, untimed_width=2)
    assert side_by_side["duty_cycle_ceiling"] == pytest.approx(3.0 / (3.0 + 2 * 0.2 + 1.8))
    assert breakdown["outside_variants_s"] == pytest.approx(12.0 - 2 * 5.2)
    line = overhead.describe(breakdown)
    assert "duty cycle 25%, at most 43% for this scenario" in line and "runner peak RSS 50 MB" in line


def test_harness_share_is_bench_code_per_step_over_the_median_step() -> None:
    # 13 steps with 2.6 ms of bench's own code: 0.2 ms per step against a 0.2 s median step
    assert overhead.harness_overhead(0.0026, 13, 0.2) == pytest.approx(
        {"harness_s": 0.0026, "harness_share": 0.001})
    assert overhead.harness_overhead(0.0, 0, 0.0)["harness_share"] == 0.0
    records = [record("a", [[0.2] * 5, [0.2] * 5], harness_s=0.0026),
               record("b", [[0.2] * 5, [0.2] * 5], harness_s=0.0104)]
    breakdown = overhead.run_breakdown(load_all(records), wall_s=12.0)
    assert breakdown["harness_share_max"] == pytest.approx(0.004)  # the worst variant
    assert "bench's own per-step code ≤ 0.40% of the median step" in overhead.describe(breakdown)


def test_a_failed_variant_without_timing_costs_its_whole_time() -> None:
    failed = {"variant_id": "x", "wall_s": 25.0, "timing": {"parent": {"total_s": 25.2}}}
    phases = overhead.variant_phases(VariantRecord.load(failed))
    assert phases["timed"] == 0.0
    assert overhead.fixed_cost_s(phases) == pytest.approx(25.2)


def test_peak_rss_is_the_process_own_not_its_parents() -> None:
    """A parent that once held 300 MB starts a child that holds little: the child's figure is
    its own (ru_maxrss would report the parent's 300 MB)."""
    import subprocess
    import sys

    child = "from bench.perf.overhead import peak_rss_mb; print(peak_rss_mb())"
    parent = ("import subprocess, sys\n"
              "block = bytearray(300 * 2**20)\n"
              "for i in range(0, len(block), 4096): block[i] = 1\n"
              "del block\n"
              f"subprocess.run([sys.executable, '-c', {child!r}], check=True)\n")
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                         check=True, timeout=60)
    assert 5 < float(out.stdout.strip()) < 150
