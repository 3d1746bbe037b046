"""ParameterServer training: a ClusterCoordinator loop and tf-keras `fit`, both timed in blocks.

Workers run scheduled steps asynchronously, so the coordinator sees no single step finish; it
schedules a block of steps, joins, and each sample is the block's wall time over its steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.protocol import ProgressFn
from bench.scenario.schema import Variant
from bench.timing import round_up
from bench.training.flavour import keras as keras_module
from bench.training.loop_clock import LoopClock, LoopResult
from bench.training.loops import fit_checkpointed, loop_checkpointed, replica_step_fn
from bench.training.objectives import Objectives
from bench.training.schedule import Schedule


def ps_block(variant: Variant) -> int:
    """ParameterServer steps are scheduled in blocks that give every worker steps to run
    concurrently (whole executions of steps_per_execution steps)."""
    k = variant.train.steps_per_execution
    return round_up(max(k, 2 * variant.workers), k)


def coordinator_blocks(strategy: Any, model: Any, optimizer: Any, dataset_fn: Any, *,
                       objectives: Objectives, metrics: list[Any], global_batch: int,
                       precision: str, jit_compile: bool = False) -> Callable[[int], float]:
    """A ClusterCoordinator over per-worker datasets: a function that schedules `n` steps,
    joins them, and returns the last step's loss."""
    import tensorflow as tf

    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    optimizer, replica_step = replica_step_fn(strategy, model, optimizer, objectives, metrics,
                                              global_batch, precision, jit_compile)

    @tf.function
    def per_worker_dataset() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))

    @tf.function
    def train_step(it: Any) -> Any:
        x, y = next(it)
        return strategy.run(replica_step, args=(x, y))

    def schedule_block(n: int) -> float:
        for _ in range(n):
            last = coordinator.schedule(train_step, args=(iterator,))
        coordinator.join()
        return float(last.fetch())

    return schedule_block


def run_parameter_server_loop(strategy: Any, model: Any, optimizer: Any, dataset_fn: Any, *,
                              objectives: Objectives, metrics: list[Any], global_batch: int,
                              precision: str, schedule: Schedule, block: int,
                              jit_compile: bool, progress: ProgressFn) -> LoopResult:
    """ClusterCoordinator loop: schedule `block` steps, join, time the block.

    Workers run scheduled steps asynchronously, so a single step has no meaningful completion
    time on the coordinator; each sample is a block's wall time divided by its steps.
    """
    schedule_block = coordinator_blocks(strategy, model, optimizer, dataset_fn,
                                        objectives=objectives, metrics=metrics,
                                        global_batch=global_batch, precision=precision,
                                        jit_compile=jit_compile)
    clock = LoopClock(schedule, progress, steps_per_call=block)
    for step in range(0, clock.total, block):
        clock.begin(step)
        schedule_block(block)  # joined, its last loss on the host
        clock.end(step)
    clock.finish()
    result = clock.result([f"parameter server: steps are scheduled in blocks of {block} and "
                           f"each sample is a block's wall time divided by {block}"])
    # the coordinator schedules the steps between two saves, joins, then saves
    result.checkpointed = loop_checkpointed(schedule_block, None,
                                             {"model": model, "optimizer": optimizer})
    return result


def run_parameter_server_fit(model: Any, optimizer: Any, dataset_fn: Any, *,
                             objectives: Objectives, metrics: list[Any], schedule: Schedule,
                             block: int, steps_per_execution: int, jit_compile: bool,
                             progress: ProgressFn) -> LoopResult:
    """tf-keras `fit` under ParameterServerStrategy, fed per worker through a DatasetCreator.

    Its steps run asynchronously on the workers; a batch hook would fetch every step's logs and
    so serialise them. So each epoch is a block of `block` steps, which tf-keras joins at the
    epoch's end, and the epoch hooks time it (as the ClusterCoordinator loop times its blocks).
    """
    keras = keras_module()
    clock = LoopClock(schedule, progress, steps_per_call=block)

    class _BlockTiming(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            clock.begin(epoch * block)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            clock.end(epoch * block)  # tf-keras has joined the epoch's steps

    model.compile(optimizer=optimizer, loss=objectives.loss(), metrics=metrics,
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    creator = keras.utils.experimental.DatasetCreator(dataset_fn)
    model.fit(creator, epochs=clock.total // block, steps_per_epoch=block, verbose=0,
              callbacks=[_BlockTiming()])
    clock.finish()
    result = clock.result([f"parameter server fit: epochs of {block} steps, joined at each "
                           f"epoch's end; each sample is an epoch's wall time divided by {block}"])
    result.checkpointed = fit_checkpointed(model, {"x": creator})
    return result
