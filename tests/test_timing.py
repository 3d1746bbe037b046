"""Step timer and statistics against independent computations (numpy, hand-made clocks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.timing import (
    StepTimer,
    iterator_speeds,
    iterators_differ,
    steady_state_start,
    summarize,
    throughput,
    turn_iterator,
)


def fake_clock(times: list[float]):
    it = iter(times)
    return lambda: next(it)


def test_timer_records_completion_to_completion_durations() -> None:
    timer = StepTimer(clock=fake_clock([10.0, 10.5, 10.7, 11.0]))
    timer.start()
    assert [timer.lap(), timer.lap(), timer.lap()] == pytest.approx([0.5, 0.2, 0.3])
    assert timer.steps == 3


def test_timer_divides_blocks_by_steps_per_execution() -> None:
    timer = StepTimer(clock=fake_clock([0.0, 4.0, 6.0]))
    timer.start()
    timer.lap(steps=4)
    timer.lap(steps=4)
    assert timer.samples == pytest.approx([1.0, 0.5])
    assert timer.steps == 8


def test_lap_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        StepTimer().lap()


def test_summary_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    samples = list(rng.lognormal(-5, 0.3, size=257))
    stats = summarize(samples)
    arr = np.array(samples)
    assert stats.n == 257
    assert stats.mean == pytest.approx(arr.mean())
    assert stats.median == pytest.approx(np.median(arr))
    assert stats.stdev == pytest.approx(arr.std(ddof=1))
    assert stats.stderr == pytest.approx(arr.std(ddof=1) / np.sqrt(257))
    assert stats.mad == pytest.approx(np.median(np.abs(arr - np.median(arr))))
    assert stats.p5 == pytest.approx(np.percentile(arr, 5))
    assert stats.p95 == pytest.approx(np.percentile(arr, 95))
    assert (stats.min, stats.max) == (arr.min(), arr.max())


def test_robust_spread_ignores_a_single_outlier() -> None:
    steady = [0.010, 0.011, 0.009, 0.010, 0.0105, 0.0095] * 5
    with_outlier = steady + [5.0]
    assert summarize(with_outlier).robust_cv == pytest.approx(summarize(steady).robust_cv, rel=0.2)
    assert summarize(with_outlier).stdev > 100 * summarize(steady).stdev


def _windows(rng: np.random.Generator, speeds: list[float], steps: int = 16,
             sd: float = 0.15) -> list[list[float]]:
    """Windows of `steps` steps, one per round: each at its round's speed times its own noise (a
    window's steps share the machine's speed of the moment, as measured here)."""
    return [[0.01 * speed * float(rng.lognormal(0.0, sd))] * steps for speed in speeds]


def test_steady_state_finds_leading_windows_that_ran_slow() -> None:
    rng = np.random.default_rng(0)
    assert steady_state_start([[0.01] * 16] * 12) == 0
    assert steady_state_start(_windows(rng, [2.0] * 3 + [1.0] * 21, sd=0.1)) == 3 * 16
    assert steady_state_start([[0.01] * 16] * 3) == 0  # too few windows to judge


def test_steady_state_is_a_test_not_a_guess() -> None:
    """Windows that only scatter, or a slow spell in mid-run, are no warm-up; a slow start that
    the machine's speed in the same rounds explains is none either."""
    rng = np.random.default_rng(1)
    flagged = sum(bool(steady_state_start(_windows(rng, [1.0] * 12, sd=0.2)))
                  for _ in range(200))
    assert flagged <= 6  # the test's level is 1%
    assert steady_state_start(_windows(rng, [1.0] * 4 + [1.8] * 3 + [1.0] * 5)) == 0
    machine = [2.0] * 3 + [1.0] * 21  # the machine ran slow in the first three rounds
    drifted = _windows(rng, machine, sd=0.1)
    assert steady_state_start(drifted) == 3 * 16
    assert steady_state_start(drifted, [math.log(m) for m in machine]) == 0


def test_throughput_uses_the_global_batch() -> None:
    repeats = [[0.01] * 10, [0.02] * 10]
    thr = throughput(repeats, global_batch=128)
    assert thr.per_repeat == pytest.approx([12800.0, 6400.0])
    assert thr.mean_rate == pytest.approx(128 * 20 / 0.3)
    assert thr.median == pytest.approx(128 / 0.015)
    assert repeats == [[0.01] * 10, [0.02] * 10]  # inputs untouched


def test_throughput_counts_every_step_of_a_block() -> None:
    # 5 samples per window, each the per-step time of a block of 4 steps: 20 steps a window
    thr = throughput([[0.01] * 5, [0.01] * 5], global_batch=32, window_s=[0.2, 0.2],
                     steps_per_sample=4)
    assert thr.headline == pytest.approx(32 * 40 / 0.4)
    assert thr.headline == pytest.approx(thr.median)  # the window clock agrees with the samples
    assert throughput([[0.01] * 5], 32, steps_per_sample=4).headline == pytest.approx(3200.0)




def test_two_speeds_need_iterators_that_differ_beyond_their_windows_spread() -> None:
    """Four iterators of three windows each on windows that move by ±20%: a fixed split of the
    rates named about one variant in five; with the permutation test, a few in a hundred. One
    iterator at half speed is still named."""
    rng = np.random.default_rng(0)
    turns = [turn_iterator(t, 4, 12) for t in range(12)]
    noise = sum(iterator_speeds(list(rng.lognormal(0.0, 0.2, 12)), turns, 1000)["bimodal"]
                for _ in range(400))
    assert noise <= 28  # 3.8% of 1,000 measured; the split alone: 22.6%
    slow = list(rng.lognormal(0.0, 0.05, 12))
    slow[6:9] = [2 * s for s in slow[6:9]]
    speeds = iterator_speeds(slow, turns, 1000)
    assert speeds["bimodal"] and [m["iterators"] for m in speeds["modes"]] == [3, 1]
    assert not iterators_differ([[1.0, 1.1, 0.9]] * 4)


def test_the_permutation_test_stops_early_with_the_answer_of_all_its_shuffles() -> None:
    """The test draws its shuffles in batches and stops once too many reached the observed
    statistic; its answer is p < alpha for p over all of them (counted here in one draw), right
    at the boundary too."""
    from bench.timing import _order_explains

    def mean_of_first_third(x: np.ndarray) -> np.ndarray:
        return x[..., : x.shape[-1] // 3].mean(axis=-1)

    rng = np.random.default_rng(3)
    for trial in range(40):
        values = rng.normal(0.0, 1.0, 12) + np.r_[np.full(4, 0.25 * (trial % 5)), np.zeros(8)]
        shuffled = np.random.default_rng(0).permuted(np.tile(values, (2000, 1)), axis=1)
        reached = np.count_nonzero(mean_of_first_third(shuffled)
                                   >= mean_of_first_third(values))
        p = (1 + reached) / 2001
        for alpha in (0.01, 0.05, p, np.nextafter(p, 1.0)):
            assert _order_explains(mean_of_first_third, values, alpha, 2000, 0) == (p < alpha)


def test_the_interval_of_a_median_is_scipys_order_statistics() -> None:
    """The k-th smallest and largest values that hold the median with the confidence asked, as
    scipy.stats.quantile_test computes them; with too few values, the extremes, and
    `median_interval_holds` says they do not reach it."""
    import warnings

    from scipy import stats

    from bench.timing import median_interval, median_interval_holds

    rng = np.random.default_rng(2)
    for n in range(6, 60):
        values = rng.normal(size=n)
        for confidence in (0.9, 0.95, 0.99):
            if not median_interval_holds(n, confidence):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = stats.quantile_test(values, q=float(np.median(values)),
                                               p=0.5).confidence_interval(confidence)
            assert median_interval(values, confidence) == (expected.low, expected.high)
    assert [median_interval_holds(n) for n in (1, 5, 6)] == [False, False, True]
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)
