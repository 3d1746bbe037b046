"""A training loop's bookkeeping, shared by every path: where its steps fall (warmup, timed
windows, the trace), the gate before each window, the step timer, the window clocks, progress,
and what the loop returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.protocol import TRACE, WINDOW, ProgressFn
from bench.timing import StepTimer
from bench.training.gate import Gate
from bench.training.tracing import TraceWindow


@dataclass
class LoopResult:
    timer: StepTimer
    first_step_end: float  # wall clock (time.time) when step 1 completed: ends "startup"
    notes: list[str] = field(default_factory=list)
    # Seconds spent in bench's own per-step code (hooks, timer, progress) during the warmup
    # and timed steps. It runs between two step boundaries, so it is inside the samples: this is
    # the harness's overhead on the measured step time, measured rather than argued.
    harness_s: float = 0.0
    # The loop's input iterator (Keras fit's own, or the custom loop's), kept alive on purpose:
    # destroying a tf.data iterator waits for its background threads (0.3-3 s per variant
    # inside a run of the default scenario). Workers end with os._exit, so it is never
    # destroyed and never costs the run that wait.
    iterator: Any = None
    # Wall-clock seconds of each timed window, from its release at the gate to its last step's
    # completion: the clock the headline examples/s divides by.
    window_s: list[float] = field(default_factory=list)
    # When each timed window was released (time.time(), the clock every process shares), so a
    # run can show that no two variants' windows overlapped.
    window_started_at: list[float] = field(default_factory=list)
    # Runs n more steps with no per-step hook or host sync and returns their wall-clock seconds
    # (None where the path has no such mode): the observer effect's yardstick. Its second
    # argument waits at the gate: it is called once the set-up is done, just before the clock.
    unobserved: Callable[[int, Callable[[], None]], float] | None = None
    # Runs the checkpoint-cost blocks (bench.training.checkpointing.BlockRunner), where the
    # path can save: (plan, log) -> seconds of each block.
    checkpointed: Callable[[Any, Any], list[float]] | None = None
    # Seconds of the untimed settling steps after each gate release, so a run can say what
    # settling costs (they are in no sample and no window clock).
    settling_s: float = 0.0


@dataclass(frozen=True)
class Schedule:
    """Where a loop's steps fall: warmup, `repeats` windows, then the traced window; the gate
    stands before every window and before the trace. A window is `settle_steps` untimed steps
    (a variant idle at the gate runs its first steps cold) and then `window_steps` timed ones."""

    warmup_steps: int
    window_steps: int
    repeats: int
    gate: Gate
    settle_steps: int = 0

    @property
    def span(self) -> int:
        """Loop steps per window, settling included."""
        return self.settle_steps + self.window_steps

    @property
    def timed_steps(self) -> int:
        return self.window_steps * self.repeats

    @property
    def sampled_steps(self) -> int:
        """Steps with a timer sample before the trace: warmup and timed (settling has none)."""
        return self.warmup_steps + self.timed_steps

    @property
    def total_steps(self) -> int:
        """Loop steps before the trace."""
        return self.warmup_steps + self.span * self.repeats

    def _offset(self, step: int) -> int | None:
        offset = step - self.warmup_steps
        return offset if 0 <= offset < self.span * self.repeats else None

    def window_starting_at(self, step: int) -> int | None:
        """The index of the window (its gate) whose first step is `step`, if any."""
        offset = self._offset(step)
        return offset // self.span if offset is not None and offset % self.span == 0 else None

    def clock_starts_at(self, step: int) -> bool:
        """Whether a window's clock starts before `step` (its first step after settling)."""
        offset = self._offset(step)
        return offset is not None and offset % self.span == self.settle_steps

    def settling(self, step: int) -> bool:
        """Whether `step` is one of a window's untimed settling steps."""
        offset = self._offset(step)
        return offset is not None and offset % self.span < self.settle_steps

    def ends_a_window(self, steps_done: int) -> bool:
        offset = steps_done - self.warmup_steps
        return 0 < offset <= self.span * self.repeats and offset % self.span == 0


class LoopClock:
    """Shared bookkeeping for both paths: lap the timer, stamp step 1, report progress sparingly,
    and account for its own time (`harness_s`) until the traced steps begin."""

    def __init__(self, schedule: Schedule, total_steps: int, progress: ProgressFn,
                 min_interval_s: float = 0.2):
        self.schedule = schedule
        self.timer = StepTimer()
        self.total = total_steps
        self.window_s: list[float] = []
        self.window_started_at: list[float] = []
        self._window_started = 0.0
        self.progress = progress
        self.first_step_end = 0.0
        self.steps_done = 0  # loop steps, settling included (the timer counts sampled ones)
        self.harness_s = 0.0
        self.settling_s = 0.0  # untimed settling steps after gate releases
        self.accounting = True  # off once tracing starts: traced steps are not timed windows
        self._min_interval = min_interval_s
        self._last_report = 0.0

    def start(self) -> None:
        self.timer.start()

    def before(self, step: int, entered: float) -> float:
        """Before the block starting at `step` (the hook began at `entered`): at a window's
        start, wait for the gate; once it has settled, restart the timer and the window's clock,
        so neither the idle time at the gate nor the cold steps after it are in any sample.
        Returns when bench's own time in this hook counts from."""
        if step == 0:
            self.start()
        window = self.schedule.window_starting_at(step)
        if window is not None:
            self.account(entered)
            self.schedule.gate.wait(WINDOW, window)
            self.start()  # the wait is in no sample, settling step or not
            entered = time.perf_counter()  # nor bench's per-step time
        if not self.schedule.clock_starts_at(step):
            return entered
        if window is None:
            self.account(entered)
        self.start()
        self._window_started = time.perf_counter()
        self.window_started_at.append(time.time())
        return self._window_started

    def before_trace(self, trace: TraceWindow) -> None:
        self.schedule.gate.wait(TRACE)
        self.accounting = False  # traced steps are not timed windows
        trace.start()
        self.start()  # profiler start-up is not part of the first traced step

    def lap(self, steps: int, entered: float | None = None) -> None:
        """Close a block of `steps` steps; `entered` is when the caller's hook began, if any."""
        entered = entered if entered is not None else time.perf_counter()
        if self.schedule.settling(self.steps_done):
            self.settling_s += self.timer.skip()  # a settling step: in no sample
        else:
            self.timer.lap(steps)
        self.steps_done += steps
        if self.schedule.ends_a_window(self.steps_done):
            self.window_s.append(time.perf_counter() - self._window_started)
        now = time.time()
        if not self.first_step_end:
            self.first_step_end = now
        done = self.steps_done
        if done >= self.total or now - self._last_report >= self._min_interval:
            self._last_report = now
            self.progress(done, self.total)
        self.account(entered)

    def account(self, entered: float) -> None:
        """Add the time since `entered` (a perf_counter reading) to bench's own per-step time."""
        if self.accounting:
            self.harness_s += time.perf_counter() - entered

    def result(self, notes: list[str], iterator: Any = None,
               unobserved: Callable[[int, Callable[[], None]], float] | None = None
               ) -> LoopResult:
        return LoopResult(self.timer, self.first_step_end, notes, self.harness_s, iterator,
                          self.window_s, self.window_started_at, unobserved,
                          settling_s=self.settling_s)
