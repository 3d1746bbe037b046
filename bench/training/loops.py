"""The two training paths, Keras `fit` and a custom loop, feeding one StepTimer.

Both run `total_steps` steps on an infinite dataset in one go; the caller slices the per-step
samples into warmup and timed windows afterwards, so both paths are timed the same way: from
the completion of one step (result on the host) to the completion of the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.protocol import ProgressFn
from bench.timing import StepTimer
from bench.training import precision as precision_policy
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


def make_optimizer(name: str, learning_rate: float) -> Any:
    import keras

    if name == "sgd":
        return keras.optimizers.SGD(learning_rate=learning_rate, momentum=0.9)
    return keras.optimizers.Adam(learning_rate=learning_rate)


def make_loss(reduction: str | None = "sum_over_batch_size") -> Any:
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


class _Clock:
    """Shared bookkeeping for both paths: lap the timer, stamp step 1, report progress sparingly,
    and account for its own time (`harness_s`) until the traced steps begin."""

    def __init__(self, total_steps: int, progress: ProgressFn, min_interval_s: float = 0.2):
        self.timer = StepTimer()
        self.total = total_steps
        self.progress = progress
        self.first_step_end = 0.0
        self.harness_s = 0.0
        self.accounting = True  # off once tracing starts: traced steps are not timed windows
        self._min_interval = min_interval_s
        self._last_report = 0.0

    def start(self) -> None:
        self.timer.start()

    def lap(self, steps: int, entered: float | None = None) -> None:
        """Close a block of `steps` steps; `entered` is when the caller's hook began, if any."""
        entered = entered if entered is not None else time.perf_counter()
        self.timer.lap(steps)
        now = time.time()
        if not self.first_step_end:
            self.first_step_end = now
        done = self.timer.steps
        if done >= self.total or now - self._last_report >= self._min_interval:
            self._last_report = now
            self.progress(done, self.total)
        self.account(entered)

    def account(self, entered: float) -> None:
        """Add the time since `entered` (a perf_counter reading) to bench's own per-step time."""
        if self.accounting:
            self.harness_s += time.perf_counter() - entered

    def result(self, notes: list[str], iterator: Any = None) -> LoopResult:
        return LoopResult(self.timer, self.first_step_end, notes, self.harness_s, iterator)


def run_fit(model: Any, optimizer: Any, dataset: Any, *, total_steps: int,
            steps_per_execution: int, jit_compile: bool, progress: ProgressFn,
            trace: TraceWindow | None = None) -> LoopResult:
    """Keras `fit`; per-step times come from batch callbacks (one per steps_per_execution block).

    One fit call runs warmup, timed and traced steps, so no epoch boundary falls inside the
    measurement. The model must have been built under the strategy's scope; `compile` is called
    here, also under that scope (Keras records the strategy at compile time).
    """
    import keras

    traced = trace.steps if trace else 0
    clock = _Clock(total_steps + traced, progress)
    last = total_steps + traced - steps_per_execution

    class _StepTiming(keras.callbacks.Callback):
        context: Any = None
        iterator: Any = None

        def on_train_begin(self, logs: Any = None) -> None:
            # Keras makes the iterator inside fit and destroys it when fit returns, paying the
            # wait that LoopResult.iterator describes. Keras hands
            # that iterator to `train_function` at every step: a one-shot wrapper keeps it for
            # LoopResult.iterator and puts the original back, so only the untimed first step
            # goes through the wrapper.
            model = self.model
            original = model.train_function

            def keep_iterator(iterator: Any) -> Any:
                self.iterator = iterator
                model.train_function = original
                return original(iterator)

            model.train_function = keep_iterator

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            entered = time.perf_counter()
            if batch == 0:
                clock.start()
            if trace and batch >= total_steps:
                if batch == total_steps:
                    clock.accounting = False
                    trace.start()
                self.context = trace.step(batch - total_steps)
                self.context.__enter__()
            clock.account(entered)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            # Keras hands synchronous callbacks host floats, so the step is really finished here.
            entered = time.perf_counter()
            if self.context is not None:
                self.context.__exit__(None, None, None)
                self.context = None
            clock.lap(steps_per_execution, entered)
            if trace and clock.timer.steps > last:
                trace.stop()

    model.compile(optimizer=optimizer, loss=make_loss(), steps_per_execution=steps_per_execution,
                  jit_compile=jit_compile)
    timing = _StepTiming()
    # shuffle=False: the pipeline shuffles itself (Keras ignores the flag for a tf.data input,
    # and warns when it is left at its default).
    model.fit(dataset, epochs=1, steps_per_epoch=total_steps + traced, verbose=0, shuffle=False,
              callbacks=[timing])
    notes = []
    if steps_per_execution > 1:
        notes.append(f"fit callbacks fire once per {steps_per_execution} steps: each sample is a "
                     f"block time divided by {steps_per_execution}")
    return clock.result(notes, timing.iterator)


def _replica_step(strategy: Any, model: Any, optimizer: Any, global_batch: int, precision: str
                  ) -> tuple[Any, Callable[[Any, Any], Any]]:
    """The per-replica training step shared by the custom loop and the parameter-server loop."""
    import tensorflow as tf

    optimizer = precision_policy.wrap_for_custom_loop(optimizer, precision)
    with strategy.scope():
        # Keras 3 under a strategy: the optimizer's slots must exist before the first replica
        # step, else the first strategy.run fails feeding a 'cond/.../Placeholder' tensor.
        optimizer.build(model.trainable_variables)
    per_example_loss = make_loss(reduction=None)
    scale = precision_policy.needs_loss_scaling(precision)

    def replica_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(per_example_loss(y, logits),
                                              global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss) if scale else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return optimizer, replica_step


def run_custom_loop(strategy: Any, model: Any, optimizer: Any, dist_dataset: Any, *,
                    global_batch: int, precision: str, total_steps: int,
                    steps_per_execution: int, jit_compile: bool,
                    progress: ProgressFn, trace: TraceWindow | None = None) -> LoopResult:
    """`strategy.run` under `tf.function` over a distributed dataset, loss reduced to the host."""
    import tensorflow as tf

    optimizer, replica_step = _replica_step(strategy, model, optimizer, global_batch, precision)

    def one_step(iterator: Any) -> Any:
        x, y = next(iterator)
        per_replica = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    @tf.function(jit_compile=jit_compile)
    def train_block(iterator: Any) -> Any:
        loss = one_step(iterator)
        if steps_per_execution > 1:  # decided at trace time: K=1 keeps a loop-free graph
            for _ in tf.range(steps_per_execution - 1):
                loss = one_step(iterator)
        return loss

    iterator = iter(dist_dataset)
    clock = _Clock(total_steps + (trace.steps if trace else 0), progress)
    clock.start()
    for _ in range(total_steps // steps_per_execution):
        float(train_block(iterator))  # the step is done when its loss is on the host
        clock.lap(steps_per_execution)
    if trace:
        clock.accounting = False
        trace.start()
        clock.start()  # profiler start-up is not part of the first traced step
        for i in range(trace.steps // steps_per_execution):
            with trace.step(i):
                float(train_block(iterator))
            clock.lap(steps_per_execution)
        trace.stop()
    return clock.result([], iterator)


def run_parameter_server_loop(strategy: Any, model: Any, optimizer: Any, dataset_fn: Any, *,
                              global_batch: int, precision: str, total_steps: int, block: int,
                              jit_compile: bool, progress: ProgressFn) -> LoopResult:
    """ClusterCoordinator loop: schedule `block` steps, join, time the block.

    Workers run scheduled steps asynchronously, so a single step has no meaningful completion
    time on the coordinator; each sample is a block's wall time divided by its steps.
    """
    import tensorflow as tf

    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    optimizer, replica_step = _replica_step(strategy, model, optimizer, global_batch, precision)

    @tf.function
    def per_worker_dataset() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))

    @tf.function(jit_compile=jit_compile)
    def train_step(it: Any) -> Any:
        x, y = next(it)
        return strategy.run(replica_step, args=(x, y))

    clock = _Clock(total_steps, progress)
    clock.start()
    for _ in range(total_steps // block):
        for _ in range(block):
            last = coordinator.schedule(train_step, args=(iterator,))
        coordinator.join()
        float(last.fetch())
        clock.lap(block)
    return clock.result([f"parameter server: steps are scheduled in blocks of {block} and each "
                         f"sample is a block's wall time divided by {block}"])


def train(variant: Any, strategy: Any, model: Any, optimizer: Any,
          dataset_fn: Callable[..., Any], *, global_batch: int, total_steps: int,
          steps_per_execution: int, jit_compile: bool, progress: ProgressFn,
          trace: TraceWindow | None = None) -> LoopResult:
    """Train through the variant's own path: Keras fit, the ClusterCoordinator loop, or the
    custom loop over the dataset distributed as the variant says. `dataset_fn(input_context)`
    builds the global-batch pipeline (or one input pipeline's shard of it)."""
    common = dict(total_steps=total_steps, jit_compile=jit_compile, progress=progress)
    if variant.api == "fit":
        with strategy.scope():
            return run_fit(model, optimizer, dataset_fn(), steps_per_execution=steps_per_execution,
                           trace=trace, **common)
    if variant.strategy == "parameter_server":
        return run_parameter_server_loop(strategy, model, optimizer, dataset_fn,
                                         global_batch=global_batch, precision=variant.precision,
                                         block=steps_per_execution, **common)
    if variant.distribute_dataset == "distribute_datasets_from_function":
        dist = strategy.distribute_datasets_from_function(dataset_fn)
    else:
        dist = strategy.experimental_distribute_dataset(dataset_fn())
    return run_custom_loop(strategy, model, optimizer, dist, global_batch=global_batch,
                           precision=variant.precision, steps_per_execution=steps_per_execution,
                           trace=trace, **common)


def batch_loss(model: Any, batch: tuple[Any, Any]) -> float:
    """Mean loss of the model on one fixed batch: the same yardstick for fit and the custom loop."""
    x, y = batch
    return float(make_loss()(y, model(x, training=False)))
