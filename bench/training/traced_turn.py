"""A variant's traced turn: whether its process traces, and the record's trace section.

The profiler runs in a window after the timed turns (bench.training.schedule), beside an
untraced window of as many steps, so its cost is measured, not assumed.
"""

from __future__ import annotations

from bench.child_env import ChildEnv
from bench.launch.cluster_plan import is_chief_config, read_tf_config
from bench.record import measured, profiled
from bench.scenario.schema import Variant
from bench.timing import round_up, summarize
from bench.training import observer
from bench.training.loop_clock import LoopResult
from bench.training.tracing import NON_CHIEF_UNTRACED, TraceWindow


def window(variant: Variant, k: int) -> TraceWindow | None:
    """A profiler window after the timed steps, where the launcher asked for traces (not on a
    coordinator, which runs no step itself; unprofiled on a MultiWorkerMirrored worker other
    than the chief: tracing.NON_CHIEF_UNTRACED)."""
    logdir = ChildEnv.from_env().trace_dir
    if not logdir or variant.measure.trace_steps == 0 or variant.kind.coordinated:
        return None
    return TraceWindow(logdir, round_up(variant.measure.trace_steps, k),
                       capture=multi_worker_chief(variant) is not False)


def multi_worker_chief(variant: Variant) -> bool | None:
    """Whether this task of a MultiWorkerMirrored cluster is its chief; None outside one."""
    config = read_tf_config()
    if variant.strategy != "multi_worker_mirrored" or not config.get("task"):
        return None
    return is_chief_config(config)


def summary(trace: TraceWindow | None, result: LoopResult,
            variant: Variant) -> profiled.Trace | None:
    """The record's trace section: captured (the traced steps and what the profiler cost
    them), off with the reason, or none where no trace was asked for."""
    if variant.kind.coordinated and variant.measure.trace_steps:
        return profiled.Trace(status="off", reason="the coordinator only schedules steps; its "
                                                   "trace would not show the workers' compute")
    if trace is None:
        return None
    if not trace.capture:
        return profiled.Trace(status="off", reason=NON_CHIEF_UNTRACED)
    traced = (result.samples.get("traced") or [[]])[0]
    untraced = (result.samples.get("trace_base") or [[]])[0]
    return profiled.Trace(
        status="captured",
        dir=trace.logdir,
        steps=trace.steps,
        step_time=measured.StepTime(**summarize(traced).to_dict()) if traced else None,
        # the traced window against an untraced one of as many steps just before it
        **(observer.profiler_cost(untraced, traced) or {"overhead_ratio": None}),
        start_s=trace.start_s,
        stop_s=trace.stop_s,
    )
