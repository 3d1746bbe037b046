"""The two training paths, Keras `fit` and a custom loop, feeding one StepTimer.

Both run warmup, the timed windows and the traced window on an infinite dataset in one go, and
both are timed the same way: from the completion of one step (result on the host) to the
completion of the next, plus a clock around each timed window (the headline figure). Before each
window and before the trace the loop waits at the gate (`bench.training.gate`), where the runner
interleaves the windows of all live variants; the caller slices the per-step samples afterwards.
`LoopResult.unobserved` runs the same steps once more with no per-step hook or host sync.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.protocol import ProgressFn
from bench.training import checkpointing
from bench.training import precision as precision_policy
from bench.training.flavour import keras as keras_module
from bench.training.objectives import Objectives, average_loss
from bench.training.schedule import LoopClock, LoopResult, Schedule
from bench.training.tracing import TraceWindow


def _keep_iterator_callback() -> Any:
    """A callback that keeps the iterator Keras makes inside `fit` (see LoopResult.iterator).

    Keras hands that iterator to `train_function` at every step: a one-shot wrapper keeps it and
    puts the original function back, so only the untimed first step goes through the wrapper.
    It implements no batch-level hook, so it changes nothing in how `fit` runs its steps.
    """
    keras = keras_module()

    class KeepIterator(keras.callbacks.Callback):
        iterator: Any = None

        def on_train_begin(self, logs: Any = None) -> None:
            model = self.model
            original = model.train_function

            def keep_iterator(iterator: Any) -> Any:
                self.iterator = iterator
                model.train_function = original
                return original(iterator)

            model.train_function = keep_iterator

    return KeepIterator()


@dataclass(frozen=True)
class FitInput:
    """What `fit` is given: bench's tf.data pipeline, or in-memory arrays that Keras batches,
    shuffles and distributes itself (`fit(x, y, batch_size=...)`, as the seeds feed it)."""

    x: Any
    y: Any = None
    batch_size: int | None = None

    def kwargs(self) -> dict[str, Any]:
        # shuffle=False for a dataset: the pipeline shuffles itself (Keras ignores the flag for
        # a tf.data input, and warns when it is left at its default); arrays: Keras shuffles.
        return {"x": self.x, "y": self.y, "batch_size": self.batch_size,
                "shuffle": self.y is not None}


def run_fit(model: Any, optimizer: Any, feed: FitInput, *, objectives: Objectives,
            metrics: list[Any], schedule: Schedule, steps_per_execution: int, jit_compile: bool,
            progress: ProgressFn, trace: TraceWindow | None = None) -> LoopResult:
    """Keras `fit`; per-step times come from batch callbacks (one per steps_per_execution block).

    One fit call runs warmup, timed and traced steps, so no epoch boundary falls inside the
    measurement; the gate waits happen inside the batch hooks, between two steps. The model must
    have been built under the strategy's scope; `compile` is called here, also under that scope
    (Keras records the strategy at compile time).
    """
    keras = keras_module()

    total_steps = schedule.total_steps
    traced = trace.steps if trace else 0
    clock = LoopClock(schedule, total_steps + traced, progress)
    last = total_steps + traced - steps_per_execution
    keeper = _keep_iterator_callback()

    class _StepTiming(keras.callbacks.Callback):
        context: Any = None

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            # `batch` counts steps (0, k, 2k, ... with steps_per_execution = k)
            entered = time.perf_counter()
            if batch < total_steps:
                entered = clock.before(batch, entered)
            elif trace:
                if batch == total_steps:
                    clock.before_trace(trace)
                self.context = trace.step(batch - total_steps)
                self.context.__enter__()
            clock.account(entered)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            # Keras 3 with TensorFlow hands every batch hook host floats (its callbacks are never
            # dispatched asynchronously there), so the step is really finished here.
            entered = time.perf_counter()
            if self.context is not None:
                self.context.__exit__(None, None, None)
                self.context = None
            clock.lap(steps_per_execution, entered)
            if trace and clock.steps_done > last:
                trace.stop()

    model.compile(optimizer=optimizer, loss=objectives.loss(), metrics=metrics,
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    model.fit(**feed.kwargs(), epochs=1, steps_per_epoch=total_steps + traced, verbose=0,
              callbacks=[keeper, _StepTiming()])
    notes = []
    if steps_per_execution > 1:
        notes.append(f"fit callbacks fire once per {steps_per_execution} steps: each sample is a "
                     f"block time divided by {steps_per_execution}")

    def unobserved(steps: int, ready: Callable[[], None]) -> float:
        return _unobserved_fit(model, feed, steps, ready)

    result = clock.result(notes, keeper.iterator, unobserved)
    result.checkpointed = fit_checkpointed(model, feed.kwargs())
    return result


def fit_checkpointed(model: Any, fit_kwargs: dict[str, Any]) -> checkpointing.BlockRunner:
    """The checkpoint-cost blocks as one more `fit` call (bench.training.checkpointing)."""
    def run(plan: checkpointing.CheckpointPlan, log: checkpointing.SaveLog) -> list[float]:
        keeper = _keep_iterator_callback()
        seconds = checkpointing.run_fit_blocks(model, fit_kwargs, plan, log, [keeper])
        _KEPT.append(keeper.iterator)
        return seconds

    return run


def loop_checkpointed(run_steps: Callable[[int], Any], chunk: int | None,
                       objects: dict[str, Any]) -> checkpointing.BlockRunner:
    """The checkpoint-cost blocks of a custom loop, saved through a CheckpointManager."""
    def run(plan: checkpointing.CheckpointPlan, log: checkpointing.SaveLog) -> list[float]:
        save = checkpointing.manager_saver(objects, plan)
        return checkpointing.run_loop_blocks(run_steps, chunk, save, plan, log)

    return run


def _unobserved_fit(model: Any, feed: FitInput, steps: int, ready: Callable[[], None]) -> float:
    """A plain `fit` of `steps` steps with no batch-level callback, timed as a whole.

    A new `fit` call makes a new iterator, whose first steps fill the shuffle buffer and the
    prefetch queue; so it runs two epochs of `steps` (the iterator carries over between epochs
    when steps_per_epoch is set) and times the second, between the epoch hooks (epoch hooks are
    not batch hooks: Keras runs the steps exactly as for a user's own `fit`). `ready` (the gate)
    is called between the two epochs: the set-up and the first epoch time nothing, so they may
    run beside other variants. The loss read at the epoch's end makes sure its last step is
    finished.
    """
    keras = keras_module()

    class EpochClock(keras.callbacks.Callback):
        started = 0.0
        seconds = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            float((logs or {}).get("loss", 0.0))
            self.seconds = time.perf_counter() - self.started
            if epoch == 0:
                ready()

    keeper, epoch_clock = _keep_iterator_callback(), EpochClock()
    model.fit(**feed.kwargs(), epochs=2, steps_per_epoch=steps, verbose=0,
              callbacks=[keeper, epoch_clock])
    _KEPT.append(keeper.iterator)
    return epoch_clock.seconds


# Iterators of extra `fit` calls, kept alive until the worker's os._exit (see LoopResult.iterator).
_KEPT: list[Any] = []


def replica_step_fn(strategy: Any, model: Any, optimizer: Any, objectives: Objectives,
                    metrics: list[Any], global_batch: int, precision: str,
                    jit_compile: bool = False) -> tuple[Any, Callable[[Any, Any], Any]]:
    """The per-replica training step shared by the custom loops: the loss per example averaged
    over the global batch (as the tutorials' `tf.nn.compute_average_loss`), the metrics updated
    as fit updates them.

    With jit_compile the replica step is what XLA compiles (as Keras compiles its step on the
    data), not the function around it: `next(iterator)` has no XLA kernel (IteratorGetNext)."""
    import tensorflow as tf

    optimizer = precision_policy.wrap_for_custom_loop(optimizer, precision)
    with strategy.scope():
        # Keras 3 under a strategy: the optimizer's slots must exist before the first replica
        # step, else the first strategy.run fails feeding a 'cond/.../Placeholder' tensor.
        optimizer.build(model.trainable_variables)
    per_example_loss = objectives.loss(per_example=True)
    scale = precision_policy.needs_loss_scaling(precision)

    def replica_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            predicted = model(x, training=True)
            loss = average_loss(per_example_loss(y, predicted), global_batch)
            scaled = precision_policy.scale_loss(optimizer, loss) if scale else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        if scale:
            grads = precision_policy.unscale_gradients(optimizer, grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        for metric in metrics:
            metric.update_state(y, predicted)
        return loss

    return optimizer, (tf.function(replica_step, jit_compile=True) if jit_compile
                       else replica_step)


def run_custom_loop(strategy: Any, model: Any, optimizer: Any, dist_dataset: Any, *,
                    objectives: Objectives, metrics: list[Any], global_batch: int,
                    precision: str, schedule: Schedule, steps_per_execution: int,
                    jit_compile: bool, progress: ProgressFn,
                    trace: TraceWindow | None = None) -> LoopResult:
    """`strategy.run` under `tf.function` over a distributed dataset, loss reduced to the host."""
    import tensorflow as tf

    optimizer, replica_step = replica_step_fn(strategy, model, optimizer, objectives, metrics,
                                              global_batch, precision, jit_compile)

    def one_step(iterator: Any) -> Any:
        x, y = next(iterator)
        per_replica = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    @tf.function
    def train_block(iterator: Any) -> Any:
        loss = one_step(iterator)
        if steps_per_execution > 1:  # decided at trace time: K=1 keeps a loop-free graph
            for _ in tf.range(steps_per_execution - 1):
                loss = one_step(iterator)
        return loss

    iterator = iter(dist_dataset)
    clock = LoopClock(schedule, schedule.total_steps + (trace.steps if trace else 0), progress)
    for step in range(0, schedule.total_steps, steps_per_execution):
        clock.before(step, time.perf_counter())
        float(train_block(iterator))  # the step is done when its loss is on the host
        clock.lap(steps_per_execution)
    if trace:
        clock.before_trace(trace)
        for i in range(trace.steps // steps_per_execution):
            with trace.step(i):
                float(train_block(iterator))
            clock.lap(steps_per_execution)
        trace.stop()

    def unobserved(steps: int, ready: Callable[[], None]) -> float:
        """The same steps with the loss brought to the host only at the end."""
        ready()
        started = time.perf_counter()
        loss = None
        for _ in range(steps // steps_per_execution):
            loss = train_block(iterator)
        float(loss)
        return time.perf_counter() - started

    result = clock.result([], iterator, unobserved)
    result.checkpointed = loop_checkpointed(lambda _: float(train_block(iterator)),
                                             steps_per_execution,
                                             {"model": model, "optimizer": optimizer})
    return result
