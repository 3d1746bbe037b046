"""Interleaved timed windows, the A/A control and the headline figure.

The fast part checks the arithmetic (batches, the schedule's windows, the noise floor); the slow
part runs real variants through `bench run` and checks, from the records' own clocks, that no
two variants' timed windows overlapped, that rounds were shuffled, that the two clocks of the
headline agree, and that `--no-interleave` runs the variants one after another.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.compare.noise import describe, noise_floor, within_noise
from bench.launch.rounds import batches, finishing_width, round_order
from bench.record.model import load_all
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from bench.timing import throughput
from bench.training.gate import Gate
from bench.training.schedule import Schedule
from tests.conftest import BenchRun, bench_run, write_scenario
from tests.early import EarlyContext, early_fixture
from tests.fixtures.report_runs import control_records
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


def test_a_variant_that_ends_while_its_group_builds_is_charged_until_its_end(tmp_path) -> None:
    """Variants start in groups; the parent waits for each in turn. One that ends (a skip) while
    another still builds is charged its own time, not the time until the parent looked."""
    import queue
    import sys

    from bench.launch.process import WorkerProcess
    from bench.launch.rounds import LiveVariant
    from bench.protocol import format_gate

    variant = expand(parse_scenario(BASE))[0]

    def live(name: str, code: str) -> LiveVariant:
        announced: queue.Queue[tuple[str, int, float]] = queue.Queue()
        proc = WorkerProcess([sys.executable, "-c", code], dict(os.environ),
                             tmp_path / f"{name}.log", on_gate=lambda segment, index:
                             announced.put((segment, index, time.monotonic())))
        return LiveVariant(variant, tmp_path, proc, tmp_path / f"{name}.gate", announced)

    since = time.monotonic()
    building = live("building", f"import time; time.sleep(3); print({format_gate('window')!r}, "
                                "flush=True); time.sleep(30)")
    skipped = live("skipped", "pass")
    try:
        assert building.run_to_gate(since)
        assert building.active_s >= 3.0  # until it announced its gate, after its 3 s
        skipped.proc.popen.wait(timeout=60)
        skipped.proc.join_output(timeout_s=60)  # its end is known before the parent looks
        looked = time.monotonic()
        assert not skipped.run_to_gate(since)
        # charged from the common start to its own end, however long the parent took to look
        ended = skipped.proc.output_ended_at
        assert ended is not None and ended < looked
        assert skipped.active_s == pytest.approx(ended - since, abs=1e-9)
    finally:
        building.close()
        skipped.close()


def test_a_freed_core_lets_the_next_variant_finish_whichever_finished(tmp_path) -> None:
    """Variants finish one per core, but records are taken in order: when the second of two
    finishing variants ends first, the third starts finishing at once, not after the first."""
    import queue
    import sys

    from bench.launch.process import WorkerProcess
    from bench.launch.rounds import LiveVariant, let_finish
    from bench.protocol import FINISH, format_gate

    variant = expand(parse_scenario(BASE))[0]

    def at_finish(name: str, finishing_s: float) -> LiveVariant:
        """A process that waits at its FINISH gate, then works `finishing_s` and ends."""
        fifo = tmp_path / f"{name}.gate"
        os.mkfifo(fifo, 0o600)
        announced: queue.Queue[tuple[str, int, float]] = queue.Queue()
        code = (f"import time; print({format_gate(FINISH)!r}, flush=True); "
                f"open({str(fifo)!r}).readline(); time.sleep({finishing_s})")
        proc = WorkerProcess([sys.executable, "-c", code], dict(os.environ),
                             tmp_path / f"{name}.log", on_gate=lambda segment, index:
                             announced.put((segment, index, time.monotonic())))
        one = LiveVariant(variant, tmp_path, proc, fifo, announced,
                          _writer=os.open(fifo, os.O_RDWR))
        assert one.run_to_gate() and one.at == (FINISH, 0)
        return one

    live = [at_finish("slow", 4.0), at_finish("quick", 0.2), at_finish("third", 0.2)]
    try:
        let_finish(live, 2)
        assert [one.finish_released_at is not None for one in live] == [True, True, False]
        live[0].finish(while_waiting=lambda: let_finish(live, 2))
        slow_released = live[0].finish_released_at
        assert slow_released is not None
        assert time.monotonic() - slow_released >= 4.0  # its record after its 4 s (sleeps never end early)
        # the third was let go while the slow one still worked (it cannot have ended before its
        # 4 s), when the quick one ended; waiting for the record in order would let it go after
        third = live[2].finish_released_at
        assert third is not None and live[1].finish_released_at < third < slow_released + 4.0
    finally:
        for one in live:
            one.close()


def test_observer_flags_only_an_interval_above_the_limit() -> None:
    from bench.training.observer import summary as observer_summary

    rng = random.Random(1)
    unobserved = [0.030 * (1 + rng.gauss(0, 0.05)) for _ in range(40)]
    costly = observer_summary(unobserved, [u * 1.10 for u in unobserved])
    assert costly["ratio"] == pytest.approx(1.10) and costly["flagged"] is True
    # one window of one turn stalled 40-fold (a pause of the machine): no cost of observing
    stalled = observer_summary([*unobserved[:-1], 40 * unobserved[-1]], unobserved)
    assert stalled["ratio"] == pytest.approx(1.0) and stalled["flagged"] is False
    assert costly["interval"][0] > 1.02 and costly["turns"] == 40
    # the same steps, observed or not: within noise, never flagged
    same = observer_summary(unobserved, [0.030 * (1 + rng.gauss(0, 0.05)) for _ in range(40)])
    assert same["interval"][0] < 1.0 < same["interval"][1] and same["flagged"] is False
    # 3% over, but too noisy to say: the interval reaches below the limit
    noisy = observer_summary(unobserved[:10], [u * rng.uniform(0.80, 1.26) for u in unobserved[:10]])
    assert noisy["flagged"] is False and noisy["interval"][0] <= 1.02
    assert observer_summary([], [0.1])["status"] == "skipped"
    # five turns cannot hold a median with 95%, however clear: a --quick run is never flagged
    assert observer_summary(unobserved[:5], [u * 1.5 for u in unobserved[:5]])["flagged"] is False
    assert observer_summary(unobserved[:6], [u * 1.5 for u in unobserved[:6]])["flagged"] is True


def test_the_profiler_cost_comes_from_side_by_side_windows() -> None:
    from bench.training.observer import profiler_cost

    untraced = [0.010, 0.011, 0.010, 0.012] * 5
    cost = profiler_cost(untraced, [1.5 * u for u in untraced])
    assert cost["overhead_ratio"] == pytest.approx(1.5) and cost["overhead_flagged"] is True
    assert cost["overhead_interval"][0] > 1.02
    assert profiler_cost([], [0.1]) is None


def test_a_turn_is_settling_then_both_windows_in_alternating_order() -> None:
    from bench.training.schedule import OBSERVED, SETTLE, TRACE_BASE, TRACED, UNOBSERVED, WARMUP

    schedule = Schedule(warmup_steps=4, window_steps=3, repeats=2, gate=Gate(None, 1.0),
                        settle_steps=2, trace_steps=5)
    plan = [(s.kind, s.steps, s.turn, s.gated) for s in schedule.segments]
    assert plan == [(WARMUP, 4, -1, False),
                    (SETTLE, 2, 0, True), (UNOBSERVED, 3, 0, False), (OBSERVED, 3, 0, False),
                    (SETTLE, 2, 1, True), (OBSERVED, 3, 1, False), (UNOBSERVED, 3, 1, False),
                    (SETTLE, 2, 2, True), (TRACE_BASE, 5, 2, False), (TRACED, 5, 2, False)]
    assert schedule.total_steps == 4 + 2 * 8 + 12 and schedule.timed_steps == 6
    no_settle = Schedule(warmup_steps=0, window_steps=2, repeats=1, gate=Gate(None, 1.0))
    assert [(s.kind, s.gated) for s in no_settle.segments] == [(UNOBSERVED, True),
                                                               (OBSERVED, False)]


def test_only_observed_steps_and_window_ends_are_synced() -> None:
    """The custom loop and tf-keras bring a result to the host at an observed step and at each
    window's end; fit's training thread waits at a turn's gate and before an observed step."""
    from bench.training.loop_clock import LoopClock

    schedule = Schedule(warmup_steps=1, window_steps=3, repeats=1, gate=Gate(None, 1.0),
                        settle_steps=1)  # steps: warmup 0, settle 1, unobserved 2-4, observed 5-7
    clock = LoopClock(schedule, lambda done, total: None)
    assert [s for s in range(8) if clock.sync_after(s)] == [0, 1, 4, 5, 6, 7]
    assert [s for s in range(8) if clock.wait_before(s)] == [0, 1, 5, 6, 7]


def test_a_loop_that_ends_before_its_plan_is_an_error_not_a_wait() -> None:
    """A loop whose input ran out (or a fit epoch planned short of a sized schedule) ended
    before the plan's last step: finish() says so at once, where waiting for the steps it
    never ran would hang the variant until its timeout."""
    from bench.training.loop_clock import LoopClock

    schedule = Schedule(warmup_steps=1, window_steps=3, repeats=1, gate=Gate(None, 1.0))
    clock = LoopClock(schedule, lambda done, total: None)
    for step in range(clock.total - 1):  # one step short
        clock.begin(step)
        clock.end(step)
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="ended after 6 of its 7 planned steps"):
        clock.finish()
    assert time.perf_counter() - started < 1.0


def test_settling_steps_and_the_gate_are_in_no_sample_and_no_window_clock() -> None:
    """A loop through LoopClock whose settling steps are slow (50 ms), held 30 ms at each gate as
    other variants' turns would: neither the samples nor the window clocks may hold either. Each
    clock is bounded by the loop's own stamps around it (from the gate's release or the end of
    the step before, to the end of its last step), which no load of the machine can move."""
    from bench.training.loop_clock import LoopClock
    from bench.training.schedule import SETTLE

    released: list[float] = []  # when each turn's gate let the loop go

    class IdleGate(Gate):
        def wait(self, segment: str, index: int = 0) -> None:
            time.sleep(0.03)
            released.append(time.perf_counter())

    schedule = Schedule(warmup_steps=1, window_steps=2, repeats=3, gate=IdleGate(None, 1.0),
                        settle_steps=1)
    clock = LoopClock(schedule, lambda done, total: None)
    before_end: dict[int, float] = {}  # just before the loop told the clock a step ended
    after_end: dict[int, float] = {}
    for step in range(clock.total):
        if clock.wait_before(step):
            clock.wait_for(step)
        clock.begin(step)
        settling = clock.steps[step][0].kind == SETTLE
        time.sleep(0.05 if settling else 0.002)
        if clock.sync_after(step):
            before_end[step] = time.perf_counter()
            clock.end(step)
            after_end[step] = time.perf_counter()
    clock.finish()
    result = clock.result([])
    assert len(released) == 3
    assert len(result.clocks["unobserved"]) == len(result.clocks["observed"]) == 3
    assert [len(w) for w in result.samples["observed"]] == [2, 2, 2]
    # the most each clock may hold: from the gate's release (a turn's first segment) or the end
    # of the step before it, to the end of its last step
    longest: dict[str, list[float]] = {}
    step_longest: list[float] = []  # each observed step's sample
    start = 0
    for segment in clock.schedule.segments:
        stop = start + segment.steps
        if segment.turn < 0:  # the warmup, before any gate
            start = stop
            continue
        opened = released[segment.turn] if segment.gated else before_end[start - 1]
        longest.setdefault(segment.kind, []).append(after_end[stop - 1] - opened)
        if segment.kind == "observed":
            step_longest += [after_end[s] - (opened if s == start else before_end[s - 1])
                             for s in range(start, stop)]
        start = stop
    for kind in ("unobserved", "observed"):
        for seconds, most in zip(result.clocks[kind], longest[kind], strict=True):
            assert 2 * 0.002 <= seconds <= most, (kind, seconds, most)
    samples = [s for w in result.samples["observed"] for s in w]
    assert all(0.002 <= s <= most for s, most in zip(samples, step_longest, strict=True))
    assert 3 * 0.05 <= result.settling_s <= sum(longest[SETTLE])
    assert result.order == [("unobserved", "observed"), ("observed", "unobserved"),
                            ("unobserved", "observed")]


def test_windows_are_sized_to_their_least_duration_in_whole_calls() -> None:
    from bench.training.schedule import MAX_SIZED_STEPS, MAX_WINDOW_GROWTH

    schedule = Schedule(warmup_steps=4, window_steps=8, repeats=2, gate=Gate(None, 1.0),
                        settle_steps=2, min_window_s=0.1, observed_steps=8)
    assert schedule.sized_for(0.002).window_steps == 50  # 0.1 s of 2 ms steps
    assert schedule.sized_for(0.002, steps_per_call=3).window_steps == 51  # whole calls of 3
    assert schedule.sized_for(0.05).window_steps == 8  # never shorter than planned
    assert schedule.sized_for(1e-6).window_steps == MAX_SIZED_STEPS == \
        schedule.longest().window_steps  # 8 steps may grow to 128
    assert schedule.sized_for(0.0) == schedule  # no estimate: as planned
    sized = schedule.sized_for(0.002)
    # the warmup and the settling keep their places; only the unobserved window grows
    assert [s.steps for s in sized.segments[:4]] == [4, 2, 50, 8]
    assert sized.sized_for(0.001).window_steps == 100  # sized again: from the planned steps
    assert sized.with_window_steps(4).window_steps == 8
    wide = Schedule(warmup_steps=0, window_steps=40, repeats=1, gate=Gate(None, 1.0),
                    min_window_s=1.0)
    assert wide.longest().window_steps == 40 * MAX_WINDOW_GROWTH  # more than MAX_SIZED_STEPS
    off = Schedule(warmup_steps=4, window_steps=8, repeats=2, gate=Gate(None, 1.0))
    assert off.sized_for(0.002) == off and off.longest() == off
    # observed windows planned as long as the unobserved grow with them, in `longest()` too:
    # a loop that plans its longest steps up front (a fit epoch) holds every sized schedule
    alike = Schedule(warmup_steps=4, window_steps=16, repeats=3, gate=Gate(None, 1.0),
                     min_window_s=0.1)
    grown_alike = alike.sized_for(0.001)
    assert (grown_alike.window_steps, grown_alike.observed_window_steps) == (100, 100)
    assert alike.longest().observed_window_steps == MAX_SIZED_STEPS
    assert grown_alike.total_steps < alike.sized_for(1e-6).total_steps == \
        alike.longest().total_steps


def test_a_loop_of_short_steps_runs_windows_of_the_least_duration() -> None:
    """A loop through LoopClock of 2 ms steps whose windows are planned at 4 steps and must last
    60 ms: from the step time before its first window it runs every turn's windows longer (about
    30 steps on a quiet machine; how many is timing, which a benchmark measures), both alike, and
    its result says so."""

    schedule = Schedule(warmup_steps=3, window_steps=4, repeats=3, gate=Gate(None, 1.0),
                        settle_steps=4, min_window_s=0.06)
    clock, step = run_clock(schedule, 0.002)
    result = clock.result([])
    assert result.schedule is not None
    sized = result.schedule.window_steps
    # lengthened (as long as the steps before took under 15 ms, 7.5 times their sleep); and no
    # step ran faster than its 2 ms sleep, so never beyond 60 ms of them
    assert 4 < sized <= 30 < schedule.longest().window_steps, sized
    assert clock.total == step == 3 + 3 * (4 + 2 * sized)
    windows = result.clocks["unobserved"] + result.clocks["observed"]
    assert len(windows) == 6 and min(windows) >= 0.002 * sized
    assert [len(w) for w in result.samples["observed"]] == [sized] * 3


def run_clock(schedule: Schedule, step_s: float) -> tuple[Any, int]:
    """A loop of `step_s` steps through LoopClock, as bench's loops drive it; the clock and the
    steps it ran."""
    from bench.training.loop_clock import LoopClock

    clock = LoopClock(schedule, lambda done, total: None)
    step = 0
    while step < clock.total:
        if clock.wait_before(step):
            clock.wait_for(step)
        clock.begin(step)
        time.sleep(step_s)
        if clock.sync_after(step):
            clock.end(step)
        step += 1
    clock.finish()
    return clock, step


def test_the_twins_run_windows_of_the_steps_the_first_of_them_chose(tmp_path: Path) -> None:
    """The A/A pair shares a sizing file: the loop that sizes first (2 ms steps, windows planned
    at 1 step and to last 20 ms) writes its windows' steps, and its twin, whose 20 ms steps alone
    keep the planned 1 (a sleep never ends early), runs windows of as many."""
    shared = tmp_path / "control-window-steps"
    schedule = Schedule(warmup_steps=3, window_steps=1, repeats=2, gate=Gate(None, 1.0),
                        settle_steps=2, min_window_s=0.02, sizing_file=str(shared))
    first, _ = run_clock(schedule, 0.002)
    chosen = first.schedule.window_steps
    # lengthened, as long as its steps before took under 10 ms (5 times their sleep)
    assert 1 < chosen <= schedule.longest().window_steps and shared.read_text() == f"2 {chosen}"
    twin, steps = run_clock(schedule, 0.02)
    assert twin.schedule.window_steps == chosen
    assert steps == 3 + 2 * (2 + 2 * chosen)
    alone, _ = run_clock(replace(schedule, sizing_file=None), 0.02)
    assert alone.schedule.window_steps == 1  # what the twin would have run alone


def test_headline_is_examples_over_the_window_clocks() -> None:
    windows = [[0.01] * 10, [0.02] * 10]
    thr = throughput(windows, global_batch=64, window_s=[0.11, 0.21])
    assert thr.headline == pytest.approx(64 * 20 / 0.32)
    assert thr.per_repeat == pytest.approx([640 / 0.11, 640 / 0.21])
    assert thr.mean_rate == pytest.approx(64 * 20 / 0.30)
    assert thr.median == pytest.approx(64 / 0.015)
    with pytest.raises(ValueError):
        throughput(windows, 64, window_s=[0.1])


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


def test_twins_whose_interval_misses_zero_widen_the_floor_to_its_far_end() -> None:
    """Identical code whose interval misses zero: the line says so, with the two reasons it can
    (chance, a speed a process keeps), and what the floor then counts as noise (its widest
    bound)."""
    floor = noise_floor(control_records([100.0, 102.0, 98.0, 100.0, 101.0, 99.0],
                                        [88.0, 90.0, 86.0, 88.0, 89.0, 87.0]))
    assert floor is not None and floor["interval_pct"][1] < 0
    line = describe(floor)
    assert line.endswith("; the same code, yet the interval misses zero (by chance in 1 run of "
                         "20, more often where a process keeps a speed of its own), so ratios "
                         "within ±12.3% count as noise")
    assert within_noise(1.122, floor) and not within_noise(1.125, floor)
    mixed = noise_floor(control_records([100.0, 100.0, 100.0, 100.0, 100.0, 100.0],
                                        [104.0, 103.0, 96.0, 97.0, 105.0, 95.0]))
    assert mixed is not None and mixed["interval_pct"][0] < 0 < mixed["interval_pct"][1]
    assert "misses zero" not in describe(mixed)


def test_noise_floor_takes_batches_of_consecutive_rounds() -> None:
    """Drift that lasts a few rounds is not independent noise: the same per-round ratios in a
    drifting order must give a wider interval than shuffled."""
    from bench.timing import block_length

    assert block_length(120) == 5 and block_length(12) == 2 and block_length(1) == 1
    ratios = [1.0 + 0.04 * math.sin(2 * math.pi * k / 12) for k in range(120)]  # a 12-round drift
    shuffled = ratios[:]
    random.Random(0).shuffle(shuffled)
    def width(twin_over_base: list[float]) -> float:
        lo, hi = noise_floor(control_records([100.0] * 120,
                                             [100.0 * r for r in twin_over_base]))["interval_pct"]
        return hi - lo
    assert width(ratios) > 1.5 * width(shuffled)


def test_the_noise_floor_interval_is_students_t_over_batches_of_rounds() -> None:
    """Twelve rounds in six batches of two: the interval is the headlines' log ratio ± t(5) times
    the batch means' standard error, as scipy.stats computes it."""
    import numpy as np
    from scipy import stats

    base = [100.0, 102.0, 98.0, 100.0, 101.0, 99.0, 103.0, 97.0, 100.0, 100.0, 102.0, 98.0]
    twin = [101.0, 100.0, 99.0, 104.0, 100.0, 98.0, 105.0, 99.0, 101.0, 97.0, 103.0, 100.0]
    floor = noise_floor(control_records(base, twin))
    assert floor is not None and floor["rounds"] == 12
    logs = np.log(np.array(twin) / np.array(base)).reshape(6, 2).mean(axis=1)
    half = stats.t.ppf(0.975, 5) * stats.sem(logs)
    centre = math.log((12 / sum(1 / r for r in twin)) / (12 / sum(1 / r for r in base)))
    assert floor["interval_pct"] == pytest.approx(
        [100 * (math.exp(centre - half) - 1), 100 * (math.exp(centre + half) - 1)], rel=1e-9)
    assert noise_floor(control_records(base[:1], twin[:1]))["interval_pct"] is None


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


def start_interleaved(context: EarlyContext) -> BenchRun:
    tmp = context.tmp_path_factory.mktemp("interleaved")
    # an empty peak cache: the first variants to finish measure the matmul peak
    return bench_run(write_scenario(tmp, SCENARIO, name="rounds"), tmp / "results",
                     env={"BENCH_CACHE_DIR": str(tmp / "cache")})


def start_sequential(context: EarlyContext) -> BenchRun:
    tmp = context.tmp_path_factory.mktemp("sequential")
    return bench_run(write_scenario(tmp, SCENARIO, name="rounds"), tmp / "results",
                     "--no-interleave", "--no-control")


interleaved = early_fixture("rounds_interleaved", start_interleaved)
sequential = early_fixture("rounds_sequential", start_sequential)


def windows_of(record: dict[str, Any]) -> list[tuple[float, float]]:
    measurement = record["measurement"]
    return [(start, start + seconds) for start, seconds in
            zip(measurement["window_started_at"], measurement["window_s"], strict=True)]


@pytest.mark.slow
class TestInterleavedRun:
    def test_settling_steps_run_but_are_not_timed(self, interleaved: BenchRun) -> None:
        for rec in interleaved.records:
            # at least 2 settling steps a turn, as many as the first turn's 0.1 s held (settle_s)
            settle = rec["measurement"]["settle_steps"]
            assert settle >= 2, rec["variant_id"]
            windows = rec["samples"]["timed"]  # the observed windows' steps
            window = rec["measurement"]["window_steps"]  # 12, or more to last min_window_s
            assert window >= 12 and rec["measurement"]["observed_window_steps"] == 12
            assert [len(w) for w in windows] == [12] * 4  # all timed steps, none settling
            assert len(rec["measurement"]["window_s"]) == 4  # the unobserved windows
            assert len(rec["measurement"]["observed_window_s"]) == 4
            # the settling steps, each at least a fast step's time, the first turn's lasting
            # 0.1 s, and no gate wait (the other variants' windows) among them; the control
            # twin settles as many steps as its baseline did (the pair's sizing file), however
            # long they take it
            settling_s = rec["measurement"]["settling_s"]
            fastest, slowest = min(min(w) for w in windows), max(map(max, windows))
            sized_by_its_time = rec["variant"]["control"] != "twin"
            least = max(0.1 if sized_by_its_time else 0.0, 4 * settle * fastest)
            assert least <= settling_s <= 4 * settle * 3 * slowest, rec["variant_id"]
            if settle > 2 and sized_by_its_time:  # the first turn settled 0.1 s, not a step more
                assert settle * fastest < 0.1 + 3 * slowest, rec["variant_id"]

    def test_every_variant_and_the_control_twin_is_ok(self, interleaved: BenchRun) -> None:
        assert interleaved.proc.returncode == 0, interleaved.proc.stdout + interleaved.proc.stderr
        ids = [r["variant_id"] for r in interleaved.records]
        assert ids[:3] == ["default-r1-fit-float32-gb16", "default-r1-fit-float32-gb16-control",
                           "yardstick"]
        assert len(ids) == 6 and all(r["status"] == "ok" for r in interleaved.records)
        roles = {r["variant_id"]: r["variant"]["control"] for r in interleaved.records}
        assert [roles[i] for i in ids[:3]] == ["baseline", "twin", "yardstick"]
        assert sum(role is not None for role in roles.values()) == 3
        # the A/A pair runs windows of one length, chosen by the first of them to size them
        pair = [(r["measurement"]["settle_steps"], r["measurement"]["window_steps"])
                for r in interleaved.records[:2]]
        shared = interleaved.run_dir / "logs" / "control-window-steps"
        assert pair == [tuple(int(n) for n in shared.read_text().split())] * 2

    def test_no_two_variants_windows_overlap(self, interleaved: BenchRun) -> None:
        spans = sorted((start, end, r["variant_id"]) for r in interleaved.records
                       for start, end in windows_of(r))
        assert len(spans) == 6 * 4
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            assert end <= start + 1e-3, f"{first} and {second} ran at once"

    def test_the_peak_is_measured_while_its_variant_holds_the_machine(self, interleaved: BenchRun
                                                                        ) -> None:
        spans = {r["variant_id"]: r["utilization"]["peak_measured_here"]
                 for r in interleaved.records if r["utilization"]["peak_measured_here"]}
        assert len(spans) == 3, spans  # one key (float32 on this CPU), settled by 3 measurements
        for vid, (start, end) in spans.items():
            others_later = []
            for rec in interleaved.records:
                windows = windows_of(rec)
                if rec["variant_id"] == vid:  # after its own windows
                    assert start >= max(w_end for _, w_end in windows)
                    assert rec["timing"]["phases"]["peak"] >= end - start
                    continue
                for w_start, w_end in windows:
                    assert w_end <= start or w_start >= end, (vid, rec["variant_id"])
                others_later += [w_start for w_start, _ in windows if w_start >= end]
            # in its last turn, while the others wait at their gates; not in the finish, which
            # comes after every window of the run and beside another variant's finish: the
            # first three of the last round measure, and the other three play after them
            assert others_later, vid
        peaks = [r["utilization"]["peak"] for r in interleaved.records]
        assert max(len(p["samples"]) for p in peaks) == 3  # read after the third measurement
        assert all(p["model"] == p["key"].split("|")[0] for p in peaks)

    def test_rounds_are_shuffled_and_every_variant_took_part_in_each(self, interleaved: BenchRun
                                                                      ) -> None:
        records = interleaved.records
        rounds = {r["interleave"]["rounds"] for r in records}
        assert rounds == {4}  # 4 turns
        orders = [tuple(sorted(records, key=lambda r: r["interleave"]["positions"][k]))
                  for k in range(4)]
        assert len({tuple(r["variant_id"] for r in order) for order in orders}) > 1
        for k in range(4):
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

    def test_the_headline_counts_the_unobserved_windows(self, interleaved: BenchRun) -> None:
        for rec in interleaved.records:
            thr, measurement = rec["throughput"], rec["measurement"]
            unobserved, observed = measurement["window_s"], measurement["observed_window_s"]
            assert thr["headline"] == pytest.approx(
                rec["effective"]["global_batch"] * 4 * measurement["window_steps"]
                / sum(unobserved), rel=1e-9)
            # an observed window's clock holds its every step
            laps = [sum(w) for w in rec["samples"]["timed"]]
            assert all(clock >= lap * 0.999 for clock, lap in zip(observed, laps, strict=True))
            assert measurement["order"] == [["unobserved", "observed"], ["observed",
                                            "unobserved"]] * 2
            assert measurement["interleaved"] is True and measurement["gate_wait_s"] > 0

    def test_observer_effect_is_measured_in_the_same_turns(self, interleaved: BenchRun) -> None:
        for rec in interleaved.records:
            observer = rec["observer"]
            measurement = rec["measurement"]
            assert observer["status"] == "ok" and observer["turns"] == 4, observer
            # per step: the observed windows' 12 steps against the unobserved windows' steps
            steps = measurement["window_steps"], measurement["observed_window_steps"]
            assert observer["ratio"] == pytest.approx(statistics.median(
                (o / steps[1]) / (u / steps[0]) for o, u in zip(
                    measurement["observed_window_s"], measurement["window_s"], strict=True)))
            low, high = observer["interval"]
            assert low <= observer["ratio"] <= high and 0.3 < observer["ratio"] < 3.0
            assert observer["flagged"] is False  # four turns cannot hold a median with 95%
            assert set(measurement["gate_wait_by_segment"]) <= {"window", "trace", "finish"}

    def test_noise_floor_line_and_within_noise_marks(self, interleaved: BenchRun) -> None:
        out = interleaved.proc.stdout
        floor = noise_floor(load_all(interleaved.records))
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
    # the fork server's start-up is the run's, not the first variant's (it imports TensorFlow)
    assert sequential.run_dir is not None
    ready_s = json.loads((sequential.run_dir / "timing.json").read_text())["forkserver_ready_s"]
    assert ready_s > 1.0
    assert all(r["timing"]["phases"]["start"] < ready_s / 2 for r in records), [
        r["timing"]["phases"]["start"] for r in records]


def test_cli_help_names_the_interleave_and_control_switches() -> None:
    from tests.conftest import bench

    out = bench("run", "--help").stdout
    assert "--no-interleave" in out and "--no-control" in out


def test_the_first_turn_settles_for_settle_s_and_every_turn_as_many_steps(tmp_path: Path) -> None:
    """Settling sized by time: a loop of 2 ms steps whose turns settle at least 2 steps and
    0.03 s settles its first turn, each step synced, until 0.03 s have passed (at most 15 such
    steps: sleeps never end early), then every turn settles as many; the observed window keeps
    its planned steps while the unobserved one grows to its least duration. Its twin, whose
    6 ms steps alone would settle 5, settles as many steps as it."""
    from bench.training.schedule import SETTLE

    shared = tmp_path / "control-window-steps"
    schedule = Schedule(warmup_steps=3, window_steps=3, repeats=3, gate=Gate(None, 1.0),
                        settle_steps=2, settle_s=0.03, min_window_s=0.02, observed_steps=3,
                        sizing_file=str(shared))
    clock, steps = run_clock(schedule, 0.002)
    result = clock.result([])
    sized = result.schedule
    assert sized is not None and 2 < sized.settle_steps <= 15, sized.settle_steps
    settles = [s.steps for s in sized.segments if s.kind == SETTLE]
    assert settles == [sized.settle_steps] * 3
    assert sized.observed_window_steps == 3 < sized.window_steps
    assert steps == 3 + 3 * (sized.settle_steps + sized.window_steps + 3)
    assert result.settling_s >= 0.03 + 2 * 0.002 * sized.settle_steps
    assert [len(w) for w in result.samples["observed"]] == [3, 3, 3]
    assert shared.read_text() == f"{sized.settle_steps} {sized.window_steps}"
    twin, _ = run_clock(schedule, 0.006)
    assert twin.schedule.settle_steps == sized.settle_steps
    assert twin.schedule.window_steps == sized.window_steps
    alone, _ = run_clock(replace(schedule, sizing_file=None), 0.006)
    assert alone.schedule.settle_steps <= 5  # what the twin would have settled alone


def test_the_first_turns_settling_steps_are_synced_while_it_sizes_itself() -> None:
    """While the first turn's settling sizes itself, each of its steps completes before the
    next (its clock must see completions, also where a call returns before its step is done);
    later turns' settling is not synced but at its end."""
    from bench.training.loop_clock import LoopClock

    schedule = Schedule(warmup_steps=1, window_steps=2, repeats=2, gate=Gate(None, 1.0),
                        settle_steps=1, settle_s=10.0, observed_steps=2)
    clock = LoopClock(schedule, lambda done, total: None)
    longest = clock.schedule.settle_steps
    assert longest == 128  # planned at the most it may take until it has settled
    first_settle = range(1, 1 + longest)
    assert all(clock.sync_after(s) and clock.wait_before(s) for s in first_settle)
