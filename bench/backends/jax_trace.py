"""The traced window on JAX: `jax.profiler` writes the same xprof layout TensorFlow's profiler
does (`<logdir>/plugins/profile/<run>/<host>.xplane.pb`), each traced step marked with a
`StepTraceAnnotation` (xprof's step marker, as TensorFlow's `Trace(..., _r=1)`), so bench's
trace analysis reads it unchanged."""

from __future__ import annotations

import contextlib
from typing import Any

from bench.training.tracing import TraceWindow


class JaxTraceWindow(TraceWindow):
    """A TraceWindow whose profiler is JAX's."""

    def _start_profiler(self) -> None:
        import jax

        jax.profiler.start_trace(self.logdir)

    def _step_annotation(self, step_num: int) -> contextlib.AbstractContextManager[Any]:
        import jax

        return jax.profiler.StepTraceAnnotation("train", step_num=step_num)

    def _stop_profiler(self) -> None:
        import jax

        jax.profiler.stop_trace()


def window(trace: TraceWindow | None) -> JaxTraceWindow | None:
    """The variant's traced window (bench.training.traced_turn.window) with JAX's profiler."""
    if trace is None:
        return None
    return JaxTraceWindow(trace.logdir, trace.steps, capture=trace.capture)
