"""`[target]` in the worker: train a fresh model per seed until the target or the budget.

After its throughput measurement, in its own process, a variant trains a fresh copy of its
workload per seed through its own strategy, API, batch rule, learning rate (scaled, with its
warmup), precision and pipeline, evaluating on the held-out split every `every_examples`
examples: the same points of training for every global batch. Training time and evaluation
time are clocked apart. `fit` is one call whose epochs are the evaluation intervals (Keras keeps
one iterator over the infinite pipeline across them, as a user's `fit(steps_per_epoch=...)`
does); the custom loop is the tutorials' `strategy.run` under `tf.function`, one iterator.
Across a cluster's tasks (who judges, and how the workers agree): bench.training.to_target_cluster.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.errors import one_line
from bench.record.failure import extra_failed
from bench.record.target import CurvePoint, Spread, Target, TargetSeed, spread
from bench.scenario.schema import Variant
from bench.scenario.target_rules import budget_examples
from bench.training import held_out, loop_choice, loops, to_target_cluster, workload
from bench.training.flavour import chosen as chosen_flavour
from bench.training.flavour import keras as keras_module


@dataclass
class SeedRun:
    """One seed's clocks and curve while it trains."""

    target: Any
    interval_steps: int
    global_batch: int
    budget: int
    max_seconds: float
    evaluate: Callable[[], float]
    finite: Callable[[], bool]  # whether the model's weights are all finite numbers
    train_s: float = 0.0
    eval_s: float = 0.0
    first_step_s: float | None = None
    pipeline_s: float = 0.0  # making the training pipeline, its cache filled: before the clock
    examples: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    reached_at: CurvePoint | None = None
    stopped_by: str | None = None

    def after_interval(self, seconds: float, loss: float | None) -> bool:
        """Count an interval of training, evaluate, and say whether training goes on. A loss
        or a weight that is no finite number is divergence (a diverged model's accuracy is a
        number still: its argmax of NaNs is class 0)."""
        self.train_s += seconds
        self.examples += self.interval_steps * self.global_batch
        if (loss is not None and not math.isfinite(loss)) or not self.finite():
            self.curve.append(CurvePoint(examples=self.examples, seconds=self.train_s,
                                         value=None))
            self.stopped_by = "diverged"
            return False
        started = time.perf_counter()
        value = self.evaluate()
        self.eval_s += time.perf_counter() - started
        point = CurvePoint(examples=self.examples, seconds=self.train_s,
                           value=value if math.isfinite(value) else None)
        self.curve.append(point)
        if not math.isfinite(value):
            self.stopped_by = "diverged"
            return False
        if self.target.reached(value):
            self.reached_at = point
            return False
        if self.examples + self.interval_steps * self.global_batch > self.budget:
            self.stopped_by = "max_examples"
            return False
        if self.train_s >= self.max_seconds:
            self.stopped_by = "max_seconds"
            return False
        return True

    def train_intervals(self, step: Callable[[], Any],
                        before_judging: Callable[[], None] = lambda: None) -> None:
        """A custom loop's intervals: `step()` runs one step and returns its loss, which is
        read once an interval (and after the first step, the first step's time); then
        `before_judging` (outside the training clock) and the evaluation, until it says stop."""
        going = True
        while going:
            started = time.perf_counter()
            loss = step()
            if self.first_step_s is None:
                float(loss)
                self.first_step_s = time.perf_counter() - started
            for _ in range(self.interval_steps - 1):
                loss = step()
            value = float(loss)
            seconds = time.perf_counter() - started
            before_judging()
            going = self.after_interval(seconds, value)

    def intervals(self) -> int:
        return max(1, self.budget // (self.interval_steps * self.global_batch))

    def record(self, seed: int, train_examples: int | None, wall_s: float) -> TargetSeed:
        values = [p.value for p in self.curve if p.value is not None]
        best = (max if self.target.reached_when == "above" else min)(values) if values else None
        at = self.reached_at
        status = "reached" if at else "diverged" if self.stopped_by == "diverged" else \
            "not_reached"
        return TargetSeed(
            seed=seed, status=status, examples=at.examples if at else None,
            epochs=at.examples / train_examples if at and train_examples else None,
            seconds=at.seconds if at else None, first_step_s=self.first_step_s,
            pipeline_s=self.pipeline_s, eval_s=self.eval_s, wall_s=wall_s, best=best,
            stopped_by=None if at else self.stopped_by,
            curve=self.curve)


def training_pipeline(run: SeedRun, loaded: Any, cfg: Any, global_batch: int
                      ) -> Callable[..., Any]:
    """The seed's training pipeline as its loop makes it (with the input context where a
    strategy gives one), a cached pipeline's first pass read before it is returned: the
    training clock then times passes over the cache, as the headline (warmed past a pass) does,
    and the time it took is `run.pipeline_s`, apart."""
    from bench.data import sources as data_mod

    def dataset(input_context: Any = None) -> Any:
        started = time.perf_counter()
        made = data_mod.make_dataset(loaded, cfg, global_batch, input_context, fill_cache=True)
        run.pipeline_s += time.perf_counter() - started
        return made
    return dataset


def all_finite(model: Any) -> bool:
    """Whether every trainable weight of `model` is a finite number."""
    import numpy as np

    return all(bool(np.isfinite(np.asarray(w)).all()) for w in model.get_weights())


def seeded(variant: Variant, index: int) -> tuple[int, Any]:
    """The `index`-th seed and its data table (the shuffle's seed), Keras' generators (the
    initial weights) seeded with it."""
    seed = variant.data.seed + index
    keras_module().utils.set_random_seed(seed)
    return seed, variant.data.model_copy(update={"seed": seed})


def prepare_seed(variant: Variant, built: workload.Workload, probe: Any, seed: int,
                 global_batch: int) -> list[Any]:
    """A seed's fresh copy made ready to train, inside its backend's scope where it has one:
    its start (`start_weights`), its learning-rate warmup; returns its compiled metrics."""
    start_weights(variant.target, built.model, probe, seed)
    metrics = built.objectives.metrics(probe, built.model)
    if variant.lr_warmup_examples:
        linear_warmup(built.optimizer, variant.learning_rate / variant.lr_factor,
                      variant.learning_rate, max(1, variant.lr_warmup_examples // global_batch))
    return metrics


def start_weights(target: Any, model: Any, probe: Any, seed: int) -> None:
    """`[target] start = "aligned"`: the seed's weights drawn again from NumPy
    (bench.checks.alignment), the model built by a first call; "keras" keeps its own."""
    if target.start != "aligned":
        return
    from bench.checks.alignment import align_weights

    model(probe[0], training=False)
    align_weights(model, seed)


def linear_warmup(optimizer: Any, start: float, end: float, steps: int) -> None:
    """Ramp the optimizer's learning rate linearly from `start` to `end` over `steps` steps,
    then hold it (Goyal et al. 2017's gradual warmup)."""
    keras = keras_module()

    legacy = chosen_flavour() == "tf_keras"  # tf-keras has no keras.ops; TensorFlow's only

    class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step: Any) -> Any:
            if legacy:
                import tensorflow as tf

                done = tf.minimum(tf.cast(step, tf.float32) / float(steps), 1.0)
            else:  # keras.ops: the step is the backend's own (a JAX tracer under jit)
                done = keras.ops.minimum(keras.ops.cast(step, "float32") / float(steps), 1.0)
            return start + (end - start) * done

        def get_config(self) -> dict[str, Any]:
            return {"start": start, "end": end, "steps": steps}

    optimizer.learning_rate = LinearWarmup()


def train_fit(variant: Variant, run: SeedRun, built: workload.Workload, metrics: list[Any],
              dataset_fn: Callable[..., Any], arrays: tuple[Any, Any] | None, *,
              jit_compile: bool) -> None:
    """Keras fit, one call, an epoch per evaluation interval, stopped by the evaluation; on any
    backend (JAX's compiles its step: `jit_compile` True)."""
    keras = keras_module()
    legacy = chosen_flavour() == "tf_keras"

    class Evaluate(keras.callbacks.Callback):
        async_safe = True  # Keras 3: its batch-end hook runs in Keras' callback thread
        _supports_tf_logs = True
        started = 0.0

        def on_train_begin(self, logs: Any = None) -> None:
            self.started = time.perf_counter()

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if epoch:
                self.started = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            # fit's logged loss is a running mean, which some strategies' metrics miscount
            # (objectives.metrics_count_once): the weights tell divergence instead
            if not run.after_interval(time.perf_counter() - self.started, None):
                self.model.stop_training = True

    class EvaluateAndFirstStep(Evaluate):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if run.first_step_s is None:  # the first step's logs are on the host
                if legacy:
                    float((logs or {}).get("loss", 0.0))
                run.first_step_s = time.perf_counter() - self.started

    model = built.model
    model.compile(optimizer=built.optimizer, loss=built.objectives.loss(), metrics=metrics,
                  jit_compile=jit_compile)
    creator = to_target_cluster.fit_input(variant, dataset_fn)
    feed = (loops.FitInput(creator) if creator is not None
            else loops.FitInput(*arrays, batch_size=run.global_batch) if arrays is not None
            else loops.FitInput(dataset_fn()))
    # tf-keras refuses batch-level callbacks under ParameterServer: no first step there
    callback = Evaluate() if variant.kind.coordinated else EvaluateAndFirstStep()
    model.fit(**feed.kwargs(), epochs=run.intervals(), steps_per_epoch=run.interval_steps,
              verbose=0, callbacks=[callback])


def _custom_loop(variant: Variant, strategy: Any, run: SeedRun, built: workload.Workload,
                 metrics: list[Any], dataset_fn: Callable[..., Any]) -> None:
    """The custom loop's step (bench.training.loops), over one iterator of the dataset
    distributed the variant's way; the loss read once an interval."""
    import tensorflow as tf

    _, replica_step = loops.replica_step_fn(strategy, built.model, built.optimizer,
                                            built.objectives, metrics, run.global_batch,
                                            variant.precision, variant.train.jit_compile)
    train_step = tf.function(loops.distributed_step(strategy, replica_step))
    iterator = iter(loop_choice.distribute(strategy, variant, dataset_fn))
    run.train_intervals(lambda: train_step(next(iterator)))


def evaluator(variant: Variant, judge: held_out.Judge, built: workload.Workload, held: Any,
              probe: Any) -> Callable[[], float]:
    """What reads the target's metric of the model being trained, on the held-out split, by
    `judge` (TensorFlow's through a strategy, or in this process alone: held_out.StrategyJudge;
    JAX's: bench.backends.jax_target)."""
    from bench.data import sources as data_mod

    metric = variant.target.metric
    # an evaluation batch of about 1,024, a multiple of the global batch (it splits evenly over
    # the replicas): the same examples judged, in fewer calls
    batch = variant.global_batch * max(1, round(1024 / variant.global_batch))

    # cached: its map runs once per example, not at every evaluation (0.3 s for 10,000)
    once = data_mod.make_dataset(held, variant.data, batch, train=False).cache()

    def dataset() -> Any:  # one pass each time it is iterated
        return once

    if metric == "accuracy":
        count = judge.accuracy(built.model, 0.0 if built.objectives.from_logits() else 0.5)

        def accuracy() -> float:
            correct, total = count(dataset())
            return correct / total
        return accuracy
    if metric == "loss":
        mean = judge.mean_loss(built.model, built.objectives.loss(per_example=True))
        return lambda: mean(dataset())
    chosen = [m for m in built.objectives.metrics(probe, built.model) if m.name == metric]
    if not chosen:
        raise ValueError(f"target.metric '{metric}': the model computes no metric of that name")
    value = judge.metric_value(built.model, chosen[0])
    return lambda: value(dataset())


def settings(variant: Variant, loaded: Any, *, global_batch: int, headline: float | None
             ) -> dict[str, Any]:
    """The target section's settings, whatever came of the training: the target, its budget,
    the batch and learning rate it trains at, the headline it is projected from."""
    target = variant.target
    assert target is not None
    from bench.data import sources as data_mod

    size = data_mod.train_examples(loaded)
    return {"metric": target.metric, "value": target.value, "direction": target.reached_when,
            "eval_split": target.eval_split, "every_examples": target.every_examples,
            "budget_examples": budget_examples(target, size) or target.max_examples or 0,
            "max_seconds": target.max_seconds, "global_batch": global_batch,
            "learning_rate": variant.learning_rate,
            "warmup_examples": variant.lr_warmup_examples, "train_examples": size,
            "headline": headline}


def section(variant: Variant, loaded: Any,
            train: Callable[[Callable[[int], tuple[Any, Any]] | None], Target]) -> Target | None:
    """The record's `target` section (None without `[target]`): `train` (a backend's
    `train_seeds`, given the NumPy feed's arrays where the variant has one) trains each seed. A
    target that cannot train is the section's one-line reason, never the variant's failure:
    its throughput stands."""
    if variant.target is None:
        return None
    from bench.data import sources as data_mod

    arrays = ((lambda n: data_mod.numpy_feed(loaded, n)) if variant.data.feed == "numpy"
              else None)
    try:
        return train(arrays)
    except Exception as exc:  # a target that cannot train is reported, not fatal
        return Target(status="failed", reason=one_line(extra_failed(exc)["error"]))


def train_seeds(variant: Variant, strategy: Any, loaded: Any, *, global_batch: int,
                headline: float | None, arrays: Callable[[int], tuple[Any, Any]] | None
                ) -> Target:
    """Train each seed to the target under TensorFlow's `strategy`."""
    from bench.data import sources as data_mod

    target = variant.target
    assert target is not None
    common = settings(variant, loaded, global_batch=global_batch, headline=headline)
    size, budget = common["train_examples"], common["budget_examples"]
    judges = to_target_cluster.judges_here(variant)  # in a cluster: its chief or coordinator
    # built on every task alike: one that fails fails on all of them, before any collective
    held = data_mod.load(variant.data, split=target.eval_split)
    judged_by = to_target_cluster.eval_strategy(variant, strategy)
    make_run = to_target_cluster.seed_run(variant, strategy, SeedRun)
    inputs = data_mod.model_inputs(loaded, variant.data)
    seeds = []
    for i in range(target.seeds):
        began = time.perf_counter()
        seed, data_cfg = seeded(variant, i)
        probe = next(iter(data_mod.make_dataset(loaded, data_cfg, global_batch).take(1)))
        with strategy.scope():
            built = workload.build(variant, inputs)
            metrics = prepare_seed(variant, built, probe, seed, global_batch)
        run = make_run(target, target.every_examples // global_batch, global_batch, budget,
                       target.max_seconds,
                       evaluator(variant, held_out.StrategyJudge(judged_by), built, held,
                                 probe),
                       lambda model=built.model: all_finite(model))
        print(f"target seed {seed}: built in {time.perf_counter() - began:.2f} s", flush=True)
        training = training_pipeline(run, loaded, data_cfg, global_batch)
        if variant.api == "fit":
            with strategy.scope():
                train_fit(variant, run, built, metrics, training,
                          arrays(size or budget) if arrays is not None else None,
                          jit_compile=variant.train.jit_compile)
        elif variant.kind.coordinated:
            to_target_cluster.coordinated_loop(variant, strategy, run, built, metrics, training)
        else:
            _custom_loop(variant, strategy, run, built, metrics, training)
        print(f"target seed {seed}: trained {run.examples} examples in "
              f"{time.perf_counter() - began:.2f} s", flush=True)
        seeds.append(run.record(seed, size, time.perf_counter() - began))
    if not judges:
        return Target(status="skipped", reason=to_target_cluster.FOLLOWER_REASON, **common)
    return summarize(seeds, held.source, common)


def summarize(seeds: list[TargetSeed], eval_source: str, common: dict[str, Any]) -> Target:
    """The section: each seed and the figures across them, with the projection."""
    done = [s for s in seeds if s.status == "reached"]
    examples = spread([s.examples or 0 for s in done], len(seeds))
    seconds = spread([s.seconds or 0.0 for s in done], len(seeds))
    epochs = (spread([s.epochs for s in done if s.epochs is not None], len(seeds))
              if common["train_examples"] else Spread())
    headline = common["headline"]
    projected = (examples.median / headline if examples.median and headline else None)
    steady = None
    if seconds.median is not None:
        firsts = [s.first_step_s for s in done if s.first_step_s is not None]
        steady = max(0.0, seconds.median - (sorted(firsts)[len(firsts) // 2] if firsts else 0.0))
    return Target(status="ok", eval_source=eval_source, seeds=seeds, reached=len(done),
                  examples=examples, epochs=epochs, seconds=seconds, projected_s=projected,
                  measured_steady_s=steady,
                  agreement=steady / projected if steady is not None and projected else None,
                  **common)
