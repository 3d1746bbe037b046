"""The custom training loop on JAX, as the Keras JAX guide writes one ("Writing a training loop
from scratch in JAX"): `model.stateless_call` inside a loss function, `jax.value_and_grad`,
`optimizer.stateless_apply`, the whole step under `jax.jit`, the state carried in Python; each
batch taken from the scenario's tf.data pipeline (or, with feed = "numpy", sliced from its
arrays) and placed by the distribution's data layout.

It runs on the same plan and clock as every other loop (bench.training.loop_clock): the loss is
brought to the host only where the plan says (every observed step; an unobserved window's last).
Keras `fit` needs no loop of its own: bench.training.loops.run_fit runs it on any backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench.backends.jax_distribution import Placement
from bench.protocol import ProgressFn
from bench.scenario.schema import Variant
from bench.training import loops
from bench.training import precision as precision_policy
from bench.training.loop_clock import LoopClock, LoopResult
from bench.training.objectives import Objectives
from bench.training.schedule import Schedule
from bench.training.tracing import TraceWindow
from bench.training.workload import Workload

# The loop's state: the trainable, non-trainable, optimizer and metric variables' values
State = tuple[list[Any], list[Any], list[Any], list[list[Any]]]


def train_step_fn(model: Any, optimizer: Any, objectives: Objectives,
                  metrics: Sequence[Any] = (), scale_loss: bool = False) -> Callable[..., Any]:
    """The guide's jitted step: (state, x, y) -> (loss, state), the state being the trainable,
    non-trainable, optimizer and metric variables' values (`initial_state`); the metrics
    updated as the guide updates them (`stateless_update_state`), as fit updates them. With
    `scale_loss` (mixed_float16; the optimizer a LossScaleOptimizer) the gradients are taken of
    the loss times the optimizer's current scale, read from the state as Keras' own JAX trainer
    reads it, and the optimizer unscales them, skips a step whose gradients overflowed and
    moves the scale; the loss returned is the unscaled one."""
    import jax
    import keras

    loss_fn = objectives.loss()

    def compute_loss(trainable: Any, non_trainable: Any, optimizer_vars: Any, x: Any,
                     y: Any) -> Any:
        predicted, non_trainable = model.stateless_call(trainable, non_trainable, x,
                                                        training=True)
        loss = loss_fn(y, predicted)
        scaled = loss
        if scale_loss:
            mapping = list(zip(optimizer.variables, optimizer_vars, strict=True))
            with keras.StatelessScope(state_mapping=mapping):
                scaled = optimizer.scale_loss(loss)
        return scaled, (loss, predicted, non_trainable)

    grad_fn = jax.value_and_grad(compute_loss, has_aux=True)

    @jax.jit
    def train_step(state: Any, x: Any, y: Any) -> Any:
        trainable, non_trainable, optimizer_vars, metric_vars = state
        (_, (loss, predicted, non_trainable)), grads = grad_fn(
            trainable, non_trainable, optimizer_vars, x, y)
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        metric_vars = [metric.stateless_update_state(values, y, predicted)
                       for metric, values in zip(metrics, metric_vars, strict=True)]
        return loss, (trainable, non_trainable, optimizer_vars, metric_vars)

    return train_step


def initial_state(model: Any, optimizer: Any, metrics: Sequence[Any] = ()) -> State:
    """The variables' values the loop starts from (the optimizer built first, as the guide
    does, so its slots exist)."""
    if not optimizer.built:
        optimizer.build(model.trainable_variables)
    return ([v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            [v.value for v in optimizer.variables],
            [[v.value for v in metric.variables] for metric in metrics])


def write_back(model: Any, optimizer: Any, metrics: Sequence[Any], state: State) -> None:
    """Put the loop's state back into the model, optimizer and metric variables (the guide's
    last step), so the final loss, the metrics' results and the checks read the trained
    model."""
    trainable, non_trainable, optimizer_vars, metric_vars = state
    pairs = [*zip(model.trainable_variables, trainable, strict=True),
             *zip(model.non_trainable_variables, non_trainable, strict=True),
             *zip(optimizer.variables, optimizer_vars, strict=True),
             *((v, value) for metric, values in zip(metrics, metric_vars, strict=True)
               for v, value in zip(metric.variables, values, strict=True))]
    for variable, value in pairs:
        variable.assign(value)


def array_batches(arrays: tuple[Any, Any], batch: int) -> Iterator[tuple[Any, Any]]:
    """feed = "numpy": consecutive slices of `batch` examples of the in-memory arrays (features
    an array or a dict of them), in their order, as a plain NumPy loop takes them, from the
    start again after the last whole batch (bench.data.examples.fit_arrays sizes them to hold
    the whole plan, so the loop's timed steps never wrap)."""
    import jax

    x, y = arrays
    count = len(y) // batch
    if count == 0:
        raise ValueError(f"feed = \"numpy\" holds {len(y)} examples, fewer than one batch "
                         f"of {batch}")
    index = 0
    while True:
        rows = slice(index * batch, (index + 1) * batch)
        yield jax.tree_util.tree_map(lambda values, rows=rows: values[rows], x), y[rows]
        index = (index + 1) % count


def placed_batches(batches: Iterator[tuple[Any, Any]], placement: Placement
                   ) -> Iterator[tuple[Any, Any]]:
    """Host batches (features an array or a dict of them), each array put where the
    distribution's data layout says (split over the batch axis under DataParallel), as Keras'
    own JAX trainer places them."""
    import jax

    if placement.distribution is None:
        yield from batches
        return

    def put(values: Any) -> Any:
        return jax.device_put(values, placement.data_layout(values.shape))

    for x, y in batches:
        yield jax.tree_util.tree_map(put, x), put(y)


def run_custom_loop(model: Any, optimizer: Any,
                    batches_fn: Callable[[], Iterator[tuple[Any, Any]]], placement: Placement,
                    *, objectives: Objectives, metrics: Sequence[Any], precision: str,
                    schedule: Schedule,
                    progress: ProgressFn, trace: TraceWindow | None = None) -> LoopResult:
    """The guide's loop on bench's plan: a fresh iterator of host batches (`batches_fn()`: the
    tf.data pipeline's, or the arrays') where the plan starts one, the gate before each turn,
    the loss on the host where the plan syncs. Under mixed_float16 the optimizer is wrapped in a
    LossScaleOptimizer and the loss scaled, as bench's TensorFlow custom loop does."""
    optimizer = precision_policy.wrap_for_custom_loop(optimizer, precision)
    train_step = train_step_fn(model, optimizer, objectives, metrics,
                               precision_policy.needs_loss_scaling(precision))
    state = initial_state(model, optimizer, metrics)
    clock = LoopClock(schedule, progress, trace, 1)
    iterators: list[Iterator[tuple[Any, Any]]] = []
    step = 0
    while step < clock.total:  # the total grows where the first turn's gate sizes the windows
        if len(iterators) < len(clock.spans) and step == clock.spans[len(iterators)][0]:
            if step:
                clock.open_turn(step)  # before the new iterator starts filling: in our turn
            iterators.append(placed_batches(batches_fn(), placement))
        clock.begin(step)
        x, y = next(iterators[-1])
        loss, state = train_step(state, x, y)
        if clock.sync_after(step):
            float(loss)  # the step is done when its loss is on the host
            clock.end(step)
        step += 1
    clock.finish()
    write_back(model, optimizer, metrics, state)
    result = clock.result(precision_policy.loss_scale_notes(optimizer), iterators)

    def run_epoch(steps: int) -> Any:
        nonlocal state
        batches = placed_batches(batches_fn(), placement)
        loss = None
        for _ in range(steps):
            x, y = next(batches)
            loss, state = train_step(state, x, y)
        float(loss)
        write_back(model, optimizer, metrics, state)
        return batches

    result.run_epoch = run_epoch
    return result


def train(variant: Variant, built: Workload, metrics: list[Any], dataset_fn: Callable[..., Any],
          placement: Placement, *, schedule: Schedule, global_batch: int, progress: ProgressFn,
          trace: TraceWindow | None = None, arrays: tuple[Any, Any] | None = None,
          steps_per_execution: int = 1) -> LoopResult:
    """Train through the variant's own path: Keras fit (bench's own fit path, which runs on any
    backend; from `arrays` with feed = "numpy", else the pipeline; `steps_per_execution` steps
    a call) or the guide's loop (a step a call). The distribution is the process's
    (bench.backends.jax_distribution.build set it)."""
    if variant.api == "fit":
        feed = (loops.FitInput(*arrays, batch_size=global_batch) if arrays is not None
                else loops.FitInput(dataset_fn()))
        return loops.run_fit(built.model, built.optimizer, feed, objectives=built.objectives,
                             metrics=metrics, schedule=schedule,
                             steps_per_execution=steps_per_execution,
                             jit_compile=True, progress=progress, trace=trace)
    batches = ((lambda: array_batches(arrays, global_batch)) if arrays is not None
               else (lambda: dataset_fn().as_numpy_iterator()))
    return run_custom_loop(built.model, built.optimizer, batches, placement,
                           objectives=built.objectives, metrics=metrics,
                           precision=variant.precision, schedule=schedule, progress=progress,
                           trace=trace)
