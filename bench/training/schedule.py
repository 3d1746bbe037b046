"""A training loop's plan, shared by every path (its bookkeeping: bench.training.loop_clock).

The plan: warmup, then `repeats` turns, then the traced turn. The gate stands before every turn
(the runner interleaves the turns of all live variants in rounds). A turn is untimed settling
steps (a variant idle at the gate runs its first steps cold), then two windows, in an order that
alternates from turn to turn:

- the **unobserved** window, timed as the anchors time a block of steps: no host sync inside it,
  its clock running from the completion of the step before it to the completion of its last
  step (the headline);
- the **observed** window, whose every step waits for its result on the host before the next
  one starts: the per-step samples (the typical step, the spread), and, held against the
  unobserved window of the same turn, what observing each step costs.

How long a released variant stays cold is a matter of time, not of steps: on a 2-core VM, after
a pause of 0.05 s or more, steps of 2 ms ran 10-20% slow for their first 25 steps and a few
percent slow for 100 more (docs/measuring/measurements.md#settling). So the settling lasts at
least `settle_s`: the first turn settles, each step synced, until that long has passed since its
release (and at least `settle_steps`), and every later turn settles as many steps. The
unobserved window lasts at least `min_window_s`: before the first turn's first window the loop
lengthens every turn's unobserved window to that time at its step time so far. Either grows to at
most `max(MAX_SIZED_STEPS, MAX_WINDOW_GROWTH x planned)` steps, which bounds what a loop must
plan for up front (a `fit` epoch, in-memory arrays). The observed window keeps `observed_steps`:
it gives the per-step samples, and where it sits in the turn cancels against the unobserved one
over each pair of turns whatever their lengths (each window's mean place is the settling plus
half of both windows).

The traced turn is an observed window without the profiler, then the traced one (the profiler's
cost, from two windows side by side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from bench.scenario.schema import MAX_SIZED_STEPS, MAX_WINDOW_GROWTH, Variant
from bench.timing import round_up, turn_iterator
from bench.training.gate import Gate

UNOBSERVED, OBSERVED, SETTLE, WARMUP, TRACE_BASE, TRACED = (
    "unobserved", "observed", "settle", "warmup", "trace_base", "traced")
SAMPLED = (WARMUP, OBSERVED, TRACE_BASE, TRACED)  # segments whose every step is a sample


def grown(planned: int) -> int:
    """The most steps sizing may make of `planned` ones (a window, a turn's settling)."""
    return max(planned, MAX_SIZED_STEPS, MAX_WINDOW_GROWTH * planned)


@dataclass(frozen=True)
class Segment:
    kind: str
    steps: int
    turn: int  # the turn it belongs to (-1: warmup; repeats: the traced turn)
    gated: bool = False  # a gate stands before it (the first segment of a turn)


@dataclass(frozen=True)
class Schedule:
    """Where a loop's steps fall: warmup, `repeats` turns of settling steps and two windows,
    then the traced turn (when `trace_steps`)."""

    warmup_steps: int
    window_steps: int  # the unobserved window's (the headline's)
    repeats: int
    gate: Gate
    settle_steps: int = 0  # each turn's settling steps (the least, where `settle_s` sizes them)
    trace_steps: int = 0
    iterators: int = 1  # fresh input iterators, the turns spread evenly over them
    min_window_s: float = 0.0  # the unobserved window's least duration
    # A file the loop shares with its twin (the A/A pair of a run): the first of the two to size
    # its turns writes their settling and window steps there, and the other runs as many.
    sizing_file: str | None = None
    observed_steps: int | None = None  # the observed window's steps (None: as the unobserved's)
    settle_s: float = 0.0  # the settling's least duration, from the gate's release
    # The planned steps that sizing grows from, and may grow to a multiple of (None: as planned).
    planned_window_steps: int | None = None
    planned_settle_steps: int | None = None

    @property
    def observed_window_steps(self) -> int:
        return self.window_steps if self.observed_steps is None else self.observed_steps

    def sized_for(self, step_s: float, steps_per_call: int = 1) -> Schedule:
        """The schedule with unobserved windows that last at least `min_window_s` at `step_s` per
        step, in whole calls, never shorter than planned nor longer than `longest()`'s."""
        if not self.min_window_s or not step_s > 0:
            return self
        return self.with_window_steps(round_up(math.ceil(self.min_window_s / step_s),
                                               steps_per_call))

    def with_window_steps(self, wanted: int) -> Schedule:
        """The schedule with unobserved windows of `wanted` steps, never shorter than planned nor
        longer than `longest()`'s."""
        longest = self.longest().window_steps
        return replace(self, window_steps=min(longest, max(self.least_window, wanted)),
                       planned_window_steps=self.least_window)

    def with_settle_steps(self, wanted: int) -> Schedule:
        """The schedule with `wanted` settling steps a turn, never fewer than planned nor more
        than `longest()`'s."""
        longest = self.longest().settle_steps
        return replace(self, settle_steps=min(longest, max(self.least_settle, wanted)),
                       planned_settle_steps=self.least_settle)

    @property
    def least_window(self) -> int:
        """The unobserved window's planned steps, which sizing never goes below."""
        return self.window_steps if self.planned_window_steps is None else self.planned_window_steps

    @property
    def least_settle(self) -> int:
        """A turn's planned settling steps, which sizing never goes below."""
        return self.settle_steps if self.planned_settle_steps is None else self.planned_settle_steps

    def longest(self) -> Schedule:
        """The schedule with the most steps sizing may give (settling of `settle_s`, windows of
        `min_window_s`): what a loop that fixes its steps up front (a `fit` epoch, in-memory
        arrays) plans for."""
        if not self.min_window_s and not self.settle_s:
            return self
        window = (grown(self.least_window) if self.min_window_s else self.window_steps)
        settle = (grown(self.least_settle) if self.settle_s and self.least_settle
                  else self.settle_steps)
        # observed windows of their own steps keep them; planned as long as the unobserved
        # (observed_steps None), they grow with them, here as in with_window_steps
        return replace(self, window_steps=window, settle_steps=settle,
                       planned_window_steps=self.least_window,
                       planned_settle_steps=self.least_settle)

    def iterator_of(self, turn: int) -> int:
        """The input iterator a turn runs on (warmup on the first, the traced turn on the last)."""
        return turn_iterator(turn, self.iterators, self.repeats)

    def iterator_spans(self) -> list[tuple[int, int]]:
        """(first step, steps) of each iterator's part of the loop, in order."""
        spans: list[tuple[int, int]] = []
        step = 0
        for segment in self.segments:
            which = self.iterator_of(segment.turn)
            if which == len(spans):
                spans.append((step, 0))
            first, steps = spans[-1]
            spans[-1] = (first, steps + segment.steps)
            step += segment.steps
        return spans

    def window_order(self, turn: int) -> tuple[str, str]:
        """The unobserved window first in even turns, second in odd ones: a window's place in
        its turn (how warm the steps before it left the machine) cancels over each pair."""
        return (UNOBSERVED, OBSERVED) if turn % 2 == 0 else (OBSERVED, UNOBSERVED)

    @property
    def segments(self) -> list[Segment]:
        plan = [Segment(WARMUP, self.warmup_steps, -1)] if self.warmup_steps else []
        steps = {UNOBSERVED: self.window_steps, OBSERVED: self.observed_window_steps}
        for turn in range(self.repeats):
            plan += self._turn(turn, [(kind, steps[kind]) for kind in self.window_order(turn)])
        if self.trace_steps:
            plan += self._turn(self.repeats, [(TRACE_BASE, self.trace_steps),
                                              (TRACED, self.trace_steps)])
        return plan

    def _turn(self, turn: int, windows: list[tuple[str, int]]) -> list[Segment]:
        parts = ([(SETTLE, self.settle_steps)] if self.settle_steps else []) + windows
        return [Segment(kind, steps, turn, gated=k == 0) for k, (kind, steps) in enumerate(parts)]

    @property
    def total_steps(self) -> int:
        return sum(s.steps for s in self.segments)

    @property
    def untraced_steps(self) -> int:
        """Loop steps before the traced turn: those bench's own per-step code is charged on."""
        return self.warmup_steps + self.repeats * (self.settle_steps + self.window_steps
                                                    + self.observed_window_steps)

    @property
    def timed_steps(self) -> int:
        """Steps in the unobserved windows: what the headline counts."""
        return self.window_steps * self.repeats

    def timed_steps_before(self, step: int) -> int:
        """Unobserved (headline) steps among the plan's first `step` loop steps."""
        done = 0
        for segment in self.segments:
            if step <= 0:
                break
            if segment.kind == UNOBSERVED:
                done += min(segment.steps, step)
            step -= segment.steps
        return done

    def step_map(self) -> list[tuple[Segment, int]]:
        """For every loop step, its segment and its offset in it."""
        return [(segment, k) for segment in self.segments for k in range(segment.steps)]


def variant_plan(variant: Variant, gate: Gate, k: int, trace_steps: int,
                 sizing_file: str | None) -> Schedule:
    """The plan a worker runs for `variant` at `k` steps a call (every count a multiple of
    it), on either backend: settling and window sizing only where the gate interleaves, and only
    for one-process variants (a cluster's tasks run the same steps); one iterator where the
    steps are scheduled on a ParameterServer's workers."""
    m = variant.measure
    steps = round_up(m.steps, k)
    settle = round_up(m.settle_steps, k) if gate.interleaved else 0  # else no cold start
    sized = not variant.is_cluster
    return Schedule(round_up(m.warmup_steps, k), steps, m.repeats, gate, settle, trace_steps,
                    1 if variant.kind.coordinated else m.iterators,
                    m.min_window_s if sized else 0.0, sizing_file, observed_steps=steps,
                    settle_s=m.settle_s if sized and settle else 0.0)
