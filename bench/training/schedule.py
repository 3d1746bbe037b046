"""A training loop's plan and bookkeeping, shared by every path.

The plan: warmup, then `repeats` turns, then the traced turn. The gate stands before every turn
(the runner interleaves the turns of all live variants in rounds). A turn is `settle_steps`
untimed steps (a variant idle at the gate runs its first steps cold), then two windows of
`window_steps` steps each, in an order that alternates from turn to turn:

- the **unobserved** window, timed as the anchors time a block of steps: no host sync inside it,
  its clock running from the completion of the step before it to the completion of its last
  step (the headline);
- the **observed** window, whose every step waits for its result on the host before the next
  one starts: the per-step samples (the typical step, the spread), and, held against the
  unobserved window of the same turn, what observing each step costs.

Windows of a few short steps read a few percent below a loop running on (measured on CPUs, where
a step's call returns with the step done; on a GPU a window also starts with nothing queued and
ends waiting for the queue to drain). So a window lasts at least `min_window_s`: before the first
turn's first window the loop lengthens both windows of every turn alike to that time at its step
time so far (at most MAX_WINDOW_GROWTH times `window_steps`, which bounds what a loop must plan
for up front).

Completion times come from whoever sees a step finish: Keras' own callback thread for `fit`
(it brings each step's logs to the host there), the host sync of the custom loop. The traced
turn is an observed window without the profiler, then the traced one (the profiler's cost, from
two windows side by side).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.protocol import TRACE, WINDOW, ProgressFn
from bench.results import write_text_atomic
from bench.scenario.schema import MAX_WINDOW_GROWTH
from bench.timing import round_up, turn_iterator
from bench.training.gate import Gate
from bench.training.tracing import TraceWindow

UNOBSERVED, OBSERVED, SETTLE, WARMUP, TRACE_BASE, TRACED = (
    "unobserved", "observed", "settle", "warmup", "trace_base", "traced")
SAMPLED = (WARMUP, OBSERVED, TRACE_BASE, TRACED)  # segments whose every step is a sample


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
    window_steps: int
    repeats: int
    gate: Gate
    settle_steps: int = 0
    trace_steps: int = 0
    iterators: int = 1  # fresh input iterators, the turns spread evenly over them
    min_window_s: float = 0.0  # the windows' least duration, at the step time before the first
    # A file the loop shares with its twin (the A/A pair of a run): the first of the two to size
    # its windows writes their steps there, and the other runs windows of that many steps.
    sizing_file: str | None = None

    def sized_for(self, step_s: float, steps_per_call: int = 1) -> Schedule:
        """The schedule with windows that last at least `min_window_s` at `step_s` per step, in
        whole calls, never shorter than planned nor longer than `longest()`'s."""
        if not self.min_window_s or not step_s > 0:
            return self
        return self.with_window_steps(round_up(math.ceil(self.min_window_s / step_s),
                                               steps_per_call))

    def with_window_steps(self, wanted: int) -> Schedule:
        """The schedule with windows of `wanted` steps, never shorter than planned nor longer
        than `longest()`'s."""
        longest = self.longest().window_steps
        return replace(self, window_steps=min(longest, max(self.window_steps, wanted)))

    def longest(self) -> Schedule:
        """The schedule with the longest windows `sized_for` may give: what a loop that fixes its
        steps up front (a `fit` epoch, in-memory arrays) plans for."""
        if not self.min_window_s:
            return self
        return replace(self, window_steps=self.window_steps * MAX_WINDOW_GROWTH)

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
        for turn in range(self.repeats):
            plan += self._turn(turn, [(kind, self.window_steps)
                                      for kind in self.window_order(turn)])
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
        return self.warmup_steps + self.repeats * (self.settle_steps + 2 * self.window_steps)

    @property
    def timed_steps(self) -> int:
        """Steps in the unobserved windows: what the headline counts."""
        return self.window_steps * self.repeats

    def step_map(self) -> list[tuple[Segment, int]]:
        """For every loop step, its segment and its offset in it."""
        return [(segment, k) for segment in self.segments for k in range(segment.steps)]


@dataclass
class LoopResult:
    """What a training loop measured, by segment kind."""

    first_step_end: float  # wall clock (time.time) when step 1 completed: ends "startup"
    samples: dict[str, list[list[float]]]  # per-step seconds, a list per segment, by kind
    clocks: dict[str, list[float]]  # each window's seconds, by kind (unobserved, observed, ...)
    notes: list[str] = field(default_factory=list)
    # Seconds spent in bench's own per-step code (hooks, stamps, progress) during the warmup
    # and the turns, outside the gate and the profiler: its cost on the figures it reports.
    harness_s: float = 0.0
    # The loop's input iterators, one per epoch (Keras fit's own, or the custom loop's), kept
    # alive on purpose: destroying a tf.data iterator waits for its background threads (0.3-3 s
    # per variant inside a run of the default scenario). Workers end with os._exit, so none is
    # destroyed and none costs the run that wait.
    iterators: list[Any] = field(default_factory=list)
    # When each turn's first window started (time.time(), the clock every process shares), so
    # a run can show that no two variants' turns overlapped.
    window_started_at: list[float] = field(default_factory=list)
    # Runs the checkpoint-cost blocks (bench.training.checkpointing.BlockRunner), where the
    # path can save: (plan, log) -> seconds of each block.
    checkpointed: Callable[[Any, Any], list[float]] | None = None
    settling_s: float = 0.0  # the untimed settling steps, which are in no sample and no clock
    order: list[tuple[str, str]] = field(default_factory=list)  # each turn's window order
    # Runs one epoch of n steps of this loop on a fresh input iterator, to its last step's
    # result on the host, and returns that iterator (bench.training.epoch_ends ends it).
    run_epoch: Callable[[int], Any] | None = None
    schedule: Schedule | None = None  # the plan as run: its windows sized (Schedule.sized_for)


class LoopClock:
    """One loop's bookkeeping: which segment each step is in, the gate before each turn, the
    profiler around the traced window, completion stamps, window clocks, progress, and bench's
    own time.

    A loop dispatches calls of `steps_per_call` steps. Before each it asks `wait_before` (Keras'
    `fit`, which brings results to the host in its own thread, then waits for them with
    `wait_for`) or, after it, `sync_after` (the custom loop and tf-keras, which bring the
    result to the host themselves), and calls `begin` and `end` around it; `end` may come from
    another thread. `finish` closes the loop.
    """

    def __init__(self, schedule: Schedule, progress: ProgressFn, trace: TraceWindow | None = None,
                 steps_per_call: int = 1, min_interval_s: float = 0.2):
        self.schedule = schedule
        self.steps = schedule.step_map()
        self.total = len(self.steps)
        self.spans = schedule.iterator_spans()  # (first step, steps) of each input iterator
        self.k = steps_per_call
        self.trace = trace
        self.progress = progress
        self._min_interval = min_interval_s
        self._last_report = 0.0
        self._completed = threading.Condition()
        self._done_through = -1  # every step up to this one is complete
        self._stamps: dict[int, float] = {}  # completion time of the steps that end a call
        self._starts: dict[int, float] = {}  # a segment's start where it is not the step before's
        self.harness_s = 0.0
        self.first_step_end = 0.0
        self.window_started_at: list[float] = []
        self._context: Any = None
        self._opened: set[int] = set()  # gated steps whose gate the loop already passed
        self._sized = False  # whether the windows were sized (LoopClock._size_windows)

    def _segment(self, step: int) -> tuple[Segment, int]:
        return self.steps[step]

    def wait_before(self, step: int) -> bool:
        """Whether every earlier step must be complete before `step` is dispatched: at a turn's
        gate, and for every step of the observed, traced and warmup windows."""
        segment, offset = self._segment(step)
        return (segment.gated and offset == 0) or segment.kind in SAMPLED

    def sync_after(self, step: int) -> bool:
        """Whether the call that starts at `step` must have its result brought to the host right
        away: a step of the observed, traced and warmup windows, and each segment's last."""
        segment, offset = self._segment(step)
        return segment.kind in SAMPLED or offset + self.k >= segment.steps

    def wait_for(self, step: int) -> None:
        """Block until every step before `step` is complete."""
        entered = time.perf_counter()
        with self._completed:
            self._completed.wait_for(lambda: self._done_through >= step - 1)
        self._account(entered)

    def begin(self, step: int) -> None:
        """Before the call that starts at `step`: the gate before a turn, the profiler and its
        step markers in the traced window. Call it once earlier steps are complete where
        `wait_before` says so."""
        entered = time.perf_counter()
        if step == 0:
            self._starts[0] = entered
        segment, offset = self._segment(step)
        self._close_trace_step()
        if offset == 0 and segment.gated and step not in self._opened:
            self._account(entered)
            self.open_turn(step)
            entered = time.perf_counter()
        if not self._sized and segment.kind in (UNOBSERVED, OBSERVED) and segment.turn == 0:
            self.wait_for(step)  # once: the steps before it are what sizes the windows
            self._size_windows(step)
            entered = time.perf_counter()
        if segment.kind == TRACED and self.trace is not None:
            if offset == 0:
                self._account(entered)
                self.trace.start()
                self._starts[step] = time.perf_counter()  # the profiler's start-up is in no step
            self._context = self.trace.step(offset // self.k)
            self._context.__enter__()
            return  # traced steps are the profiler's, not the harness's
        self._account(entered)

    def open_turn(self, step: int) -> None:
        """Wait at the gate before the turn that starts at `step`; its clock starts at the
        release. A loop that starts a new input iterator at a turn calls this first, so the
        iterator's pipeline starts filling in its own turn, not beside another variant's."""
        segment, _ = self._segment(step)
        self.schedule.gate.wait(TRACE if segment.turn == self.schedule.repeats else WINDOW,
                                segment.turn)
        self._starts[step] = time.perf_counter()
        self.window_started_at.append(time.time())
        self._opened.add(step)

    def _size_windows(self, first_window: int) -> None:
        """Before the first turn's first window: lengthen every turn's windows to
        `min_window_s` at the step time so far, or to the steps the twin's loop chose (the
        schedule's `sizing_file`). The steps before `first_window` keep their places."""
        self._sized = True
        shared = Path(self.schedule.sizing_file) if self.schedule.sizing_file else None
        if shared is not None and shared.exists():
            self.schedule = self.schedule.with_window_steps(int(shared.read_text()))
        else:
            step_s = self._step_time_before(first_window)
            if step_s is None:
                return
            self.schedule = self.schedule.sized_for(step_s, self.k)
            if shared is not None:
                write_text_atomic(shared, str(self.schedule.window_steps))
        self.steps = self.schedule.step_map()
        self.total = len(self.steps)
        self.spans = self.schedule.iterator_spans()

    def _step_time_before(self, first_window: int) -> float | None:
        """Seconds per step so far, the shorter of two estimates that both err long (so windows
        err short): the first turn's settling steps, which ran after the gate's release with the
        machine to the variant but start cold; and the warmup's median step, its first (which
        compiles) left out, beside other variants still building."""
        estimates = []
        if settle := self.schedule.settle_steps:
            start = self._starts.get(first_window - settle)
            end = self._stamps.get(first_window - 1)
            if start is not None and end is not None:
                estimates.append((end - start) / settle)
        ends = [self._starts.get(0)] + [self._stamps.get(s)
                                        for s in range(self.k - 1, self.schedule.warmup_steps, self.k)]
        if len(ends) >= 3 and None not in ends:
            estimates.append(statistics.median(
                (b - a) / self.k for a, b in zip(ends[1:], ends[2:], strict=False)))
        return min(estimates, default=None)

    def _close_trace_step(self) -> None:
        """End the previous traced step's marker, in the thread that opened it (the loop's)."""
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None

    def end(self, step: int, when: float | None = None) -> None:
        """The call that started at `step` is complete, its result on the host."""
        entered = when if when is not None else time.perf_counter()
        last = step + self.k - 1
        self._stamps[last] = entered
        with self._completed:  # Keras may run two steps' hooks at once, in either order
            self._done_through = max(self._done_through, last)
            self._completed.notify_all()
        if not self.first_step_end:
            self.first_step_end = time.time()
        now = time.time()
        if last + 1 >= self.total or now - self._last_report >= self._min_interval:
            self._last_report = now
            self.progress(last + 1, self.total)
        if self.steps[last][0].kind != TRACED:
            self._account(entered)

    def finish(self) -> None:
        """After the last step: close the trace (in the loop's thread)."""
        self.wait_for(self.total)
        self._close_trace_step()
        if self.trace is not None and self.schedule.trace_steps:
            self.trace.stop()

    def _account(self, entered: float) -> None:
        self.harness_s += time.perf_counter() - entered

    def result(self, notes: list[str], iterators: Sequence[Any] = ()) -> LoopResult:
        """Samples and clocks from the completion stamps: a window's clock runs from the
        completion of the step before it (or its turn's release) to its last step's."""
        samples: dict[str, list[list[float]]] = {}
        clocks: dict[str, list[float]] = {}
        settling = 0.0
        start = 0
        for segment in self.schedule.segments:
            stop = start + segment.steps
            first = self._starts.get(start, self._stamps.get(start - 1))
            ends = [first] + [self._stamps.get(s) for s in range(start + self.k - 1, stop, self.k)]
            if ends[0] is not None and ends[-1] is not None and len(ends) > 1:
                seconds = ends[-1] - ends[0]
                if segment.kind == SETTLE:
                    settling += seconds
                else:
                    clocks.setdefault(segment.kind, []).append(seconds)
                if segment.kind in SAMPLED and None not in ends:
                    samples.setdefault(segment.kind, []).append(
                        [(b - a) / self.k for a, b in zip(ends, ends[1:], strict=False)])
            start = stop
        order = [self.schedule.window_order(t) for t in range(self.schedule.repeats)]
        return LoopResult(self.first_step_end, samples, clocks, notes, self.harness_s, list(iterators),
                          self.window_started_at, settling_s=settling, order=order,
                          schedule=self.schedule)
