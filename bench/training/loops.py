"""The two training paths, Keras `fit` and a custom loop, on one plan (bench.training.schedule).

Both run warmup, the turns and the traced turn on an infinite dataset in one go, and both are
timed the same way: from each step's completion on the host. Neither brings a result to the
host inside an unobserved window: `fit` keeps the mode of a user's own `fit` (Keras runs batch
callbacks in its own thread and brings each step's logs to the host there, so bench's hooks
never hold the loop), and the custom loop iterates the distributed dataset in Python as the
tutorials do, reading the loss only at the window's end. Before each turn the loop waits at
the gate (`bench.training.gate`), where the runner interleaves the turns of all live variants.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.protocol import ProgressFn
from bench.training import checkpointing
from bench.training import precision as precision_policy
from bench.training.flavour import chosen as chosen_flavour
from bench.training.flavour import keras as keras_module
from bench.training.loop_clock import LoopClock, LoopResult
from bench.training.objectives import Objectives, average_loss
from bench.training.schedule import Schedule
from bench.training.tracing import TraceWindow


def _keep_iterator_callback() -> Any:
    """A callback that keeps the iterator Keras makes inside `fit` (see LoopResult.iterators).

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

            def keep_iterator(*args: Any) -> Any:
                # the iterator is the last argument: (iterator) on TensorFlow, (state,
                # iterator) on JAX
                self.iterator = args[-1]
                model.train_function = original
                return original(*args)

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
    """Keras `fit`: one call runs the whole plan, so no epoch boundary falls inside it.

    bench's callback marks itself safe for Keras 3's asynchronous dispatch: its batch-end hook
    runs in Keras' callback thread, after Keras has brought the step's logs to the host there
    (the step's completion), and fit runs as a user's plain `fit` does. Its batch-begin hook, in
    the training thread, waits at the gate, and in observed windows for the previous step. In
    tf-keras every hook runs in the training thread with the logs left on the device, and the
    hook brings them to the host where the plan says so. The model must have been built under
    the strategy's scope; `compile` is called here, also under that scope.
    """
    keras = keras_module()
    k = steps_per_execution
    clock = LoopClock(schedule, progress, trace, k)
    legacy = chosen_flavour() == "tf_keras"

    class _Steps(keras.callbacks.Callback):
        async_safe = True  # Keras 3: the batch-end hook in Keras' callback thread
        _supports_tf_logs = True  # tf-keras: the logs stay tensors unless the hook reads them

        def __init__(self, span: int) -> None:
            super().__init__()
            self.span = span  # which of the plan's iterators this fit call runs on
            self.first = clock.spans[span][0]  # the plan's step where it starts

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            step = self.first + batch
            if clock.wait_before(step):
                clock.wait_for(step)
            clock.begin(step)
            if step + k >= sum(clock.spans[self.span]):  # as sized at the first turn's gate
                self.model.stop_training = True  # fit ends after this call

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            step = self.first + batch - k + 1  # Keras passes the call's last step
            if not legacy:
                clock.end(step)
            elif clock.sync_after(step):
                float((logs or {}).get("loss", 0.0))
                clock.end(step)

    model.compile(optimizer=optimizer, loss=objectives.loss(), metrics=metrics,
                  steps_per_execution=k, jit_compile=jit_compile)
    keepers = []
    # One fit call, one iterator, per epoch; each is given the most steps its epoch may hold
    # (Schedule.longest) and stops at its end as the windows were sized.
    for span, (_, most) in enumerate(schedule.longest().iterator_spans()):
        first = clock.spans[span][0]
        if first:
            clock.wait_for(first)
            clock.open_turn(first)  # before fit makes its iterator: it fills in our turn
        keepers.append(_keep_iterator_callback())
        model.fit(**feed.kwargs(), epochs=1, steps_per_epoch=most, verbose=0,
                  callbacks=[keepers[-1], _Steps(span)])
    clock.finish()
    notes = []
    if k > 1:
        notes.append(f"fit callbacks fire once per {k} steps: each sample is a block time "
                     f"divided by {k}")
    result = clock.result(notes, [keeper.iterator for keeper in keepers])
    result.checkpointed = fit_checkpointed(model, feed.kwargs())

    def run_epoch(steps: int) -> Any:
        keeper = _keep_iterator_callback()
        model.fit(**feed.kwargs(), epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[keeper])
        iterator, keeper.iterator = keeper.iterator, None
        return iterator

    result.run_epoch = run_epoch
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


# Iterators of extra `fit` calls, kept alive until the worker's os._exit (see LoopResult.iterators).
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


def distributed_step(strategy: Any, replica_step: Callable[[Any, Any], Any]
                     ) -> Callable[[Any], Any]:
    """One step of every replica on a distributed batch, the loss summed over them (the
    tutorials' `strategy.run` and `strategy.reduce`): what the custom loops run, under their
    own `tf.function`."""
    import tensorflow as tf

    def one_step(batch: Any) -> Any:
        per_replica = strategy.run(replica_step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return one_step


def run_custom_loop(strategy: Any, model: Any, optimizer: Any, dist_dataset: Any, *,
                    objectives: Objectives, metrics: list[Any], global_batch: int,
                    precision: str, schedule: Schedule, steps_per_execution: int,
                    jit_compile: bool, progress: ProgressFn,
                    trace: TraceWindow | None = None) -> LoopResult:
    """`strategy.run` under `tf.function`, one distributed batch at a time taken in Python from
    the distributed dataset (the tutorials' `for batch in dist_dataset: train_step(batch)`);
    with steps_per_execution = k, k steps per call inside the function. The loss is reduced and
    brought to the host where the plan says (every observed step; an unobserved window's last)."""
    import tensorflow as tf

    optimizer, replica_step = replica_step_fn(strategy, model, optimizer, objectives, metrics,
                                              global_batch, precision, jit_compile)
    k = steps_per_execution
    one_step = distributed_step(strategy, replica_step)

    @tf.function
    def train_step(batch: Any) -> Any:
        return one_step(batch)

    @tf.function
    def train_block(iterator: Any) -> Any:
        loss = one_step(next(iterator))
        for _ in tf.range(k - 1):
            loss = one_step(next(iterator))
        return loss

    iterators: list[Any] = []

    def call() -> Any:
        return train_step(next(iterators[-1])) if k == 1 else train_block(iterators[-1])

    clock = LoopClock(schedule, progress, trace, k)
    step = 0
    while step < clock.total:  # the total grows where the first turn's gate sizes the windows
        if len(iterators) < len(clock.spans) and step == clock.spans[len(iterators)][0]:
            # a fresh iterator, as an epoch of the tutorials' loop starts one
            if step:
                clock.open_turn(step)  # before it starts filling: in our turn
            iterators.append(iter(dist_dataset))
        clock.begin(step)
        loss = call()
        if clock.sync_after(step):
            float(loss)  # the step is done when its loss is on the host
            clock.end(step)
        step += k
    clock.finish()
    result = clock.result([], iterators)
    result.checkpointed = loop_checkpointed(lambda _: float(call()), k,
                                             {"model": model, "optimizer": optimizer})

    def run_epoch(steps: int) -> Any:
        iterator = iter(dist_dataset)
        loss = None
        for _ in range(0, steps, k):
            loss = train_step(next(iterator)) if k == 1 else train_block(iterator)
        float(loss)
        return iterator

    result.run_epoch = run_epoch
    return result
