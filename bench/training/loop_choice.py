"""Which training loop a variant runs (Keras fit, the custom loop, or a ParameterServer one), and
its dataset distributed as it says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.protocol import ProgressFn
from bench.scenario.schema import Variant
from bench.training import loops, ps_loops
from bench.training.loop_clock import LoopResult
from bench.training.schedule import Schedule
from bench.training.tracing import TraceWindow
from bench.training.workload import Workload


def distribute(strategy: Any, variant: Variant, dataset_fn: Callable[..., Any]) -> Any:
    """The custom loop's dataset, distributed the variant's way: one input pipeline per worker
    from `dataset_fn(input_context)`, or the global-batch pipeline split by the strategy."""
    if variant.distribute_dataset == "distribute_datasets_from_function":
        return strategy.distribute_datasets_from_function(dataset_fn)
    return strategy.experimental_distribute_dataset(dataset_fn())


def train(variant: Variant, strategy: Any, workload: Workload, metrics: list[Any],
          dataset_fn: Callable[..., Any], *, global_batch: int, schedule: Schedule,
          steps_per_execution: int, jit_compile: bool, progress: ProgressFn,
          trace: TraceWindow | None = None, arrays: tuple[Any, Any] | None = None) -> LoopResult:
    """Train through the variant's own path: Keras fit (from the pipeline, or from `arrays` with
    feed = "numpy"), the ClusterCoordinator loop, or the custom loop over the dataset distributed
    as the variant says. `dataset_fn(input_context)` builds the global-batch pipeline (or one
    input pipeline's shard of it); `metrics` were made under the strategy's scope."""
    model, optimizer = workload.model, workload.optimizer
    common = dict(schedule=schedule, jit_compile=jit_compile, progress=progress,
                  objectives=workload.objectives, metrics=metrics)
    coordinated = variant.kind.coordinated
    if variant.api == "fit":
        with strategy.scope():
            if coordinated:
                return ps_loops.run_parameter_server_fit(
                    model, optimizer, dataset_fn, block=steps_per_execution,
                    steps_per_execution=variant.train.steps_per_execution, **common)
            feed = (loops.FitInput(*arrays, batch_size=global_batch) if arrays is not None
                    else loops.FitInput(dataset_fn()))
            return loops.run_fit(model, optimizer, feed, steps_per_execution=steps_per_execution,
                           trace=trace, **common)
    if coordinated:
        return ps_loops.run_parameter_server_loop(strategy, model, optimizer, dataset_fn,
                                                  global_batch=global_batch,
                                                  precision=variant.precision,
                                                  block=steps_per_execution, **common)
    return loops.run_custom_loop(strategy, model, optimizer,
                                 distribute(strategy, variant, dataset_fn),
                                 global_batch=global_batch, precision=variant.precision,
                                 steps_per_execution=steps_per_execution, trace=trace, **common)
