"""`[target]` on JAX: each seed trains a fresh copy of the workload under the process's
keras.distribution until the target or the budget, as bench.training.to_target trains
TensorFlow's. The same SeedRun (evaluation intervals in examples seen, clocks, curve), the same
section and projection; Keras `fit` through the same callback path, and the custom loop as the
Keras JAX guide writes it (bench.backends.jax_loops' step), one iterator. The held-out split is
judged on NumPy batches by the model under its distribution (JaxJudge)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.backends import jax_loops, tf_ops
from bench.backends.jax_distribution import Placement
from bench.record.target import Target
from bench.scenario.schema import Variant
from bench.training import precision as precision_policy
from bench.training import to_target, workload
from bench.training.to_target import SeedRun


class JaxJudge:
    """A model's figures over one pass of a held-out tf.data split, read as NumPy batches and
    run through the model eagerly (the batches unsplit: a split's last batch need not divide
    over the replicas)."""

    def accuracy(self, model: Any, threshold: float) -> Callable[[Any], tuple[int, int]]:
        return lambda dataset: accuracy_counts(model, dataset, threshold)

    def mean_loss(self, model: Any, per_example_loss: Any) -> Callable[[Any], float]:
        import numpy as np

        def mean(dataset: Any) -> float:
            total = count = 0.0
            for x, y in dataset.as_numpy_iterator():
                losses = np.asarray(per_example_loss(y, model(x, training=False)), np.float64)
                total, count = total + float(losses.sum()), count + losses.size
            if not count:
                raise ValueError("the evaluation split yielded no examples")
            return total / count
        return mean

    def metric_value(self, model: Any, metric: Any) -> Callable[[Any], float]:
        def value(dataset: Any) -> float:
            metric.reset_state()
            for x, y in dataset.as_numpy_iterator():
                metric.update_state(y, model(x, training=False))
            return float(metric.result())
        return value


def accuracy_counts(model: Any, dataset: Any, threshold: float) -> tuple[int, int]:
    """(correct, examples) over one pass of `dataset`, as bench.training.held_out counts them:
    the most likely class, or a single output above `threshold`."""
    import numpy as np

    correct = examples = 0
    for x, y in dataset.as_numpy_iterator():
        out = np.asarray(model(x, training=False))
        truth = np.asarray(y)
        if out.shape[-1] == 1:
            predicted = out.reshape(-1) > threshold
            truth = truth.reshape(-1) > 0.5
        else:
            predicted = out.argmax(axis=-1)
            truth = truth.argmax(axis=-1) if truth.ndim == out.ndim else truth.reshape(-1)
        correct += int(np.sum(predicted.reshape(-1) == truth.reshape(-1)))
        examples += int(truth.size)
    if not examples:
        raise ValueError("the evaluation split yielded no examples")
    return correct, examples


def train_seeds(variant: Variant, placement: Placement, loaded: Any, *, global_batch: int,
                headline: float | None, arrays: Callable[[int], tuple[Any, Any]] | None
                ) -> Target:
    """Train each seed to the target under the process's distribution (to_target.section
    makes the record's section of it)."""
    from bench.data import sources as data_mod

    target = variant.target
    assert target is not None
    common = to_target.settings(variant, loaded, global_batch=global_batch, headline=headline)
    size, budget = common["train_examples"], common["budget_examples"]
    held = data_mod.load(variant.data, split=target.eval_split)
    inputs = data_mod.model_inputs(loaded, variant.data)
    seeds = []
    for i in range(target.seeds):
        began = time.perf_counter()
        seed, data_cfg = to_target.seeded(variant, i)
        probe = next(iter(data_mod.make_dataset(loaded, data_cfg, global_batch).take(1)
                          .as_numpy_iterator()))
        built = tf_ops.checked(lambda: workload.build(variant, inputs), variant.model.name)
        metrics = to_target.prepare_seed(variant, built, probe, seed, global_batch)
        run = SeedRun(target, target.every_examples // global_batch, global_batch, budget,
                      target.max_seconds,
                      to_target.evaluator(variant, JaxJudge(), built, held, probe),
                      lambda model=built.model: to_target.all_finite(model))
        print(f"target seed {seed}: built in {time.perf_counter() - began:.2f} s", flush=True)
        feed = arrays(size or budget) if arrays is not None else None
        training = to_target.training_pipeline(run, loaded, data_cfg, global_batch)
        if variant.api == "fit":
            to_target.train_fit(variant, run, built, metrics, training, feed, jit_compile=True)
        else:
            batches = (jax_loops.array_batches(feed, global_batch) if feed is not None
                       else training().as_numpy_iterator())
            _custom_loop(variant, placement, run, built, metrics, batches)
        print(f"target seed {seed}: trained {run.examples} examples in "
              f"{time.perf_counter() - began:.2f} s", flush=True)
        seeds.append(run.record(seed, size, time.perf_counter() - began))
    return to_target.summarize(seeds, held.source, common)


def _custom_loop(variant: Variant, placement: Placement, run: SeedRun,
                 built: workload.Workload, metrics: list[Any],
                 host_batches: Any) -> None:
    """The guide's jitted step over one iterator of placed batches, the loss read once an
    interval; the state written back into the model before each evaluation (which reads the
    model's variables), outside the training clock."""
    optimizer = precision_policy.wrap_for_custom_loop(built.optimizer, variant.precision)
    train_step = jax_loops.train_step_fn(built.model, optimizer, built.objectives, metrics,
                                         precision_policy.needs_loss_scaling(variant.precision))
    state = jax_loops.initial_state(built.model, optimizer, metrics)
    batches = jax_loops.placed_batches(host_batches, placement)

    def step() -> Any:
        nonlocal state
        loss, state = train_step(state, *next(batches))
        return loss

    run.train_intervals(step, lambda: jax_loops.write_back(built.model, optimizer, metrics,
                                                           state))
