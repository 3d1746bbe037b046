"""Interleaved timed windows, the A/A control and the headline figure.

The fast part checks the arithmetic (batches, the schedule's windows, the noise floor); the slow
part runs real variants through `bench run` and checks, from the records' own clocks, that no
two variants' timed windows overlapped, that rounds were shuffled, that the two clocks of the
headline agree, and that `--no-interleave` runs the variants one after another.
"""

from __future__ import annotations

import math
import os
import random
import time
from typing import Any

import pytest

from bench.compare.noise import describe, noise_floor, within_noise
from bench.launch.rounds import batches, finishing_width, round_order
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from bench.timing import throughput
from bench.training.gate import Gate
from bench.training.schedule import Schedule
from tests.conftest import BenchRun, bench_run, write_scenario
from tests.test_scenario import BASE

# --------------------------------------------------------------------------------------------
# Fast: no TensorFlow


def test_batches_are_even_and_keep_the_order() -> None:
    assert [len(b) for b in batches(list(range(13)), 5)] == [5, 4, 4]
    assert [x for b in batches(list(range(13)), 5) for x in b] == list(range(13))
    assert batches(list(range(3)), 8) == [[0, 1, 2]]
    assert batches([], 4) == []
    with pytest.raises(ValueError):
        batches([1], 0)


def test_rounds_come_in_counterbalanced_pairs() -> None:
    """A shuffled order, then its reverse: each variant's mean place over the pair is the middle,
    so a drift steady across the pair lands on all alike."""
    rng, variants = random.Random(3), list("abcdef")
    first, reverse_next = round_order(variants, None, rng)
    second, after_pair = round_order(variants, reverse_next, rng)
    assert sorted(first) == variants and second == first[::-1]
    assert reverse_next == first and after_pair is None  # the pair is done: the next shuffles
    assert {first.index(v) + second.index(v) for v in variants} == {len(variants) - 1}
    orders = {tuple(round_order(variants, None, rng)[0]) for _ in range(20)}
    assert len(orders) > 1  # the first of each pair is a fresh shuffle
    # when the participants changed (one finished its windows), no reversal: a fresh order
    fresh, reverse_next = round_order(variants[:5], first, rng)
    assert sorted(fresh) == variants[:5] and reverse_next == fresh


def test_variants_finish_one_per_core_unless_one_measures_checkpoints() -> None:
    def variants(measure: dict[str, Any]) -> list[Any]:
        return expand(parse_scenario({**BASE, "measure": measure,
                                      "strategies": [{"name": "default"}, {"name": "mirrored"}]}))
    width = finishing_width(variants({}))
    assert width == min(4, os.cpu_count() or 1)
    assert finishing_width(variants({"checkpoint": {"every": 5}})) == 1


def test_observer_flags_only_a_block_beyond_the_windows_noise() -> None:
    from bench.training.observer import summary as observer_summary

    windows = [0.100 + 0.001 * k for k in range(30)]  # median 0.1145, 5th percentile ~0.101
    within = observer_summary(0.105, windows, window_steps=10, unobserved_steps=10)
    assert within["ratio"] == pytest.approx(0.1145 / 0.105) and within["ratio"] > 1.02
    assert within["flagged"] is False  # slower than some observed stretches: one noisy sample
    beyond = observer_summary(0.095, windows, window_steps=10, unobserved_steps=10)
    assert beyond["flagged"] is True and beyond["observed_stretch_step_p5_s"] > 0.0095
    assert observer_summary(0.120, windows, 10, 10)["flagged"] is False  # ratio under 1
    # a longer block is compared per step: three windows' worth, 3% faster per step
    longer = observer_summary(3 * 0.095, windows, window_steps=10, unobserved_steps=30)
    assert longer["ratio"] == pytest.approx(0.1145 / 0.095) and longer["flagged"] is True


def test_a_block_is_held_against_observed_stretches_of_as_many_steps() -> None:
    from bench.training.observer import observed_stretches
    from bench.training.observer import summary as observer_summary

    # 3-step windows alternating 10 and 14 ms per step: any one window is 10 or 14 ms a step,
    # but every 30-step stretch (ten windows) averages 12 ms a step
    windows = [0.030 if k % 2 == 0 else 0.042 for k in range(100)]
    stretches = observed_stretches(windows, window_steps=3, unobserved_steps=30)
    assert len(stretches) == 10 and stretches == pytest.approx([0.012] * 10)
    # an 11 ms/step block: 9% faster than every stretch (flagged), though no faster than the
    # fastest single windows (which the flag held it against before)
    flagged = observer_summary(0.011 * 30, windows, window_steps=3, unobserved_steps=30)
    assert flagged["flagged"] is True and flagged["observed_stretch_step_p5_s"] == \
        pytest.approx(0.012)
    # a tail of windows too short for a stretch joins the one before it
    assert len(observed_stretches(windows[:25], window_steps=3, unobserved_steps=30)) == 2
    # fewer steps than the block: one stretch of all the windows
    assert observed_stretches([0.024, 0.024], 8, 30) == pytest.approx([0.003])


def test_the_unobserved_block_is_at_least_thirty_steps() -> None:
    from bench.training.observer import OBSERVER_MIN_STEPS
    from bench.training.observer import block_steps as observer_block_steps

    assert OBSERVER_MIN_STEPS == 30
    assert observer_block_steps(3, 1) == 30  # short windows: the block's fixed cost stays small
    assert observer_block_steps(50, 1) == 50  # long windows: a window's steps
    assert observer_block_steps(3, 4) == 32  # whole steps_per_execution blocks


def test_schedule_places_a_gate_before_every_window() -> None:
    schedule = Schedule(warmup_steps=4, window_steps=3, repeats=2, gate=Gate(None, 1.0))
    starts = {step: schedule.window_starting_at(step) for step in range(12)}
    assert {s: w for s, w in starts.items() if w is not None} == {4: 0, 7: 1}
    assert [n for n in range(12) if schedule.ends_a_window(n)] == [7, 10]
    assert schedule.total_steps == 10 and schedule.timed_steps == 6


def test_settling_steps_open_each_window_untimed() -> None:
    schedule = Schedule(warmup_steps=4, window_steps=3, repeats=2, gate=Gate(None, 1.0),
                        settle_steps=2)
    assert [s for s in range(16) if schedule.window_starting_at(s) is not None] == [4, 9]
    assert [s for s in range(16) if schedule.clock_starts_at(s)] == [6, 11]
    assert [s for s in range(16) if schedule.settling(s)] == [4, 5, 9, 10]
    assert [n for n in range(16) if schedule.ends_a_window(n)] == [9, 14]
    assert (schedule.total_steps, schedule.sampled_steps, schedule.timed_steps) == (14, 10, 6)


def test_a_settling_step_is_in_no_sample_and_no_window_clock() -> None:
    """A loop through LoopClock whose settling steps are slow: neither the samples nor the
    window clocks may hold them."""
    from bench.training.schedule import LoopClock

    class IdleGate(Gate):
        """A gate that holds each window back 30 ms, as other variants' windows would."""

        def wait(self, segment: str, index: int = 0) -> None:
            time.sleep(0.03)

    schedule = Schedule(warmup_steps=1, window_steps=2, repeats=3, gate=IdleGate(None, 1.0),
                        settle_steps=1)
    clock = LoopClock(schedule, schedule.total_steps, lambda done, total: None)
    for step in range(schedule.total_steps):
        clock.before(step, time.perf_counter())
        time.sleep(0.05 if schedule.settling(step) else 0.0)
        clock.lap(1)
    assert clock.timer.steps == schedule.sampled_steps == 7
    assert max(clock.timer.samples) < 0.025  # no 50 ms settling step among them
    assert len(clock.window_s) == 3 and max(clock.window_s) < 0.025
    assert clock.steps_done == schedule.total_steps == 10
    # three 50 ms settling steps, and none of the time at the gate before them
    assert 0.15 <= clock.result([]).settling_s < 0.15 + 0.025 * 3


def test_headline_is_examples_over_the_window_clocks() -> None:
    windows = [[0.01] * 10, [0.02] * 10]
    thr = throughput(windows, global_batch=64, window_s=[0.11, 0.21])
    assert thr.headline == pytest.approx(64 * 20 / 0.32)
    assert thr.per_repeat == pytest.approx([640 / 0.11, 640 / 0.21])
    assert thr.mean_rate == pytest.approx(64 * 20 / 0.30)
    assert thr.median == pytest.approx(64 / 0.015)
    with pytest.raises(ValueError):
        throughput(windows, 64, window_s=[0.1])


def control_records(base_rates: list[float], twin_rates: list[float]) -> list[dict[str, Any]]:
    def rec(role: str, rates: list[float]) -> dict[str, Any]:
        headline = len(rates) / sum(1.0 / r for r in rates)
        return {"variant_id": f"v-{role}", "status": "ok", "variant": {"control": role},
                "throughput": {"headline": headline, "median": headline, "per_repeat": rates}}
    return [rec("baseline", base_rates), rec("twin", twin_rates)]


def test_noise_floor_from_the_control_twins() -> None:
    floor = noise_floor(control_records([100.0, 102.0, 98.0, 100.0], [101.0, 103.0, 99.0, 101.0]))
    assert floor is not None
    assert floor["difference_pct"] == pytest.approx(1.0, abs=0.05)
    lo, hi = floor["interval_pct"]
    assert lo <= floor["difference_pct"] <= hi
    assert floor["rounds"] == 4 and floor["baseline"] == "v-baseline"
    line = describe(floor)
    assert line.startswith("noise floor: ") and "+1.0%" in line and "95% interval" in line
    assert within_noise(1.009, floor) and not within_noise(1.10, floor)


def test_noise_floor_resamples_blocks_of_consecutive_rounds() -> None:
    """Drift that lasts a few rounds is not independent noise: the same per-round ratios in a
    drifting order must give a wider interval than shuffled, and every resample is made of
    runs of consecutive rounds."""
    import numpy as np

    from bench.compare.noise import block_length, block_picks

    assert block_length(120) == 5 and block_length(1) == 1
    picks = block_picks(np.random.default_rng(0), 120, 50)
    assert picks.shape == (50, 120)
    assert np.all((picks[:, 1:5] - picks[:, :4]) % 120 == 1)  # the first block runs on

    ratios = [1.0 + 0.04 * math.sin(2 * math.pi * k / 12) for k in range(120)]  # a 12-round drift
    shuffled = ratios[:]
    random.Random(0).shuffle(shuffled)
    def width(twin_over_base: list[float]) -> float:
        lo, hi = noise_floor(control_records([100.0] * 120,
                                             [100.0 * r for r in twin_over_base]))["interval_pct"]
        return hi - lo
    assert width(ratios) > 1.5 * width(shuffled)


def test_no_noise_floor_without_both_twins() -> None:
    records = control_records([100.0, 100.0], [100.0, 100.0])
    assert noise_floor(records[:1]) is None
    assert describe(None).startswith("noise floor: not measured")
    assert not within_noise(1.0, None)


# --------------------------------------------------------------------------------------------
# Slow: real variants through `bench run`

SCENARIO = """
[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = 1

[measure]
warmup_steps = 5
steps = 12
repeats = 4
trace_steps = 0
timeout_s = 240
settle_steps = 2

[train]
api = ["fit", "ctl"]
"""


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    tmp = tmp_path_factory.mktemp("interleaved")
    return bench_run(write_scenario(tmp, SCENARIO, name="rounds"), tmp / "results")


@pytest.fixture(scope="module")
def sequential(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    tmp = tmp_path_factory.mktemp("sequential")
    return bench_run(write_scenario(tmp, SCENARIO, name="rounds"), tmp / "results",
                     "--no-interleave", "--no-control")


def windows_of(record: dict[str, Any]) -> list[tuple[float, float]]:
    measurement = record["measurement"]
    return [(start, start + seconds) for start, seconds in
            zip(measurement["window_started_at"], measurement["window_s"], strict=True)]


@pytest.mark.slow
class TestInterleavedRun:
    def test_settling_steps_run_but_are_not_timed(self, interleaved: BenchRun) -> None:
        for rec in interleaved.records:
            assert rec["measurement"]["settle_steps"] == 2, rec["variant_id"]
            windows = rec["samples"]["timed"]
            assert [len(w) for w in windows] == [12] * 4  # 12 timed steps each, none settling
            assert len(rec["measurement"]["window_s"]) == 4
            # 2 settling steps per window, each at least a fast step's time, and no gate wait
            # (the other variants' windows) among them
            settling_s = rec["measurement"]["settling_s"]
            assert 8 * min(min(w) for w in windows) <= settling_s <= 8 * 3 * max(map(max, windows))

    def test_every_variant_and_the_control_twin_is_ok(self, interleaved: BenchRun) -> None:
        assert interleaved.proc.returncode == 0, interleaved.proc.stdout + interleaved.proc.stderr
        ids = [r["variant_id"] for r in interleaved.records]
        assert ids[:3] == ["default-r1-fit-float32-gb16", "default-r1-fit-float32-gb16-control",
                           "yardstick"]
        assert len(ids) == 6 and all(r["status"] == "ok" for r in interleaved.records)
        roles = {r["variant_id"]: r["variant"]["control"] for r in interleaved.records}
        assert [roles[i] for i in ids[:3]] == ["baseline", "twin", "yardstick"]
        assert sum(role is not None for role in roles.values()) == 3

    def test_no_two_variants_windows_overlap(self, interleaved: BenchRun) -> None:
        spans = sorted((start, end, r["variant_id"]) for r in interleaved.records
                       for start, end in windows_of(r))
        assert len(spans) == 6 * 4
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            assert end <= start + 1e-3, f"{first} and {second} ran at once"

    def test_rounds_are_shuffled_and_every_variant_took_part_in_each(self, interleaved: BenchRun
                                                                      ) -> None:
        records = interleaved.records
        rounds = {r["interleave"]["rounds"] for r in records}
        assert rounds == {5}  # 4 timed windows and the unobserved block
        orders = [tuple(sorted(records, key=lambda r: r["interleave"]["positions"][k]))
                  for k in range(5)]
        assert len({tuple(r["variant_id"] for r in order) for order in orders}) > 1
        for k in range(5):
            assert sorted(r["interleave"]["positions"][k] for r in records) == list(range(6))
        for r in records:  # windows 1-2 and 3-4 are counterbalanced pairs: A..F then F..A
            places = r["interleave"]["positions"]
            assert places[0] + places[1] == 5 and places[2] + places[3] == 5, places

    def test_windows_run_in_round_order_across_variants(self, interleaved: BenchRun) -> None:
        """Window k of every variant ends before window k+1 of any variant starts."""
        records = interleaved.records
        for k in range(3):
            last_end = max(windows_of(r)[k][1] for r in records)
            next_start = min(windows_of(r)[k + 1][0] for r in records)
            assert last_end <= next_start + 1e-3

    def test_the_two_clocks_of_the_headline_agree(self, interleaved: BenchRun) -> None:
        for rec in interleaved.records:
            thr = rec["throughput"]
            laps = sum(sum(w) for w in rec["samples"]["timed"])
            walls = sum(rec["measurement"]["window_s"])
            assert walls >= laps * 0.999, rec["variant_id"]  # the window clock holds every lap
            assert thr["headline"] == pytest.approx(thr["mean_rate"], rel=0.02), rec["variant_id"]
            assert thr["headline"] == pytest.approx(
                rec["effective"]["global_batch"] * 4 * 12 / walls, rel=1e-9)
            assert rec["measurement"]["interleaved"] is True
            assert rec["measurement"]["gate_wait_s"] > 0

    def test_observer_effect_is_measured(self, interleaved: BenchRun) -> None:
        for rec in interleaved.records:
            observer = rec["observer"]
            assert observer["status"] == "ok", observer
            per_step = observer["unobserved_s"] / observer["steps"]
            assert observer["window_steps"] == rec["variant"]["measure"]["steps"]
            assert observer["steps"] >= 30
            assert observer["ratio"] == pytest.approx(
                observer["observed_window_s"] / observer["window_steps"] / per_step)
            assert 0.3 < observer["ratio"] < 3.0, observer
            # flagged only when observing costs over 2% AND the block beat 95% of the windows
            fast_step = observer["observed_stretch_step_p5_s"]
            assert observer["flagged"] is (observer["ratio"] > 1.02 and per_step < fast_step)
            assert fast_step <= max(rec["measurement"]["window_s"]) / observer["window_steps"]
            # its set-up waited at the side-by-side gate, its clock after the unobserved gate
            # (a clock that held that wait would read far longer than a window)
            assert {"prepare", "unobserved"} <= set(rec["measurement"]["gate_wait_by_segment"])

    def test_noise_floor_line_and_within_noise_marks(self, interleaved: BenchRun) -> None:
        out = interleaved.proc.stdout
        floor = noise_floor(interleaved.records)
        assert floor is not None and floor["rounds"] == 4
        assert describe(floor) in " ".join(out.split())
        assert math.isfinite(floor["difference_pct"])


@pytest.mark.slow
def test_no_interleave_runs_variants_one_after_another(sequential: BenchRun) -> None:
    assert sequential.proc.returncode == 0, sequential.proc.stdout + sequential.proc.stderr
    records = sequential.records
    assert len(records) == 4 and not any(r["variant"]["control"] for r in records)
    for earlier, later in zip(records, records[1:], strict=False):
        assert windows_of(earlier)[-1][1] <= windows_of(later)[0][0]
    for rec in records:
        assert rec["measurement"]["interleaved"] is False
        assert rec["measurement"]["gate_wait_s"] == 0 and "interleave" not in rec
        assert rec["measurement"]["settle_steps"] == 0  # back-to-back windows have no cold start
        assert rec["measurement"]["settling_s"] == 0
    assert "noise floor: not measured" in sequential.proc.stdout


def test_cli_help_names_the_interleave_and_control_switches() -> None:
    from tests.conftest import bench

    out = bench("run", "--help").stdout
    assert "--no-interleave" in out and "--no-control" in out
