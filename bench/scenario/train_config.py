"""The `[batch]` and `[train]` sections: the batch rule and learning rate, and how each step
trains (API, precision, loss, optimizer, metrics, Keras flavour, compilation)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from bench.axes import object_label
from bench.scenario import keras_names
from bench.scenario.fields import (
    BATCH_WHY,
    ApiName,
    Axis,
    AxisFields,
    BackendName,
    Batch,
    DistributeDataset,
    KerasFlavour,
    PipelineAxis,
    PrecisionName,
    Steps,
    Strict,
)
from bench.scenario.imports import IMPORT_PATH_HELP, is_import_path


def _named(value: Any) -> Any:
    """A Keras object may be written as its name alone: "adam" is { name = "adam" }."""
    return {"name": value} if isinstance(value, str) else value


class _KerasObject(BaseModel):
    """A Keras loss, optimizer or metric: a Keras name ("adamw", "mse") or a user's
    "package.module:function", with the arguments of a table ({ name = "adamw",
    weight_decay = 0.004 })."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: Annotated[str, Field(min_length=1)]

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def is_import_path(self) -> bool:
        return is_import_path(self.name)

    def label(self) -> str:
        """How a variant id names it (`bench.axes.object_label`)."""
        return object_label(self.model_dump()) or self.name

    def check(self, kind: str) -> None:
        """Raise ValueError when a Keras name or its arguments are unknown (a user's function
        is looked up later, beside the scenario file)."""
        if problem := _non_finite(self.args):
            raise ValueError(problem)
        if self.is_import_path:
            return
        if ":" in self.name:
            raise ValueError(f"'{self.name}' is not of the form {IMPORT_PATH_HELP}")
        if kind == "metric" and self.name.lower() in keras_names.SHAPE_DEPENDENT_METRICS:
            if self.args:
                raise ValueError(f"metric '{self.name}' takes no arguments (Keras picks its "
                                 "class from the labels' shape); name the class instead, e.g. "
                                 "'binary_accuracy'")
            return
        if problem := keras_names.args_problem(keras_names.lookup(kind, self.name), self.args):
            raise ValueError(problem)


KerasObject = Annotated[_KerasObject, BeforeValidator(_named)]


def _non_finite(args: dict[str, Any]) -> str | None:
    """Why a Keras object's arguments hold a number no run can mean (inf, nan), or None."""
    pending: list[tuple[str, Any]] = list(args.items())
    while pending:
        key, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"argument '{key}': {value} is not a finite number"
        if isinstance(value, dict):
            pending += [(f"{key}.{k}", v) for k, v in value.items()]
        elif isinstance(value, list):
            pending += [(f"{key}[{i}]", v) for i, v in enumerate(value)]
    return None


class BatchConfig(Strict):
    """weak: per-replica batch fixed; strong: global batch fixed and split across replicas."""

    rule: Literal["weak", "strong"] = Field("weak", description=(
        "weak: the per-replica batch is fixed; strong: the global batch is fixed and split over the "
        "replicas."))
    per_replica: Axis[Batch] | None = Field(None, description=(
        f"The per-replica batch (rule = \"weak\"). {BATCH_WHY}"))
    global_batch: Axis[Batch] | None = Field(default=None, alias="global", description=(
        f"The global batch (rule = \"strong\"). {BATCH_WHY}"))
    learning_rate: Annotated[float, Field(gt=0)] | None = Field(None, description=(
        "None: the optimizer's own (a [train] optimizer table's learning_rate, a compiled model's), else "
        "0.001; the lr_scaling rule applies to whichever it is. Give it in one place."))
    lr_scaling: Literal["none", "linear", "sqrt"] = Field("none", description=(
        "How the learning rate follows the global batch, relative to lr_reference_batch."))
    lr_reference_batch: Batch | None = Field(None, description=(
        "The batch at which learning_rate applies (default: per_replica under weak, global under strong)."))
    lr_warmup_examples: Annotated[int, Field(ge=0, le=10**10)] = Field(0, description=(
        "Linear warmup (Goyal et al. 2017): over the first this many examples the learning rate "
        "ramps from the base rate to the scaled one (0: none; with lr_scaling none there is "
        "nothing to ramp)."))

    @model_validator(mode="after")
    def _batch_matches_rule(self) -> BatchConfig:
        if self.rule == "weak":
            if self.global_batch is not None:
                raise ValueError("'global' is for rule = \"strong\"; weak scaling sets 'per_replica'")
            if self.per_replica is None:
                raise ValueError("rule = \"weak\" needs 'per_replica'")
        else:
            if self.per_replica is not None:
                raise ValueError("'per_replica' is for rule = \"weak\"; strong scaling sets 'global'")
            if self.global_batch is None:
                raise ValueError("rule = \"strong\" needs 'global'")
        return self


class TrainConfig(Strict, AxisFields):
    api: Axis[ApiName] = Field(["fit", "ctl"], description="Keras fit and/or a custom training loop (ctl).")
    precision: Axis[PrecisionName] = Field(["float32"], description="Keras mixed-precision policies.")
    distribute_dataset: Axis[DistributeDataset] = Field(["experimental_distribute_dataset"], description=(
        "How the custom loop distributes its dataset (ctl only; fit distributes its own)."))
    loss: PipelineAxis[KerasObject] | None = Field(None, description=(
        "A Keras loss name, a table with its arguments ({ name = \"binary_crossentropy\", from_logits = "
        "true }) or \"package.module:function\". None: what a compiled model brings, else the labels' own "
        "loss (sparse_categorical_crossentropy for class ids, from the built-in models' logits)."))
    optimizer: PipelineAxis[KerasObject] | None = Field(None, description=(
        "A Keras optimizer name, a table with its arguments ({ name = \"adamw\", weight_decay = 0.004 }) "
        "or \"package.module:function\". None: what a compiled model brings, else Adam."))
    metrics: list[KerasObject] | None = Field(None, description=(
        "Keras metric names or tables, updated every step by fit and the custom loop alike (None: a "
        "compiled model's, else none)."))
    backend: Axis[BackendName] = Field(["tensorflow"], description=(
        "The Keras backends: tensorflow (tf.distribute strategies) and/or jax (keras.distribution: "
        "data_parallel, model_parallel). The matrix pairs each strategy with the backends that have "
        "it (default with both). JAX needs the jax extra (pip install \".[jax]\")."))
    keras: PipelineAxis[KerasFlavour] = Field("keras3", description=(
        "keras3, or tf_keras (tf-keras 2.x, TF_USE_LEGACY_KERAS=1 in the variant's processes)."))
    steps_per_execution: PipelineAxis[Steps] = Field(1, description=(
        "Steps per call into the compiled function (at most measure.steps, which it divides). "
        "On JAX through fit only: a JAX custom-loop variant with more than 1 is skipped."))
    jit_compile: PipelineAxis[bool] = Field(False, description="Compile the step with XLA.")
    float16_on_cpu: Literal["skip", "run"] = Field("skip", description=(
        "TensorFlow's mixed_float16 on CPU runs single-threaded (~400x slower): skip it unless "
        "asked to run. JAX variants run it either way (XLA's CPU float16 is not that slow)."))
    gpu_thread_mode: Literal["global", "gpu_private", "gpu_shared"] | None = Field(None, description=(
        "TF_GPU_THREAD_MODE for processes that compute on GPUs (None: TensorFlow's default, global). "
        "gpu_private gives each GPU its own kernel-launch threads, which helps small steps."))

    @model_validator(mode="after")
    def _jax_runs_keras3(self) -> TrainConfig:
        if "jax" in self.backend and "tf_keras" in self.axis_values("keras"):
            raise ValueError("backend 'jax' runs Keras 3 only, and keras names tf_keras "
                             "(tf-keras is TensorFlow's): drop one of them")
        return self

    @field_validator("loss", "optimizer")
    @classmethod
    def _known_objects(cls, value: Any, info: Any) -> Any:
        for spec in value if isinstance(value, list) else [value] if value else []:
            spec.check(info.field_name)
        return value

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[_KerasObject] | None) -> Any:
        for spec in value or []:
            spec.check("metric")
        return value
