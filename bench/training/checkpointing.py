"""What checkpoints cost a variant (`[measure] checkpoint = { every = K, keep = N }`).

After the timed windows the loop runs blocks of the same steps with saving on and off, in the
order on, off, off, on (repeated): the machine drifts, so on and off are measured alternately in
one process and a steady drift hits both alike; the ratio of the medians is the throughput cost.
Each save is timed as the training loop waits for it (Keras `ModelCheckpoint` for fit,
`tf.train.CheckpointManager` for the custom loops) and sized on disk. The pattern ends with a
saving block, so the last save holds the model's final weights: a fresh model built under the
same strategy restores it, timed, and must come back with exactly those weights.

MultiWorkerMirrored saves as TensorFlow requires: every worker saves (saving may run
collectives), the chief into the real folder, the others into `workertemp_<i>` folders they
delete at once (tf-keras' ModelCheckpoint does this itself for fit). ParameterServer: the
coordinator (the chief) saves, after joining the scheduled steps.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv
from bench.launch.cluster_plan import chief_and_index, read_tf_config
from bench.record.failure import extra_failed
from bench.scenario.schema import Variant
from bench.timing import round_up, summarize
from bench.training import precision
from bench.training.flavour import keras as keras_module

PREFIX = "ckpt-"  # every file a save writes starts with it (CheckpointManager's own prefix too)
FIT_FILE = PREFIX + "{epoch:03d}-{batch:06d}.weights.h5"


@dataclass(frozen=True)
class CheckpointPlan:
    every: int  # steps between saves (a multiple of the loop's block of steps)
    keep: int
    directory: Path  # where the chief's checkpoints go
    chief: bool
    task_index: int
    block_steps: int  # steps of one on or off block (a multiple of `every`)
    pattern: tuple[bool, ...]  # True: a block that saves
    notes: tuple[str, ...] = ()

    @property
    def write_dir(self) -> Path:
        """The chief writes the real checkpoint; another worker a temporary one it deletes."""
        return self.directory if self.chief else self.directory / f"workertemp_{self.task_index}"

    @property
    def saves_per_block(self) -> int:
        return self.block_steps // self.every


def abba(pairs: int) -> tuple[bool, ...]:
    """on, off, off, on — repeated until there are at least `pairs` on/off pairs."""
    return (True, False, False, True) * max(1, math.ceil(pairs / 2))


def plan_for(every: int, keep: int, window_steps: int, repeats: int, block: int,
             directory: Path) -> CheckpointPlan:
    """Blocks as long as a timed window (at least one save), saves on the loop's block bounds."""
    notes = []
    if every % block:
        notes.append(f"every = {every} rounded up to {round_up(every, block)}: the loop runs "
                     f"blocks of {block} steps and saves between them")
        every = round_up(every, block)
    chief, index = chief_and_index(read_tf_config())
    return CheckpointPlan(every, keep, directory, chief, index,
                          round_up(max(window_steps, every), every), abba(repeats), tuple(notes))


def _listing(directory: Path) -> dict[str, int]:
    try:
        return {e.name: e.stat().st_size for e in os.scandir(directory) if e.is_file()}
    except FileNotFoundError:
        return {}


def _save_name(file_name: str) -> str:
    """The save a file belongs to: `ckpt-3.index` and `ckpt-3.data-00000-of-00001` → `ckpt-3`."""
    return file_name.split(".", 1)[0]


def kept_saves(directory: Path) -> list[str]:
    """The saves in the folder, oldest first (names sort by step: zero-padded or numbered)."""
    names = {_save_name(n) for n in _listing(directory) if n.startswith(PREFIX)}
    return sorted(names, key=lambda n: [int(p) for p in n[len(PREFIX):].split("-")])


@dataclass
class SaveLog:
    """Each save's blocking time (ms) and, on the chief, the bytes it wrote."""

    plan: CheckpointPlan
    saves: list[dict[str, Any]] = field(default_factory=list)

    def timed(self, step: int, save: Callable[[], Any]) -> None:
        before = _listing(self.plan.directory) if self.plan.chief else {}
        started = time.perf_counter()
        save()
        ms = (time.perf_counter() - started) * 1e3
        written = None
        if self.plan.chief:
            after = _listing(self.plan.directory)
            written = sum(size for name, size in after.items()
                          if name.startswith(PREFIX) and before.get(name) != size)
        self.saves.append({"step": step, "ms": ms, "bytes": written})


def _prune(plan: CheckpointPlan) -> None:
    """ModelCheckpoint keeps every file: drop all but the newest `keep` saves (the chief's)."""
    if not plan.chief:
        return
    stale = set(kept_saves(plan.directory)[:-plan.keep])
    for name in _listing(plan.directory):
        if _save_name(name) in stale:
            (plan.directory / name).unlink()


def run_fit_blocks(model: Any, fit_kwargs: dict[str, Any], plan: CheckpointPlan, log: SaveLog,
                   callbacks: Sequence[Any] = ()) -> list[float]:
    """One `fit` call: an untimed first epoch (a new iterator fills its buffers), then one epoch
    per block, timed between the epoch hooks; a ModelCheckpoint saves in the "on" epochs only."""
    keras = keras_module()
    every = plan.every

    class TimedCheckpoint(keras.callbacks.ModelCheckpoint):
        active = False

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if not self.active:
                return
            if (batch + 1) % every:  # ModelCheckpoint only counts this step
                super().on_train_batch_end(batch, logs)
                return

            def save() -> None:
                super(TimedCheckpoint, self).on_train_batch_end(batch, logs)
                _prune(plan)

            log.timed(batch + 1, save)

    saver = TimedCheckpoint(str(plan.directory / FIT_FILE), save_weights_only=True,
                            save_freq=every, verbose=0)

    class BlockClock(keras.callbacks.Callback):
        started = 0.0
        seconds: list[float] = []

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            saver.active = epoch > 0 and plan.pattern[epoch - 1]
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            float((logs or {}).get("loss", 0.0))
            if epoch > 0:
                self.seconds.append(time.perf_counter() - self.started)

    clock = BlockClock()
    clock.seconds = []
    model.fit(**fit_kwargs, epochs=1 + len(plan.pattern), steps_per_epoch=plan.block_steps,
              verbose=0, callbacks=[*callbacks, clock, saver])
    return clock.seconds


def manager_saver(objects: dict[str, Any], plan: CheckpointPlan) -> Callable[[], None]:
    """A CheckpointManager save of `objects`; another worker's temporary copy is deleted."""
    import tensorflow as tf

    manager = tf.train.CheckpointManager(tf.train.Checkpoint(**objects), str(plan.write_dir),
                                         max_to_keep=plan.keep if plan.chief else 1,
                                         checkpoint_name=PREFIX.rstrip("-"))

    def save() -> None:
        manager.save()
        if not plan.chief:
            tf.io.gfile.rmtree(str(plan.write_dir))

    return save


def run_loop_blocks(run_steps: Callable[[int], None], chunk: int | None,
                    save: Callable[[], None], plan: CheckpointPlan, log: SaveLog) -> list[float]:
    """Custom loops: each block runs its steps `chunk` at a time (each finished on the host
    before the next; None: `plan.every` at a time, as the parameter-server loop schedules them
    and joins), saving after every `plan.every` steps in the "on" blocks."""
    chunk = chunk or plan.every
    seconds = []
    for on in plan.pattern:
        started = time.perf_counter()
        for done in range(chunk, plan.block_steps + chunk, chunk):
            run_steps(chunk)
            if on and done % plan.every == 0:
                log.timed(done, save)
        seconds.append(time.perf_counter() - started)
    return seconds


# (plan, log) -> seconds of each block of plan.pattern: what a training path offers (LoopResult)
BlockRunner = Callable[[CheckpointPlan, SaveLog], list[float]]


def restore_fresh(strategy: Any, build: Callable[[], tuple[Any, Any]], fit: bool,
                  plan: CheckpointPlan, saved: list[Any]) -> dict[str, Any]:
    """Build a fresh model and optimizer under the strategy, restore the newest save, timed,
    and compare the restored weights with the trained model's (`saved`)."""
    import numpy as np
    import tensorflow as tf

    with strategy.scope():
        model, optimizer = build()
        if not fit:
            optimizer.build(model.trainable_variables)  # slots exist: restored, not deferred
    newest = kept_saves(plan.directory)[-1]
    started = time.perf_counter()
    if fit:
        model.load_weights(str(plan.directory / f"{newest}.weights.h5"))
    else:
        status = tf.train.Checkpoint(model=model, optimizer=optimizer).restore(
            str(plan.directory / newest))
        status.assert_existing_objects_matched()
    ms = (time.perf_counter() - started) * 1e3
    restored = model.get_weights()
    diffs = [float(np.max(np.abs(a - b))) if a.size else 0.0
             for a, b in zip(restored, saved, strict=True)]
    return {"ms": ms, "save": newest, "weights_match": all(d == 0.0 for d in diffs),
            "max_abs_diff": max(diffs, default=0.0)}


def summary(plan: CheckpointPlan, log: SaveLog, seconds: list[float], restore: dict[str, Any],
            global_batch: int, api: str) -> dict[str, Any]:
    on = [s for s, saving in zip(seconds, plan.pattern, strict=True) if saving]
    off = [s for s, saving in zip(seconds, plan.pattern, strict=True) if not saving]
    examples = plan.block_steps * global_batch
    sizes = [s["bytes"] for s in log.saves if s["bytes"] is not None]
    notes = list(plan.notes)
    if api == "ModelCheckpoint":
        notes.append("fit: the on and off blocks are epochs of one fit call with the checkpoint "
                     "callback attached throughout, so both sync every step; what a batch hook "
                     "itself costs is the observer ratio")
    return {
        "status": "ok", "api": api, "every": plan.every, "keep": plan.keep,
        "dir": str(plan.directory), "chief": plan.chief, "block_steps": plan.block_steps,
        "pattern": ["on" if p else "off" for p in plan.pattern], "on_s": on, "off_s": off,
        "throughput_on": examples / statistics.median(on),
        "throughput_off": examples / statistics.median(off),
        # examples/s with saving ÷ without, from the medians of the alternating blocks
        "throughput_ratio": statistics.median(off) / statistics.median(on),
        # the share of the saving blocks' time the loop spent waiting for saves: measured inside
        # the blocks, so it does not carry their block-to-block noise as the ratio does
        "blocked_share": sum(s["ms"] for s in log.saves) / 1e3 / sum(on),
        "saves": log.saves, "save_count": len(log.saves),
        "expected_saves": plan.saves_per_block * sum(plan.pattern),
        "save_ms": summarize([s["ms"] for s in log.saves]).to_dict(),
        "size_bytes": statistics.median(sizes) if sizes else None,
        "kept": kept_saves(plan.directory), "restore": restore, "notes": notes,
    }


def cost(variant: Variant, checkpointed: BlockRunner | None, strategy: Any, model: Any,
         build: Callable[[], tuple[Any, Any]], global_batch: int, block: int
         ) -> dict[str, Any] | None:
    """The variant's checkpoint cost (measure.checkpoint) after its timed windows, or None when
    it saves no checkpoints. `build` makes a model and an optimizer (called under the strategy's
    scope); `block` is the steps the loop runs between two host syncs."""
    cfg, m = variant.measure.checkpoint, variant.measure
    if cfg is None:
        return None
    if checkpointed is None:
        return {"status": "skipped", "reason": "this training path cannot save checkpoints"}
    where = ChildEnv.from_env().checkpoint_dir
    directory = Path(where) if where else Path(tempfile.mkdtemp(prefix="bench-checkpoints-"))
    # where the loop can save: between its blocks of steps (the parameter server's coordinator
    # schedules any number of steps before it joins and saves)
    coordinated = variant.kind.coordinated
    between = variant.train.steps_per_execution if coordinated else block
    plan = plan_for(cfg.every, cfg.keep, round_up(m.steps, block), m.repeats, between, directory)
    log = SaveLog(plan)
    fit = variant.api == "fit"

    def fresh() -> tuple[Any, Any]:
        """A model and optimizer as the path trains them (a custom loop's optimizer is wrapped
        for loss scaling where the precision needs it)."""
        new_model, optimizer = build()
        return new_model, optimizer if fit else precision.wrap_for_custom_loop(
            optimizer, variant.precision)

    try:
        seconds = checkpointed(plan, log)
        restore = restore_fresh(strategy, fresh, fit, plan, model.get_weights())
        result = summary(plan, log, seconds, restore, global_batch,
                         "ModelCheckpoint" if fit else "CheckpointManager")
        if fit and coordinated:
            result["notes"].append(
                "parameter-server fit: the coordinator's batch hooks run while the workers go on "
                "with steps already scheduled, so a save's time on the coordinator overlaps "
                "training and blocked % overstates the cost; the on/off ratio is the cost")
        return result
    except Exception as exc:  # a bonus figure, like the observer's: never the variant's fate
        return extra_failed(exc)
    finally:
        if not where:  # a worker started without a run directory: nothing to keep
            shutil.rmtree(directory, ignore_errors=True)
