"""A training loop's bookkeeping on its plan (bench.training.schedule): where each step falls,
the gate before each turn, the sizing of the first turn, completion stamps, window clocks, the
profiler around the traced window, and bench's own time.

Completion times come from whoever sees a step finish: Keras' own callback thread for `fit`
(it brings each step's logs to the host there), the host sync of the custom loop.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.protocol import TRACE, WINDOW, ProgressFn
from bench.results import write_text_atomic
from bench.training.schedule import (
    OBSERVED,
    SAMPLED,
    SETTLE,
    TRACED,
    UNOBSERVED,
    Schedule,
    Segment,
)
from bench.training.tracing import TraceWindow


@dataclass
class LoopResult:
    """What a training loop measured, by segment kind."""

    first_step_end: float  # wall clock (time.time) when step 1 completed: ends "startup"
    samples: dict[str, list[list[float]]]  # per-step seconds, a list per segment, by kind
    clocks: dict[str, list[float]]  # each window's seconds, by kind (unobserved, observed, ...)
    notes: list[str] = field(default_factory=list)
    # CPU seconds of bench's own per-step code (hooks, stamps, progress) during the warmup and
    # the turns, outside the gate and the profiler: its cost on the figures it reports. The
    # threads' own CPU time, so a hook's wait (for a step, a lock, the GIL held by a dispatch
    # in another thread, as Keras' JAX fit does from its callback thread) is not counted.
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
        self._begun_through = -1  # the last step of the last call begun
        self._stamps: dict[int, float] = {}  # completion time of the steps that end a call
        self._starts: dict[int, float] = {}  # a segment's start where it is not the step before's
        self.harness_s = 0.0
        self.first_step_end = 0.0
        self.window_started_at: list[float] = []
        self._context: Any = None
        self._opened: set[int] = set()  # gated steps whose gate the loop already passed
        self._sized = False  # whether the windows were sized (LoopClock._size_windows)
        # The first turn settles until `settle_s` has passed (LoopClock._settled): until then
        # it is planned at the most steps it may take, and each of its steps is synced.
        self._settling_sized = not (schedule.settle_s and schedule.settle_steps)
        self._twin: tuple[int, int] | None | bool = False  # not read yet (_twins_sizes)
        if not self._settling_sized:
            self._use(schedule.with_settle_steps(schedule.longest().settle_steps))

    def _use(self, schedule: Schedule) -> None:
        """Run on `schedule` from here on (sized: the steps already run keep their places)."""
        self.schedule = schedule
        self.steps = schedule.step_map()
        self.total = len(self.steps)
        self.spans = schedule.iterator_spans()

    def _segment(self, step: int) -> tuple[Segment, int]:
        return self.steps[step]

    def wait_before(self, step: int) -> bool:
        """Whether every earlier step must be complete before `step` is dispatched: at a turn's
        gate, for every step of the observed, traced and warmup windows, and while the first
        turn's settling sizes itself."""
        segment, offset = self._segment(step)
        return (segment.gated and offset == 0) or segment.kind in SAMPLED or self._timing(segment)

    def sync_after(self, step: int) -> bool:
        """Whether the call that starts at `step` must have its result brought to the host right
        away: a step of the observed, traced and warmup windows, each segment's last, and each
        of the first turn's settling while it sizes itself."""
        segment, offset = self._segment(step)
        return (segment.kind in SAMPLED or offset + self.k >= segment.steps
                or self._timing(segment))

    def _timing(self, segment: Segment) -> bool:
        """Whether `segment` is the first turn's settling, still sizing itself by its time."""
        return not self._settling_sized and segment.kind == SETTLE and segment.turn == 0

    def wait_for(self, step: int) -> None:
        """Block until every step before `step` is complete."""
        cpu = time.thread_time()
        with self._completed:
            self._completed.wait_for(lambda: self._done_through >= step - 1)
        self._account(cpu)

    def begin(self, step: int) -> None:
        """Before the call that starts at `step`: the gate before a turn, the profiler and its
        step markers in the traced window. Call it once earlier steps are complete where
        `wait_before` says so."""
        cpu = time.thread_time()
        self._begun_through = max(self._begun_through, step + self.k - 1)
        if step == 0:
            self._starts[0] = time.perf_counter()
        segment, offset = self._segment(step)
        self._close_trace_step()
        if offset == 0 and segment.gated and step not in self._opened:
            self._account(cpu)
            self.open_turn(step)
            cpu = time.thread_time()
        if self._timing(segment) and self._settled(step - offset, offset):
            segment, offset = self._segment(step)  # the first window's first step now
        if not self._sized and segment.kind in (UNOBSERVED, OBSERVED) and segment.turn == 0:
            self.wait_for(step)  # once: the steps before it are what sizes the windows
            self._size_windows(step)
            cpu = time.thread_time()
        if segment.kind == TRACED and self.trace is not None:
            if offset == 0:
                self._account(cpu)
                self.trace.start()
                self._starts[step] = time.perf_counter()  # the profiler's start-up is in no step
            self._context = self.trace.step(offset // self.k)
            self._context.__enter__()
            return  # traced steps are the profiler's, not the harness's
        self._account(cpu)

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

    def _twins_sizes(self) -> tuple[int, int] | None:
        """The settling and window steps the twin's loop chose (the schedule's `sizing_file`),
        if it sized its first turn before this loop began its own: read once, since the twins'
        first turns run one after the other."""
        if self._twin is False:
            shared = self.schedule.sizing_file
            self._twin = None
            if shared and Path(shared).exists():
                settle, window = (int(n) for n in Path(shared).read_text().split())
                self._twin = (settle, window)
        return self._twin

    def _settled(self, first_settle: int, offset: int) -> bool:
        """At each of the first turn's settling steps: whether it has settled, every step so far
        complete: `settle_s` since its release, or as many steps as the twin's loop settled,
        with at least the planned steps (else it runs the most steps it may take). Once
        settled, every turn settles as many steps, and the windows follow."""
        sizes = self._twins_sizes()
        if sizes is not None:
            settled = offset >= sizes[0]
        else:
            settled = (offset >= self.schedule.least_settle and time.perf_counter()
                       - self._starts[first_settle] >= self.schedule.settle_s)
        if not settled or offset % self.k:
            return False
        self._settling_sized = True
        self._use(self.schedule.with_settle_steps(offset))
        return True

    def _size_windows(self, first_window: int) -> None:
        """Before the first turn's first window: lengthen every turn's unobserved window to
        `min_window_s` at the step time so far, or to the steps the twin's loop chose (the
        schedule's `sizing_file`). The steps before `first_window` keep their places."""
        self._sized = self._settling_sized = True  # a settling at its most steps ends here
        if (sizes := self._twins_sizes()) is not None:
            self._use(self.schedule.with_window_steps(sizes[1]))
            return
        step_s = self._step_time_before(first_window)
        if step_s is not None:
            self._use(self.schedule.sized_for(step_s, self.k))
        if self.schedule.sizing_file:
            write_text_atomic(Path(self.schedule.sizing_file),
                              f"{self.schedule.settle_steps} {self.schedule.window_steps}")

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
        cpu = time.thread_time()
        last = step + self.k - 1
        self._stamps[last] = when if when is not None else time.perf_counter()
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
            self._account(cpu)

    def finish(self) -> None:
        """After the last step: close the trace (in the loop's thread). A loop that ended
        before its plan's last step (its input ran out, a fit epoch planned too short) is an
        error here, where waiting for the steps it never ran would never end."""
        if self._begun_through < self.total - 1:
            raise RuntimeError(f"the loop ended after {self._begun_through + 1} of its "
                               f"{self.total} planned steps")
        self.wait_for(self.total)
        self._close_trace_step()
        if self.trace is not None and self.schedule.trace_steps:
            self.trace.stop()

    def _account(self, cpu_entered: float) -> None:
        """Charge the calling thread's CPU time since `cpu_entered` (time.thread_time)."""
        self.harness_s += time.thread_time() - cpu_entered

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
