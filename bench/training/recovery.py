"""Training that can lose a worker and go on: the worker side of a `[fault]` variant.

Each task appends what it does to its events file (`ChildEnv.fault_events`, JSON lines with
wall-clock times): `ready` (strategy built), `restored` (the step it resumes from, and the loss of the fixed
probe batch right after the restore), every `step` (its time and loss), every `backup` (with the
probe loss at that point), and the `error` that stopped it. The supervisor
(bench.launch.recovery_timeline) builds the recovery timeline from these files and its own fault
and restart times.

MultiWorkerMirrored backs up every K steps to `ChildEnv.backup_dir`, shared by every attempt: the
custom loop through `tf.train.CheckpointManager` (the chief writes there, the other workers to
temporary paths, as TensorFlow requires: every worker takes part in a save), tf-keras `fit`
through `keras.callbacks.BackupAndRestore(save_freq=K)`. A restarted cluster restores from there
and trains to the end of the variant's steps. The data iterator is not part of the backup: a
restored run starts its pipeline from the beginning (as a user's BackupAndRestore run does).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv
from bench.launch.cluster_plan import is_chief
from bench.protocol import EventLog, ProgressFn
from bench.record.failure import informative_line
from bench.record.measured import Loss, Measurement, Samples, StepTime, Throughput, Timing
from bench.scenario.schema import Variant
from bench.timing import Phases, summarize, throughput
from bench.training.flavour import keras as keras_module
from bench.training.loop_choice import distribute
from bench.training.loops import distributed_step, replica_step_fn
from bench.training.ps_loops import coordinator_blocks, ps_block
from bench.training.workload import Workload


def _write_dir(base: Path, strategy: Any) -> tuple[Path, bool]:
    """Where this task saves: the chief into `base`, every other worker into a temporary
    directory of its own (deleted after each save), as TensorFlow's multi-worker guide does."""
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    task_id = getattr(resolver, "task_id", 0)
    jobs = resolver.cluster_spec().jobs if task_type is not None else ()
    if is_chief(task_type, task_id, jobs):
        return base, True
    return base.parent / f"{base.name}.tmp-{task_type}-{task_id}", False


class _Tracker:
    """What the two training paths share: step events, progress and backup events."""

    def __init__(self, events: EventLog, total: int, backup_every: int, progress: ProgressFn,
                 probe: Callable[[], float]) -> None:
        self.events, self.total, self.every = events, total, backup_every
        self.progress, self.probe = progress, probe
        self.samples: list[float] = []
        self.first_step_end = 0.0

    def restored(self, step: int, started: float) -> None:
        self.events.write("restored", step=step, probe_loss=self.probe(), restore_s=(
            time.time() - started))

    def step(self, done: int, seconds: float, loss: float) -> None:
        if not self.samples:
            self.first_step_end = time.perf_counter()
        self.samples.append(seconds)
        self.events.write("step", step=done, dt=seconds, loss=loss)
        self.progress(done, self.total)

    def backed_up(self, done: int, save_s: float | None) -> None:
        self.events.write("backup", step=done, save_s=save_s, probe_loss=self.probe())

    def due(self, done: int) -> bool:
        return done % self.every == 0 and done < self.total


def train_custom_loop(strategy: Any, workload: Workload, metrics: list[Any], dist_dataset: Any,
                      tracker: _Tracker, *, global_batch: int, precision: str,
                      backup_dir: Path) -> None:
    """The custom loop's step (bench.training.loops), resumed from the newest backup in
    `backup_dir` if there is one."""
    import tensorflow as tf

    started = time.time()
    model = workload.model
    optimizer, replica_step = replica_step_fn(strategy, model, workload.optimizer,
                                              workload.objectives, metrics, global_batch,
                                              precision)
    train_step = tf.function(distributed_step(strategy, replica_step))
    step_var = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
    write_dir, is_chief = _write_dir(backup_dir, strategy)
    manager = tf.train.CheckpointManager(checkpoint, str(write_dir), max_to_keep=1)
    if latest := tf.train.latest_checkpoint(str(backup_dir)):
        checkpoint.restore(latest).assert_existing_objects_matched()
    restored = int(step_var.numpy())
    tracker.restored(restored, started)

    iterator = iter(dist_dataset)
    for done in range(restored + 1, tracker.total + 1):
        began = time.perf_counter()
        loss = float(train_step(next(iterator)))  # done when its loss is on the host
        tracker.step(done, time.perf_counter() - began, loss)
        if tracker.due(done):
            began = time.perf_counter()
            step_var.assign(done)
            manager.save(checkpoint_number=done)  # every worker saves: a collective step
            if not is_chief:
                shutil.rmtree(write_dir, ignore_errors=True)
            tracker.backed_up(done, time.perf_counter() - began)
    _KEPT.append(iterator)


def train_fit(workload: Workload, metrics: list[Any], dataset: Any, tracker: _Tracker, *,
              backup_dir: Path) -> None:
    """tf-keras `fit` with `BackupAndRestore(save_freq=K)`: one epoch of every step, resumed by
    the callback at the batch after the newest backup."""
    keras = keras_module()
    started = time.time()

    class Observe(keras.callbacks.Callback):
        began = 0.0
        resumed = False

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if not self.resumed:  # BackupAndRestore has restored by now: `batch` resumes
                self.resumed = True
                tracker.restored(int(batch), started)
            self.began = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            loss = float((logs or {}).get("loss", float("nan")))
            done = int(batch) + 1
            tracker.step(done, time.perf_counter() - self.began, loss)
            if tracker.due(done):  # BackupAndRestore (earlier in the list) has just saved
                tracker.backed_up(done, None)

    model = workload.model
    model.compile(optimizer=workload.optimizer, loss=workload.objectives.loss(), metrics=metrics)
    backup = keras.callbacks.BackupAndRestore(str(backup_dir), save_freq=tracker.every,
                                              delete_checkpoint=False)
    model.fit(dataset, epochs=1, steps_per_epoch=tracker.total, verbose=0,
              callbacks=[backup, Observe()])


def train_coordinator(strategy: Any, workload: Workload, metrics: list[Any], dataset_fn: Any,
                      tracker: _Tracker, *, global_batch: int, precision: str,
                      block: int) -> None:
    """ParameterServer: the ClusterCoordinator schedules blocks of `block` steps and joins
    them; a lost worker's closures are re-scheduled by the coordinator itself, so nothing is
    restored (the variables live on the ps tasks). Each event is a block, its time divided by
    `block`."""
    started = time.time()
    schedule_block = coordinator_blocks(strategy, workload.model, workload.optimizer, dataset_fn,
                                        objectives=workload.objectives, metrics=metrics,
                                        global_batch=global_batch, precision=precision)
    tracker.restored(0, started)
    for done in range(block, tracker.total + 1, block):
        began = time.perf_counter()
        loss = schedule_block(block)
        tracker.step(done, (time.perf_counter() - began) / block, loss)


# Iterators kept alive until the worker's exit (see bench.training.loop_clock.LoopResult.iterators).
_KEPT: list[Any] = []


def train(variant: Variant, strategy: Any, workload: Workload, metrics: list[Any],
          dataset_fn: Callable[..., Any], *, global_batch: int, total_steps: int,
          probe_batch: Any, progress: ProgressFn, events: EventLog,
          block: int = 1) -> list[float]:
    """Train the variant's steps through its API, backing up every `fault.backup_every` steps;
    return this attempt's per-step times. An error (a lost peer) is logged, then raised."""
    backup_dir = Path(ChildEnv.from_env().backup_dir or "backup")
    tracker = _Tracker(events, total_steps, variant.fault.backup_every, progress,
                       lambda: workload.objectives.batch_loss(workload.model, probe_batch))
    try:
        with strategy.scope():
            if variant.kind.coordinated:
                train_coordinator(strategy, workload, metrics, dataset_fn, tracker,
                                  global_batch=global_batch, precision=variant.precision,
                                  block=block)
            elif variant.api == "fit":
                train_fit(workload, metrics, dataset_fn(), tracker, backup_dir=backup_dir)
            else:
                train_custom_loop(strategy, workload, metrics,
                                  distribute(strategy, variant, dataset_fn), tracker,
                                  global_batch=global_batch, precision=variant.precision,
                                  backup_dir=backup_dir)
    except Exception as exc:
        events.write("error", type=type(exc).__name__, message=informative_line(str(exc)))
        raise
    return tracker.samples


def measure(variant: Variant, strategy: Any, workload: Workload, metrics: list[Any],
            dataset: Any, progress: ProgressFn, described: dict[str, Any],
            phases: Phases, probe_batch: Any, initial_loss: float, spawn_time: float, *,
            global_batch: int, batch_notes: list[str]) -> dict[str, Any]:
    """A `[fault]` variant's attempt: train from the newest backup to the end of its steps.
    Its figures are this attempt's steps after its own warmup, the record's sections by name,
    typed; the supervisor adds the recovery timeline across attempts. `described`: the
    record's sections of what ran (bench.worker)."""
    events = EventLog()
    events.write("ready")
    m = variant.measure
    with phases("loop"):
        samples = train(variant, strategy, workload, metrics, dataset,
                        global_batch=global_batch, total_steps=variant.total_steps,
                        probe_batch=probe_batch, progress=progress, events=events,
                        block=ps_block(variant))
    with phases("final_loss"):
        final_loss = workload.objectives.batch_loss(workload.model, probe_batch)
    warmup_n = min(m.warmup_steps, max(0, len(samples) - 2))
    warmup, timed = samples[:warmup_n], samples[warmup_n:]
    step_stats = summarize(timed)
    notes = [f"[fault]: step time and throughput are this attempt's {len(timed)} steps after "
             f"its {warmup_n} warmup steps; the recovery section has the series across the "
             "fault"]
    return {
        **described,
        "timing": Timing(import_s=phases.seconds["import"], build_s=phases.seconds["build"],
                         first_step_s=samples[0] if samples else None,
                         warmup_s=sum(warmup), warmup_steps=warmup_n,
                         timed_steps=len(timed), steps_per_sample=1, repeats=1,
                         phases=phases.seconds, start_s=phases.seconds["start"],
                         spawn_time=spawn_time),
        "step_time": StepTime(**step_stats.to_dict()),
        "throughput": Throughput(**throughput([timed], global_batch).to_dict()),
        # one window, timed step by step: the headline's clock is its steps' times
        "measurement": Measurement(interleaved=False, window_steps=len(timed),
                                   window_s=[sum(timed)], observed_window_s=[]),
        "samples": Samples(warmup=warmup, timed=[timed], traced=[]),
        "loss": Loss(initial=initial_loss, final=final_loss),
        "notes": notes + batch_notes,
    }
