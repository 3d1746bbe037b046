"""What a training step optimises and reports: the loss, the optimizer and the metrics.

One definition serves every path: Keras `fit` compiles with `loss()`, the custom loops take the
same loss per example (`loss(per_example=True)`, averaged over the global batch) and update the
same metrics, the probe batch and the FLOP count use `loss()` too. Names resolve through the
catalogue the parent checked (`bench.scenario.keras_names`) to the classes of whichever Keras
flavour the variant runs; a user's "package.module:function" is imported here, in the worker.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.errors import WorkloadError
from bench.scenario.imports import call_with, import_object
from bench.scenario.keras_names import SHAPE_DEPENDENT_METRICS, lookup
from bench.training.flavour import keras as keras_module

BATCH_MEAN = "sum_over_batch_size"  # what fit reports: the mean over every element of the batch
PER_EXAMPLE = "none"


def _function_loss(fn: Callable[..., Any], args: dict[str, Any], reduction: str) -> Any:
    """A loss function (y_true, y_pred) -> per-example values, as a Keras Loss."""
    keras = keras_module()

    class FunctionLoss(keras.losses.Loss):
        def call(self, y_true: Any, y_pred: Any) -> Any:
            return fn(y_true, y_pred, **args)

    return FunctionLoss(reduction=reduction, name=getattr(fn, "__name__", "loss"))


def _takes_labels(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is itself a loss or metric function (y_true, y_pred), not a factory."""
    try:
        positional = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(positional) >= 2


@dataclass(frozen=True)
class LossSpec:
    """A loss the scenario named, a compiled model brought, or the labels' default."""

    name: str  # a Keras name or "package.module:function"
    args: dict[str, Any] = field(default_factory=dict)
    origin: str = "train.loss"  # where it came from, for the record
    compiled: Any = None  # a compiled model's own loss object or function, as given

    def make(self, reduction: str) -> Any:
        keras = keras_module()
        if self.compiled is not None and not isinstance(self.compiled, str):
            return _reduced(self.compiled, reduction)
        if ":" in self.name:
            found = import_object(self.name, "train.loss")
            if inspect.isclass(found):
                return found(**self.args, reduction=reduction)
            if _takes_labels(found):
                return _function_loss(found, self.args, reduction)
            return _reduced(call_with(found, self.args, f"train.loss '{self.name}'"), reduction)
        entry = lookup("loss", self.name)
        cls = getattr(keras.losses, entry.class_name, None)
        if cls is None:
            raise WorkloadError(f"train.loss '{self.name}': Keras {keras.__version__} has no "
                                f"{entry.class_name}")
        return cls(**self.args, reduction=reduction)

    def describe(self) -> dict[str, Any]:
        args = self.args
        if hasattr(self.compiled, "get_config"):  # a compiled Loss object: its own arguments
            hidden = ("name", "reduction", "dtype", "fn")
            args = {k: v for k, v in self.compiled.get_config().items() if k not in hidden}
        return {"name": self.name, "args": args, "from": self.origin}


def _reduced(loss: Any, reduction: str) -> Any:
    """A compiled model's loss (a Keras Loss, a function or a name) with `reduction`."""
    keras = keras_module()
    if isinstance(loss, keras.losses.Loss):
        config = {**loss.get_config(), "reduction": reduction}
        return type(loss).from_config(config)
    if isinstance(loss, str):
        return LossSpec(loss).make(reduction)
    if callable(loss):
        return _function_loss(loss, {}, reduction)
    raise WorkloadError(f"the compiled model's loss is a {type(loss).__name__}: bench trains "
                        "models with one loss (a Keras loss, a loss function or a name)")


def make_optimizer(name: str, args: dict[str, Any], learning_rate: float) -> Any:
    """A Keras optimizer by name or "package.module:function" (called with `learning_rate`
    when it asks for it), at `learning_rate`."""
    keras = keras_module()
    if ":" in name:
        found = import_object(name, "train.optimizer")
        optimizer = call_with(found, {**args, "learning_rate": learning_rate},
                              f"train.optimizer '{name}'")
        set_learning_rate(optimizer, learning_rate)
        return optimizer
    entry = lookup("optimizer", name)
    cls = getattr(keras.optimizers, entry.class_name, None)
    if cls is None:
        raise WorkloadError(f"train.optimizer '{name}': Keras {keras.__version__} has no "
                            f"{entry.class_name}")
    return cls(**{**args, "learning_rate": learning_rate})


def learning_rate_of(optimizer: Any) -> float | None:
    """An optimizer's learning rate as a number (None for a schedule); it may be a variable
    mirrored by a strategy, which reads its primary copy."""
    import tensorflow as tf

    value = optimizer.learning_rate
    if callable(value) and not hasattr(value, "assign"):
        return None
    return float(tf.convert_to_tensor(value).numpy())


def set_learning_rate(optimizer: Any, learning_rate: float) -> None:
    """Set an optimizer's learning rate (a plain value; a schedule is the user's to keep)."""
    if not hasattr(optimizer, "learning_rate"):
        raise WorkloadError(f"train.optimizer: {type(optimizer).__name__} is not a Keras "
                            "optimizer (it has no learning_rate)")
    current = optimizer.learning_rate
    if callable(current) and not hasattr(current, "assign"):
        return  # a LearningRateSchedule: its own rule
    optimizer.learning_rate = learning_rate


@dataclass(frozen=True)
class MetricSpec:
    """A metric by Keras name (or "package.module:function"), or a compiled model's object."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    compiled: Any = None

    def make(self, y_true: Any, y_pred: Any) -> Any:
        """The metric object; "accuracy" and "crossentropy" take their class from the shapes
        of the labels and the outputs, as Keras' compile picks it."""
        keras = keras_module()
        if self.compiled is not None and not isinstance(self.compiled, str):
            if isinstance(self.compiled, keras.metrics.Metric):
                return self.compiled
            return keras.metrics.MeanMetricWrapper(self.compiled,
                                                   name=getattr(self.compiled, "__name__", "metric"))
        if ":" in self.name:
            found = import_object(self.name, "train.metrics")
            if inspect.isclass(found):
                return found(**self.args)
            if _takes_labels(found):
                return keras.metrics.MeanMetricWrapper(found, name=self.name.rsplit(":")[-1],
                                                       **self.args)
            return call_with(found, self.args, f"train.metrics '{self.name}'")
        shaped = SHAPE_DEPENDENT_METRICS.get(self.name.lower())
        if shaped is not None:
            return _shape_dependent(shaped, self.name, y_true, y_pred)
        entry = lookup("metric", self.name)
        cls = getattr(keras.metrics, entry.class_name, None)
        if cls is None:
            raise WorkloadError(f"train.metrics '{self.name}': Keras {keras.__version__} has no "
                                f"{entry.class_name}")
        return cls(**self.args)


def _shape_dependent(kind: str, name: str, y_true: Any, y_pred: Any) -> Any:
    """Keras compile's rule (keras.src.trainers.compile_utils.is_binary_or_sparse_categorical):
    one output is binary; labels of lower rank, or of width 1 against wider outputs, are class
    ids; anything else is one-hot."""
    keras = keras_module()
    binary = y_pred.shape[-1] == 1
    sparse = len(y_true.shape) < len(y_pred.shape) or (y_true.shape[-1] == 1
                                                        and y_pred.shape[-1] > 1)
    prefix = "Binary" if binary else "SparseCategorical" if sparse else "Categorical"
    suffix = "Accuracy" if kind == "accuracy" else "Crossentropy"
    return getattr(keras.metrics, prefix + suffix)(name=name)


@dataclass(frozen=True)
class Objectives:
    """The loss and metrics of a variant's step, made fresh for each use."""

    loss_spec: LossSpec
    metric_specs: tuple[MetricSpec, ...] = ()

    def loss(self, per_example: bool = False) -> Any:
        """The loss, averaged over the batch as fit reports it, or per example (for
        `average_loss`)."""
        return self.loss_spec.make(PER_EXAMPLE if per_example else BATCH_MEAN)

    def metrics(self, batch: tuple[Any, Any], model: Any) -> list[Any]:
        """Metric objects for the labels and outputs of `batch` (create them under the
        strategy's scope)."""
        if not self.metric_specs:
            return []
        x, y = batch
        predicted = model(x, training=False)
        return [spec.make(y, predicted) for spec in self.metric_specs]

    def batch_loss(self, model: Any, batch: tuple[Any, Any]) -> float:
        """Mean loss of the model on one fixed batch: the same yardstick for every path, inside
        a strategy's scope or not (the per-example losses, averaged here: tf-keras refuses a
        batch-mean loss object inside a strategy's scope), on either Keras backend."""
        import numpy as np

        x, y = batch
        per_example = self.loss(per_example=True)(y, model(x, training=False))
        return float(np.mean(np.asarray(per_example, dtype=np.float32)))

    def from_logits(self) -> bool:
        """Whether the loss reads the model's outputs as logits (a binary prediction is then
        positive above 0, not above 0.5)."""
        try:
            return bool(self.loss().get_config().get("from_logits", False))
        except (AttributeError, NotImplementedError):
            return False

    def describe(self) -> dict[str, Any]:
        return {"loss": self.loss_spec.describe(),
                "metrics": [spec.name for spec in self.metric_specs]}


def results(metrics: list[Any]) -> dict[str, Any]:
    """Each metric's value after training, as numbers (a vector-valued metric as a list)."""
    import numpy as np

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: plain(v) for key, v in value.items()}
        array = np.asarray(value, dtype=float)
        return float(array) if array.ndim == 0 else array.tolist()

    return {metric.name: plain(metric.result()) for metric in metrics}


def metrics_count_once(strategy: Any) -> bool:
    """Whether a metric made under `strategy` counts each replica's update once: a Sum updated
    by every replica twice must read 2 × the replicas. Under CentralStorageStrategy with two or
    more replicas Keras 3's metrics do not: `KerasVariable.assign_add` is `assign(self +
    value)`, which the strategy's SUM aggregation sums over the replicas (2·v + Σx), so every
    step doubles the counts, the result is wrong, and nan once the counts overflow. The probe
    runs in this process only (a cluster's read of a metric is a collective of its tasks)."""
    replicas = int(strategy.num_replicas_in_sync)
    if replicas < 2:
        return True
    keras = keras_module()
    with strategy.scope():
        probe = keras.metrics.Sum(name="bench_probe")
    for _ in range(2):  # eagerly: a tf.function's tracing would cost more than the steps
        strategy.run(lambda: probe.update_state(1.0))
    return abs(float(probe.result()) - 2 * replicas) < 0.5


def kept_results(metrics: list[Any], strategy: Any, one_process: bool = True
                 ) -> tuple[dict[str, Any], list[str]]:
    """The metrics' values for the record, and notes: none where this strategy's metrics
    miscount (`metrics_count_once`, asked of a strategy of `one_process`), and a value that is
    not a finite number kept as null, each with a note saying why: no record holds a bare nan."""
    import math

    if not metrics:
        return {}, []
    if one_process and not metrics_count_once(strategy):
        keras = keras_module()
        return dict.fromkeys(m.name for m in metrics), [
            f"metrics not kept: under {type(strategy).__name__} with "
            f"{strategy.num_replicas_in_sync} replicas, Keras {keras.__version__}'s metrics add "
            "what they had counted again at every update, once per replica (their assign_add "
            "assigns the sum, and the strategy adds up the replicas' assignments), so their "
            "values would be wrong, and nan once the counts overflow"]
    found, notes = results(metrics), []
    for name, value in found.items():
        if isinstance(value, float) and not math.isfinite(value):
            found[name] = None
            notes.append(f"metric {name} read {value} after training: kept as null")
    return found, notes


def average_loss(per_example: Any, global_batch: int) -> Any:
    """The per-example losses of one replica's share, summed over the global batch the way fit's
    mean is: each example's loss is the mean over its own elements first."""
    import tensorflow as tf

    if per_example.shape.rank and per_example.shape.rank > 1:
        per_example = tf.reduce_mean(per_example, axis=list(range(1, per_example.shape.rank)))
    return tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)


# The loss every test and tool that trains bench's own classifiers uses when it names none.
CLASSIFIER = Objectives(LossSpec("sparse_categorical_crossentropy", {"from_logits": True},
                                 origin="bench's default for class ids"))
