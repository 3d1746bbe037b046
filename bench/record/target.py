"""The record's `target` section: what training each seed to the `[target]` took, and the
figures across seeds (shared by the worker that writes it and the readers; no TensorFlow).

Examples to target are a property of the algorithm (model, batch, learning rate, seed), the same
on any machine; seconds to target are this machine's. Their ratio with the variant's measured
headline examples/s gives the projected time, set beside the measured one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal

from bench.record.section import Number, Section, field

SeedStatus = Literal["reached", "not_reached", "diverged"]
# MLPerf Training drops the fastest and the slowest run where it has at least this many.
DROP_EXTREMES_FROM = 5


class CurvePoint(Section):
    """One evaluation: where training was and what the metric read."""

    examples: int | None = field("training examples seen before this evaluation")
    seconds: Number | None = field("seconds of training so far, evaluation apart")
    value: Number | None = field("the metric on the held-out split (null: not a number)")


class TargetSeed(Section):
    """One seed's training to the target."""

    seed: int | None = field("the seed (initial weights and shuffle)")
    status: SeedStatus | None = field("`reached`, `not_reached` (the budget ran out first) or "
                                      "`diverged` (the loss became NaN or infinite)")
    examples: int | None = field("training examples seen when the target was reached")
    epochs: Number | None = field("epochs of the training split when it was reached")
    seconds: Number | None = field("seconds of training to the target, evaluation apart (the "
                                   "first step, which compiles, included)")
    first_step_s: Number | None = field("the first step's seconds (tracing and compiling)")
    pipeline_s: Number | None = field(
        "seconds making the training pipeline before the training clock, a cached pipeline's "
        "first pass read into its cache (in no other figure but `wall_s`)")
    eval_s: Number | None = field("seconds spent evaluating, apart from training")
    wall_s: Number | None = field("the seed's whole wall time: building the model, training, "
                                  "evaluating and ending its input pipeline")
    best: Number | None = field("the best value the metric reached")
    stopped_by: str | None = field("what ended a seed that did not reach the target: "
                                   "`max_examples`, `max_seconds`, `diverged`")
    curve: list[CurvePoint] | None = field("every evaluation, in order")


class Spread(Section):
    """A figure across seeds: the median and the range of the seeds it counts."""

    median: Number | None = field("the median over the seeds that reached the target")
    low: Number | None = field("the smallest of those seeds (after any dropped)")
    high: Number | None = field("the largest of those seeds (after any dropped)")
    seeds: int | None = field("how many seeds it counts")
    dropped: int | None = field("the fastest and slowest dropped (MLPerf's rule: at least "
                                f"{DROP_EXTREMES_FROM} seeds)")


class Target(Section):
    """`[target]`: each seed trained to the target, and the figures across seeds."""

    status: Literal["ok", "skipped", "failed"] | None = field(
        "`ok` (trained; some seeds may not have reached it), `skipped` or `failed`")
    reason: str | None = field("why it was skipped or failed, in one line")
    metric: str | None = field("the metric judged")
    value: Number | None = field("the target value")
    direction: str | None = field("`above` or `below`: how the target is reached")
    eval_split: str | None = field("the held-out split")
    eval_source: str | None = field("the held-out data actually read")
    every_examples: int | None = field("the evaluation interval in examples seen")
    budget_examples: int | None = field("the budget in examples seen")
    max_seconds: Number | None = field("the budget in seconds of training")
    global_batch: int | None = field("the global batch it trained at")
    learning_rate: Number | None = field("the learning rate after the batch rule")
    warmup_examples: int | None = field("examples over which the learning rate ramped up")
    train_examples: int | None = field("examples in the training split (an epoch)")
    seeds: list[TargetSeed] | None = field("each seed's training")
    reached: int | None = field("how many seeds reached the target")
    examples: Spread | None = field("examples to target across seeds")
    epochs: Spread | None = field("epochs to target across seeds")
    seconds: Spread | None = field("measured seconds of training to target across seeds")
    headline: Number | None = field("the variant's measured headline examples/s")
    projected_s: Number | None = field("median examples to target ÷ headline examples/s")
    measured_steady_s: Number | None = field(
        "the median measured seconds to target less the first step's (which the headline "
        "leaves out)")
    agreement: Number | None = field("measured_steady_s ÷ projected_s (1: they agree)")

    @property
    def examples_to_target(self) -> float | None:
        return None if self.examples is None else self.examples.median

    @property
    def time_to_target(self) -> float | None:
        """The measured median seconds to target."""
        return None if self.seconds is None else self.seconds.median


def spread(values: Sequence[float], seeds: int) -> Spread:
    """The median and range of `values` (the seeds that reached the target, of `seeds` run),
    the fastest and slowest dropped first where there are at least 5 seeds. No median when
    fewer than half the seeds reached the target: a median of the lucky ones would flatter."""
    ordered = sorted(values)
    dropped = 0
    if len(ordered) >= DROP_EXTREMES_FROM:
        ordered, dropped = ordered[1:-1], 2
    if not ordered or 2 * len(values) < seeds:
        return Spread(median=None, low=min(values, default=None), high=max(values, default=None),
                      seeds=len(values), dropped=dropped)
    return Spread(median=statistics.median(ordered), low=ordered[0], high=ordered[-1],
                  seeds=len(ordered), dropped=dropped)
