"""`[target]` across a cluster's tasks: MultiWorkerMirrored and ParameterServer train to target.

MultiWorkerMirrored: every worker runs the training to target, its shard of each global batch in
lock-step (every step is an all-reduce). The chief alone judges the held-out split, whole, in
its own process (no collective in the evaluation); then one all-reduce per interval hands its
verdict (go on, or stop: reached, diverged, out of budget) to every worker, so all of them step
the same number of steps and stop together. The others wait in that all-reduce while the chief
evaluates. Only the chief's record carries the section.

ParameterServer: the coordinator (the chief, the only task that runs bench's worker) schedules
each interval's steps on the workers with the ClusterCoordinator, joins them, and judges the
held-out split itself, reading the variables from the ps tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.scenario.schema import Variant
from bench.training import ps_loops, workload
from bench.training.traced_turn import multi_worker_chief

FOLLOWER_REASON = ("evaluated on the chief: this worker trained in lock-step and took the "
                   "chief's verdict at every evaluation")


def judges_here(variant: Variant) -> bool:
    """Whether this process evaluates the held-out split: a single process, a ParameterServer
    coordinator, or a MultiWorkerMirrored chief."""
    return multi_worker_chief(variant) is not False


def eval_strategy(variant: Variant, strategy: Any) -> Any | None:
    """What the held-out split is judged through: the variant's strategy in one process; in a
    cluster none, so the judging task reads the whole split alone, with no collective its peers
    would have to join and no strategy entered (tf-keras runs `fit`'s callbacks inside the
    variant's scope, where no other strategy may be entered)."""
    return None if variant.is_cluster else strategy


def agreement(strategy: Any) -> Callable[[bool], bool]:
    """A MultiWorkerMirrored all-reduce that gives every worker the chief's flag: only replica 0,
    which is on the chief, contributes it."""
    import tensorflow as tf

    @tf.function
    def agree(flag: Any) -> Any:
        def contribute() -> Any:
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return flag * tf.cast(tf.equal(replica, 0), tf.float32)

        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(contribute), axis=None)

    return lambda going: bool(agree(tf.constant(1.0 if going else 0.0)) > 0.5)


def seed_run(variant: Variant, strategy: Any, run_type: type) -> Callable[..., Any]:
    """The SeedRun (bench.training.to_target) each seed of this task trains with: the plain one
    in one process and on a ParameterServer coordinator; on a MultiWorkerMirrored worker one
    that takes the chief's verdict after every interval."""
    if variant.kind.coordinated or not variant.is_cluster:
        return run_type
    agree = agreement(strategy)
    chief = judges_here(variant)

    class AgreedRun(run_type):  # type: ignore[misc, valid-type]
        def after_interval(self, seconds: float, loss: float | None) -> bool:
            if chief:
                try:
                    going = super().after_interval(seconds, loss)
                except BaseException:
                    agree(False)  # the peers stop with it instead of waiting for its verdict
                    raise
                return agree(going)
            self.train_s += seconds  # a follower counts the interval, the chief judges it
            self.examples += self.interval_steps * self.global_batch
            return agree(True)

    return AgreedRun


def coordinated_loop(variant: Variant, strategy: Any, run: Any, built: workload.Workload,
                     metrics: list[Any], dataset_fn: Callable[..., Any]) -> None:
    """The ClusterCoordinator loop of the timed path (bench.training.ps_loops): each interval's
    steps scheduled on the workers and joined, the last step's loss read, then the coordinator
    evaluates."""
    import time

    schedule_block = ps_loops.coordinator_blocks(
        strategy, built.model, built.optimizer, dataset_fn, objectives=built.objectives,
        metrics=metrics, global_batch=run.global_batch, precision=variant.precision,
        jit_compile=variant.train.jit_compile)
    going = True
    while going:
        started = time.perf_counter()
        rest = run.interval_steps
        if run.first_step_s is None:
            loss = schedule_block(1)
            run.first_step_s = time.perf_counter() - started
            rest -= 1
        if rest:
            loss = schedule_block(rest)
        going = run.after_interval(time.perf_counter() - started, loss)


def fit_input(variant: Variant, dataset_fn: Callable[..., Any]) -> Any:
    """`fit`'s input on a ParameterServer coordinator: a DatasetCreator that builds each
    worker's pipeline (as the timed path feeds tf-keras); None elsewhere."""
    if not variant.kind.coordinated:
        return None
    from bench.training.flavour import keras as keras_module

    return keras_module().utils.experimental.DatasetCreator(dataset_fn)
