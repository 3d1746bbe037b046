"""The traced window on JAX: `jax.profiler` writes the same xprof layout TensorFlow's profiler
does (`<logdir>/plugins/profile/<run>/<host>.xplane.pb`), each traced step marked with a
`StepTraceAnnotation` (xprof's step marker, as TensorFlow's `Trace(..., _r=1)`), so bench's
trace analysis reads it unchanged."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from bench.training.tracing import TraceWindow


class JaxTraceWindow(TraceWindow):
    """A TraceWindow whose profiler is JAX's."""

    def start(self) -> None:
        import jax

        if not self.capture:
            return
        t0 = time.perf_counter()
        jax.profiler.start_trace(self.logdir)
        self.start_s = time.perf_counter() - t0
        self._started = True

    @contextlib.contextmanager
    def step(self, step_num: int) -> Iterator[None]:
        import jax

        if not self.capture:
            yield
            return
        with jax.profiler.StepTraceAnnotation("train", step_num=step_num):
            yield

    def stop(self) -> None:
        import jax

        if self._started:
            t0 = time.perf_counter()
            jax.profiler.stop_trace()
            self.stop_s = time.perf_counter() - t0
            self._started = False


def window(trace: TraceWindow | None) -> JaxTraceWindow | None:
    """The variant's traced window (bench.training.traced_turn.window) with JAX's profiler."""
    if trace is None:
        return None
    return JaxTraceWindow(trace.logdir, trace.steps, capture=trace.capture)
