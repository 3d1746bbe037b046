"""A variant's workload: the model with the loss, optimizer and metrics it trains with.

The model comes from its builder (`bench.training.models`). When a user's builder returns a
compiled model, bench trains with that model's loss, optimizer and metrics; whatever `[train]`
names explicitly wins. Otherwise the loss is the labels' own (class ids: sparse categorical
crossentropy), from logits unless the model ends in a softmax or sigmoid, the optimizer Adam,
and no metric. The learning rate follows bench's rule either way: the scenario's base learning
rate, or else the compiled optimizer's own, times the batch rule's factor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.data.sources import ModelInputs
from bench.errors import WorkloadError, one_line
from bench.record.failure import informative_line
from bench.scenario.keras_names import DEFAULT_LOSS
from bench.scenario.schema import Variant
from bench.training import models
from bench.training.objectives import (
    LossSpec,
    MetricSpec,
    Objectives,
    learning_rate_of,
    make_optimizer,
    set_learning_rate,
)

_PROBABILITIES = ("softmax", "sigmoid")
DEFAULT_OPTIMIZER = "adam"


@dataclass
class Workload:
    model: Any
    optimizer: Any
    objectives: Objectives
    compiled: bool  # the builder returned a compiled model
    optimizer_origin: str

    def describe(self) -> dict[str, Any]:
        """The record's `workload` section: what really trained."""
        return {"model_class": type(self.model).__name__, "compiled_by_builder": self.compiled,
                **self.objectives.describe(),
                "optimizer": {"class": type(self.optimizer).__name__,
                              "learning_rate": learning_rate_of(self.optimizer),
                              "from": self.optimizer_origin}}


def compile_settings(model: Any) -> dict[str, Any] | None:
    """The arguments a builder compiled its model with (None: not compiled). Keras 3 and tf-keras
    both keep them as given in `_compile_config` (the raw objects, not their serialisation)."""
    if not (getattr(model, "compiled", False) or getattr(model, "_is_compiled", False)):
        return None
    config = getattr(getattr(model, "_compile_config", None), "config", None)
    return dict(config) if config else {"optimizer": model.optimizer, "loss": model.loss}


def ends_in_probabilities(model: Any) -> bool:
    """Whether the model's last layer is a softmax or a sigmoid (then it emits no logits)."""
    last = model.layers[-1] if getattr(model, "layers", None) else None
    activation = getattr(last, "activation", None)
    name = getattr(activation, "__name__", "") or type(last).__name__.lower()
    return any(kind in name.lower() for kind in _PROBABILITIES)


def _loss(variant: Variant, compiled: dict[str, Any] | None, model: Any,
          inputs: ModelInputs) -> LossSpec:
    train_loss = variant.train.loss
    if isinstance(train_loss, list):  # the matrix gives each variant one value
        raise TypeError("a variant's loss is one value")
    if train_loss is not None:
        return LossSpec(train_loss.name, train_loss.args, "train.loss")
    if compiled is not None and compiled.get("loss") is not None:
        loss = compiled["loss"]
        name = loss if isinstance(loss, str) else getattr(loss, "name", None) or getattr(
            loss, "__name__", type(loss).__name__)
        return LossSpec(str(name), {}, "the compiled model", compiled=loss)
    default = DEFAULT_LOSS.get(inputs.label_kind)
    if default is None:
        raise WorkloadError("bench cannot tell the loss from real-valued labels: set "
                            "[train] loss (e.g. \"mse\" or \"binary_crossentropy\"), or "
                            "compile the model in its builder")
    args = {"from_logits": not ends_in_probabilities(model)} if "crossentropy" in default else {}
    origin = "the labels' default" + (", from logits" if args.get("from_logits") else "")
    return LossSpec(default, args, origin)


def _metrics(variant: Variant, compiled: dict[str, Any] | None) -> tuple[MetricSpec, ...]:
    if variant.train.metrics is not None:
        return tuple(MetricSpec(m.name, m.args) for m in variant.train.metrics)
    given = (compiled or {}).get("metrics") or []
    return tuple(MetricSpec(m if isinstance(m, str) else getattr(m, "name", str(m)),
                            compiled=m) for m in given)


def _optimizer(variant: Variant, compiled: dict[str, Any] | None) -> tuple[Any, str]:
    spec = variant.train.optimizer
    if isinstance(spec, list):
        raise TypeError("a variant's optimizer is one value")
    if spec is not None:
        args = {k: v for k, v in spec.args.items() if k != "learning_rate"}
        return make_optimizer(spec.name, args, variant.learning_rate), "train.optimizer"
    own = (compiled or {}).get("optimizer")
    if own is None or isinstance(own, str):
        name = own or DEFAULT_OPTIMIZER
        origin = "the compiled model" if own else "bench's default"
        return make_optimizer(name, {}, variant.learning_rate), origin
    if not variant.learning_rate_given and (rate := learning_rate_of(own)) is not None:
        set_learning_rate(own, rate * variant.lr_factor)
    else:
        set_learning_rate(own, variant.learning_rate)
    return own, "the compiled model"


def build(variant: Variant, inputs: ModelInputs, learning_rate: float | None = None) -> Workload:
    """The variant's model, optimizer and objectives; call it under the strategy's scope.
    `learning_rate` replaces the variant's (the checks train copies at their own)."""
    if learning_rate is not None:
        variant = variant.model_copy(update={"learning_rate": learning_rate,
                                             "learning_rate_given": True})
    model = models.build_configured(variant.model, inputs.shape, inputs.outputs,
                                    inputs.vocabularies)
    compiled = compile_settings(model)
    objectives = Objectives(_loss(variant, compiled, model, inputs), _metrics(variant, compiled))
    optimizer, origin = _optimizer(variant, compiled)
    return Workload(model, optimizer, objectives, compiled is not None, origin)


def initial_loss(workload: Workload, batch: tuple[Any, Any], model_name: str) -> float:
    """The loss on the probe batch: where a model whose outputs do not fit the labels (or the
    loss) fails, as one line that names the model and the loss."""
    try:
        return workload.objectives.batch_loss(workload.model, batch)
    except Exception as exc:  # shapes and dtypes that do not fit surface as many error types
        x, y = batch
        out = getattr(workload.model, "output_shape", None)
        loss = workload.objectives.loss_spec.name
        raise WorkloadError(f"model '{model_name}' (outputs {out}) does not fit the labels "
                            f"(shape {list(y.shape)}, {y.dtype.name}) under loss '{loss}': "
                            f"{one_line(informative_line(str(exc)))}") from None
