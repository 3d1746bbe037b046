"""Judging a model on a held-out split: its accuracy (counted through the variant's strategy),
its mean loss, or a metric of its own; what check.accuracy and `[target]` read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Judge(Protocol):
    """How a backend reads a model's figures over one pass of a held-out dataset, each as a
    function of the dataset built once and called at every evaluation."""

    def accuracy(self, model: Any, threshold: float) -> Callable[[Any], tuple[int, int]]: ...

    def mean_loss(self, model: Any, per_example_loss: Any) -> Callable[[Any], float]: ...

    def metric_value(self, model: Any, metric: Any) -> Callable[[Any], float]: ...


@dataclass(frozen=True)
class StrategyJudge:
    """TensorFlow's: accuracy counted through `strategy` (None: in this process alone), the
    loss and a metric traced once."""

    strategy: Any | None

    def accuracy(self, model: Any, threshold: float) -> Callable[[Any], tuple[int, int]]:
        return accuracy_counter(self.strategy, model, threshold)

    def mean_loss(self, model: Any, per_example_loss: Any) -> Callable[[Any], float]:
        return mean_loss(model, per_example_loss)

    def metric_value(self, model: Any, metric: Any) -> Callable[[Any], float]:
        return metric_value(model, metric)


def accuracy_counts(strategy: Any, model: Any, dataset: Any, threshold: float = 0.5) -> tuple[int, int]:
    """(correct, examples) over one pass of `dataset`, each batch split over the replicas: the
    most likely class against class ids or one-hot rows, or a single output above `threshold`
    against 0/1 targets."""
    return accuracy_counter(strategy, model, threshold)(dataset)


def accuracy_counter(strategy: Any | None, model: Any, threshold: float = 0.5
                     ) -> Callable[[Any], tuple[int, int]]:
    """`accuracy_counts` of `model` as a function of the dataset, traced once for every call
    (a model judged at every evaluation of a training to target). With no strategy the whole
    dataset is counted in this process alone, with no collective and no strategy entered (a
    cluster's chief judging for its peers, inside or outside the strategy's scope)."""
    import tensorflow as tf

    def classes(values: Any, binary: bool) -> Any:
        if binary:
            return tf.cast(tf.reshape(values, [-1]) > threshold, tf.int32)
        return tf.argmax(values, axis=-1, output_type=tf.int32)

    def replica_counts(x: Any, y: Any) -> tuple[Any, Any]:
        out = model(x, training=False)
        binary = out.shape[-1] == 1
        predicted = classes(out, binary)
        if binary:
            truth = tf.cast(tf.reshape(y, [-1]) > 0.5, tf.int32)
        elif y.shape.rank == out.shape.rank:  # one-hot rows
            truth = tf.argmax(y, axis=-1, output_type=tf.int32)
        else:
            truth = tf.cast(tf.reshape(y, [-1]), tf.int32)
        hits = tf.cast(tf.equal(predicted, truth), tf.int64)
        return tf.reduce_sum(hits), tf.size(truth, out_type=tf.int64)

    @tf.function(reduce_retracing=True)
    def counts(x: Any, y: Any) -> tuple[Any, Any]:
        if strategy is None:
            return replica_counts(x, y)
        hits, seen = strategy.run(replica_counts, args=(x, y))
        total = tf.distribute.ReduceOp.SUM
        return strategy.reduce(total, hits, axis=None), strategy.reduce(total, seen, axis=None)

    distributed: dict[int, Any] = {}  # a dataset judged again is distributed once

    def count(dataset: Any) -> tuple[int, int]:
        if id(dataset) not in distributed:
            distributed.clear()
            distributed[id(dataset)] = (dataset, dataset if strategy is None else
                                        strategy.experimental_distribute_dataset(dataset))
        correct = examples = 0
        for x, y in distributed[id(dataset)][1]:
            hits, seen = counts(x, y)
            correct, examples = correct + hits, examples + seen  # on the device until the end
        correct, examples = int(correct), int(examples)
        if not examples:
            raise ValueError("the evaluation split yielded no examples")
        return correct, examples

    return count


def mean_loss(model: Any, per_example_loss: Any) -> Callable[[Any], float]:
    """The mean per-example loss over one pass of a dataset (every example weighs the same, the
    last partial batch too), as a function of the dataset traced once."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def batch_sum(x: Any, y: Any) -> tuple[Any, Any]:
        losses = tf.cast(per_example_loss(y, model(x, training=False)), tf.float64)
        return tf.reduce_sum(losses), tf.cast(tf.size(losses), tf.float64)

    def mean(dataset: Any) -> float:
        total = count = 0.0
        for x, y in dataset:
            s, n = batch_sum(x, y)
            total, count = total + float(s), count + float(n)
        if not count:
            raise ValueError("the evaluation split yielded no examples")
        return total / count

    return mean


def metric_value(model: Any, metric: Any) -> Callable[[Any], float]:
    """A Keras metric's result over one pass of a dataset, from a reset state, as a function
    of the dataset traced once."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def update(x: Any, y: Any) -> None:
        metric.update_state(y, model(x, training=False))

    def value(dataset: Any) -> float:
        metric.reset_state()
        for x, y in dataset:
            update(x, y)
        return float(metric.result())

    return value
