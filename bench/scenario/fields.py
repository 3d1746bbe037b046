"""The building blocks every scenario section shares: strict models, matrix axes, value types.

Pure pydantic, no TensorFlow: the parent and the worker share these, and validating must be
instant.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

T = TypeVar("T")


def _as_list(value: Any) -> Any:
    """Let a matrix axis be written as a scalar (`replicas = 2`) or a list (`replicas = [1, 2]`)."""
    return value if isinstance(value, list) else [value]


# A matrix axis: one value or a non-empty list of values; always a list after validation.
Axis = Annotated[list[T], BeforeValidator(_as_list), Field(min_length=1)]

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]

StrategyName = Literal["default", "one_device", "mirrored", "central_storage",
                       "multi_worker_mirrored", "parameter_server", "tpu"]
ApiName = Literal["fit", "ctl"]
PrecisionName = Literal["float32", "mixed_float16", "mixed_bfloat16"]
CrossDeviceOps = Literal["auto", "reduction_to_one_device", "hierarchical_copy", "nccl"]
DistributeDataset = Literal["experimental_distribute_dataset", "distribute_datasets_from_function"]
# Keras 3 (`keras`) or tf-keras 2.x (`tf_keras`, TF_USE_LEGACY_KERAS=1 in the variant's process)
KerasFlavour = Literal["keras3", "tf_keras"]
# How fit is fed: bench's tf.data pipeline, or the in-memory arrays (`fit(x, y, batch_size=...)`)
Feed = Literal["dataset", "numpy"]
# What trains of a keras.applications model: all of it, only a new head on a frozen base, or the
# head plus the last N layers of the base (fine-tuning)
Trainable = Literal["all", "head"] | Annotated[int, Field(ge=1)]

Collective = Literal["auto", "ring", "nccl"]
Partitioner = Literal["none", "fixed", "min_size"]



class Strict(BaseModel):
    """Unknown keys are errors: a typo in a scenario must never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _not_empty(value: Any) -> Any:
    if isinstance(value, list) and not value:
        raise ValueError("an empty list: give one value, or a list of the values to compare")
    return value


# A pipeline field that may also be a matrix axis: one value, or a list of values (the
# variants each get one value, so the pipeline code only ever sees scalars).
PipelineAxis = Annotated[T | list[T], BeforeValidator(_not_empty)]



class AxisFields:
    """Fields written as one value or a list of values (PipelineAxis): each value is a matrix axis."""

    def axis_values(self, field: str) -> list[Any]:
        """A field's values as a matrix axis (a scalar is an axis of one)."""
        value = getattr(self, field)
        return list(value) if isinstance(value, list) else [value]
