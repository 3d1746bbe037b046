"""Profiler trace capture for a window of steps after the timed window.

Each traced step is wrapped in `tf.profiler.experimental.Trace("train", step_num=i, _r=1)`:
without `_r=1` xprof finds no steps. Keras 3's TensorBoard callback lacks that marker, which is
why the fit path uses our own callback hooks. Output lands in the TensorBoard/xprof layout:
`<logdir>/plugins/profile/<run>/<host>.xplane.pb`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# Why a MultiWorkerMirrored worker other than the chief runs its traced steps unprofiled.
NON_CHIEF_UNTRACED = (
    "TensorFlow's profiler crashes a MultiWorkerMirrored worker other than the chief as it stops "
    "(a double free or a segfault in TraceMeRecorder::Consume, also without bench: "
    "docs/measuring/measurements.md#multi-worker-tracing), which a real cluster does not "
    "survive; the chief's trace stands for the workers")


@dataclass
class TraceWindow:
    """`capture` False: the window's steps run as traced steps (a cluster's tasks run the same
    steps), with no profiler."""

    logdir: str
    steps: int
    capture: bool = True
    start_s: float = 0.0  # what profiler.start() cost, outside any step
    stop_s: float = 0.0  # what profiler.stop() cost (writing the trace), outside any step
    _started: bool = field(default=False, repr=False)

    def start(self) -> None:
        if not self.capture:
            return
        t0 = time.perf_counter()
        self._start_profiler()
        self.start_s = time.perf_counter() - t0
        self._started = True

    @contextlib.contextmanager
    def step(self, step_num: int) -> Iterator[None]:
        if not self.capture:
            yield
            return
        with self._step_annotation(step_num):
            yield

    def stop(self) -> None:
        if self._started:
            t0 = time.perf_counter()
            self._stop_profiler()
            self.stop_s = time.perf_counter() - t0
            self._started = False

    # The profiler itself: TensorFlow's here, another backend's in its subclass.
    def _start_profiler(self) -> None:
        import tensorflow as tf

        options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=2,
                                                           python_tracer_level=0,
                                                           device_tracer_level=1)
        tf.profiler.experimental.start(self.logdir, options=options)

    def _step_annotation(self, step_num: int) -> contextlib.AbstractContextManager[Any]:
        import tensorflow as tf

        return tf.profiler.experimental.Trace("train", step_num=step_num, _r=1)

    def _stop_profiler(self) -> None:
        import tensorflow as tf

        tf.profiler.experimental.stop()
