"""The run's time breakdown: phases add up to what the parent measured, duty cycle is honest."""

from __future__ import annotations

import pytest

from bench import overhead


def record(vid: str, timed: list[list[float]], k: int = 1) -> dict:
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
                   "parent": {"analysis_s": 0.3, "total_s": 5.2}},
    }


def test_phases_add_up_to_the_variants_total() -> None:
    phases = overhead.variant_phases(record("a", [[0.2] * 5, [0.2] * 5]))
    assert sum(phases.values()) == pytest.approx(5.2)
    assert phases["timed"] == pytest.approx(2.0)
    assert phases["first_step"] == pytest.approx(0.5)
    assert phases["warmup"] == pytest.approx(0.2)
    assert phases["profiler"] == pytest.approx(0.2)
    assert phases["loop_other"] == pytest.approx(0.3)  # loop minus every window in it
    assert phases["teardown"] == pytest.approx(0.2)  # process wall minus the worker's own
    assert phases["other"] == pytest.approx(5.2 - 4.92)
    assert overhead.fixed_cost_s(phases) == pytest.approx(5.2 - 2.0 - 0.2)


def test_blocks_of_steps_count_k_steps_each() -> None:
    phases = overhead.variant_phases(record("a", [[0.1] * 4], k=4))
    assert phases["timed"] == pytest.approx(1.6)


def test_duty_cycle_is_timed_time_over_the_run_wall() -> None:
    records = [record("a", [[0.2] * 5]), record("b", [[0.2] * 10])]
    breakdown = overhead.run_breakdown(records, wall_s=12.0, extra={"runner_peak_rss_mb": 50.0})
    assert breakdown["timed_s"] == pytest.approx(3.0)
    assert breakdown["duty_cycle"] == pytest.approx(0.25)
    assert breakdown["outside_variants_s"] == pytest.approx(12.0 - 2 * 5.2)
    line = overhead.describe(breakdown)
    assert "duty cycle 25%" in line and "runner peak RSS 50 MB" in line


def test_a_failed_variant_without_timing_costs_its_whole_time() -> None:
    failed = {"variant_id": "x", "wall_s": 25.0, "timing": {"parent": {"total_s": 25.2}}}
    phases = overhead.variant_phases(failed)
    assert phases["timed"] == 0.0
    assert overhead.fixed_cost_s(phases) == pytest.approx(25.2)
