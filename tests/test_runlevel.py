"""The nightly gate's run-level test (bench.compare.runlevel): one figure per run, the candidate's
runs against the store's, judged against the yardstick."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from bench.compare import runlevel
from bench.compare.detector import compare_records
from bench.compare.simulation import interleaved_run, runlevel_rates
from bench.record.model import VariantRecord


def test_a_runs_figure_ignores_a_burst_in_one_window() -> None:
    record = {"status": "ok", "samples": {"timed": [[1.0, 1.0, 1.0]] * 5 + [[3.0, 3.0, 3.0]]}}
    assert runlevel.run_figure(VariantRecord.load(record)) == pytest.approx(0.0)
    assert runlevel.run_figure(VariantRecord.load({"status": "failed"})) is None


def test_the_pooled_test_needs_the_effect_and_the_evidence() -> None:
    stored = [math.log(x) for x in (1.00, 1.03, 0.98, 1.01, 0.99, 1.02, 0.97)]
    slower = [f + math.log(1.10) for f in (0.01, -0.01, 0.0)]
    test = runlevel.run_test(stored, slower)
    assert test is not None and test.df == 8 and math.exp(test.shift) == pytest.approx(1.10, rel=0.01)
    assert test.status(0.05, runlevel.DECIDE) == "regression"
    assert test.status(0.15, runlevel.DECIDE) == "unchanged"  # real, but below the minimum effect
    faster = runlevel.run_test(stored, [-f for f in slower])
    assert faster is not None and faster.status(0.05, runlevel.DECIDE) == "improvement"
    same = runlevel.run_test(stored, [0.0, 0.01, -0.02])
    assert same is not None and same.status(0.05, runlevel.DECIDE) == "unchanged"
    # one candidate run against a noisy store is only a suspect, not a regression
    noisy = [math.log(x) for x in (1.0, 1.04, 0.96, 1.02, 0.98)]
    once = runlevel.run_test(noisy, [math.log(1.10)])
    assert once is not None and once.status(0.05, runlevel.SUSPECT) == "regression"
    assert once.status(0.05, runlevel.DECIDE) == "unchanged"
    assert runlevel.run_test(stored[:2], slower) is None  # too few stored runs for a spread


def test_a_quiet_store_does_not_make_a_tiny_shift_significant() -> None:
    stored = [0.0] * 8  # identical runs: the spread is floored, not zero
    test = runlevel.run_test(stored, [math.log(1.02)])
    assert test is not None and test.sd == runlevel.SD_FLOOR
    assert test.status(0.01, runlevel.DECIDE) == "unchanged"


def test_a_variant_that_follows_the_yardstick_by_half_is_judged_by_what_it_follows() -> None:
    """Two replicas beside the one-threaded yardstick: a fast spell of the yardstick reads as a
    slowdown in yardstick steps, not once the figure's slope on the yardstick is taken out."""
    rng = np.random.default_rng(0)
    stick = rng.normal(0.0, 0.05, 10)  # the yardstick's run figures, log seconds

    def in_steps(y: float, noise: float) -> tuple[float, float]:
        return 0.5 * y + noise - y, y  # the variant's seconds follow half the yardstick's

    stored = [in_steps(y, e) for y, e in zip(stick, rng.normal(0.0, 0.005, 10), strict=True)]
    fast = [in_steps(y, e) for y, e in ((-0.10, 0.003), (-0.09, -0.002), (-0.11, 0.0))]
    divided = runlevel.run_test([f for f, _ in stored], [f for f, _ in fast])
    assert divided is not None and divided.status(0.05, runlevel.DECIDE) == "regression"
    test = runlevel.covariate_test(stored, fast)
    assert test is not None and test.slope == pytest.approx(-0.5, abs=0.1)
    assert test.df == 10 and abs(test.shift) < 0.01
    design = np.column_stack([np.ones(13), np.r_[np.zeros(10), np.ones(3)],
                              [y for _, y in stored + fast]])
    assert test.unit == pytest.approx(math.sqrt(np.linalg.inv(design.T @ design)[1, 1]))
    assert test.status(0.05, runlevel.DECIDE) == "unchanged"
    slower = [(f + math.log(1.10), y) for f, y in fast]  # the variant's own code slowed by 10%
    caught = runlevel.covariate_test(stored, slower)
    assert caught is not None and math.exp(caught.shift) == pytest.approx(1.10, rel=0.01)
    assert caught.status(0.05, runlevel.DECIDE) == "regression"
    assert runlevel.covariate_test(stored[:5], fast) is None  # too few runs to estimate a slope
    assert runlevel.covariate_test([(0.0, 0.0)] * 8, fast[:1]) is None  # a still yardstick


def test_re_runs_turn_a_suspect_into_a_verdict_in_yardstick_steps() -> None:
    rng = np.random.default_rng(3)
    history = [interleaved_run(rng, 24) for _ in range(7)]
    slow = interleaved_run(rng, 24, scale=1.3)
    first = compare_records(history[-1], slow, history=history, run_to_run=False)
    assert runlevel.suspects(first, history, slow) == ["v"]
    again = [interleaved_run(rng, 24, scale=1.3) for _ in range(2)]
    result = runlevel.decide(first, history, [slow, *again])
    (verdict,) = result.verdicts
    assert result.relative and result.confirmations == 2 and result.regressed
    assert verdict.status == "regression" and verdict.ratio == pytest.approx(1.3, rel=0.08)
    assert verdict.history_runs == 7 and "3 candidate run(s) vs 7 stored" in verdict.note
    assert "following the yardstick by" in verdict.note  # 7 stored runs: the covariate's
    assert verdict.ci_low > 1.05  # in yardstick steps the machine's drift cancels

    same = interleaved_run(rng, 24)
    first = compare_records(history[-1], same, history=history, run_to_run=False)
    assert not runlevel.decide(first, history, [same]).regressed


def test_a_night_at_a_speed_no_stored_run_had_says_its_verdicts_extrapolate() -> None:
    rng = np.random.default_rng(6)
    history = [interleaved_run(rng, 24) for _ in range(10)]
    for speed, moved in ((1.0, False), (1.3, True), (0.75, True)):
        night = interleaved_run(rng, 24, machine_speed=speed)
        first = compare_records(history[-1], night, history=history, run_to_run=False)
        result = runlevel.decide(first, history, [night])
        assert (result.caveat is not None) == moved, (speed, result.caveat)
        if moved:
            took = float(re.search(r"steps took ×([0-9.]+)", result.caveat).group(1))
            assert took == pytest.approx(1 / speed, rel=0.1)
            assert "these verdicts extrapolate" in result.caveat
            assert result.to_dict()["caveat"] == result.caveat


def test_with_few_stored_runs_the_verdict_is_left_to_the_within_run_rule() -> None:
    rng = np.random.default_rng(4)
    history = [interleaved_run(rng, 6) for _ in range(2)]
    cand = interleaved_run(rng, 6, scale=2.0)
    first = compare_records(history[-1], cand, history=history, run_to_run=False)
    assert not runlevel.usable(history)
    assert runlevel.decide(first, history, [cand]).verdicts[0].note == first.verdicts[0].note


def test_the_gate_catches_a_10pct_slowdown_without_false_alarms_in_simulation() -> None:
    """The simulated machine of bench.compare.simulation.interleaved_run (calibrated on nightly
    stores here), 24 rounds per run as `bench nightly` runs the default scenario."""
    rates = runlevel_rates(trials=150, shift=0.10, seed=5)  # detection 0.57 over 300 trials
    assert rates["aa"] <= 1 / 60
    assert rates["detect"] >= 0.5
