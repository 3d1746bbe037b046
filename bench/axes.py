"""Variant identity: the axes that tell one variant of a matrix from another, defined once.

`bench compare` matches records across runs by them, scaling efficiency groups by all of them but
the replica count, the report pairs precisions and finds baselines by them, export writes them as
parameters, and `Variant.axes()` lists them. Pure and light (no pydantic): the functions read a
variant as JSON, the scenario's `Variant` dumped or a record's (`RecordedVariant.axis`), so a
record from before an axis existed reads with the value it meant then.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Input-pipeline settings that a scenario may sweep as matrix axes (under the record's "data").
DATA_AXES = ("map_parallelism", "prefetch")
# Training settings that a scenario may sweep as matrix axes (under the record's "train").
TRAIN_AXES = ("keras", "steps_per_execution", "jit_compile")
# Keras objects a scenario may sweep (under the record's "train"): a name, or a table of a name
# and arguments; None is "what a compiled model brings, else bench's default".
OBJECT_AXES = ("loss", "optimizer")
# Where the other nested axes live in a variant record, by axis name: (section, field).
NESTED_AXES = {"feed": ("data", "feed"), "trainable": ("model", "trainable"),
           "environment": ("environment", "label"),
           **{axis: ("train", axis) for axis in (*TRAIN_AXES, *OBJECT_AXES)},
           **{axis: ("data", axis) for axis in DATA_AXES}}

# Every axis, in display order, with the value a record from before that axis existed means
# (None: the axis was always recorded). "model" is the model's name; DATA_AXES come last. The Keras
# flavour is an axis, so Keras 3 and tf-keras records are never compared or scaled as one; so is
# the [environment] point (its label; None: the interpreter that ran bench), so two TensorFlows
# are only ever compared on purpose (bench.compare.environments).
VARIANT_AXES: dict[str, Any] = {
    "strategy": None, "replicas": None, "workers": 1, "ps": 0, "devices_per_worker": 1,
    "cross_device_ops": None, "collective": "auto", "api": None, "distribute_dataset": None,
    "precision": None, "backend": "tensorflow", "batch_rule": None, "per_replica_batch": None,
    "global_batch": None, "lr_scaling": "none", "lr_warmup_examples": 0,
    "model": None, "trainable": "all", "keras": "keras3", "steps_per_execution": 1,
    "jit_compile": False, "feed": "dataset", "loss": None, "optimizer": None,
    "environment": None,
    **{axis: "autotune" for axis in DATA_AXES},
}


def object_label(value: Any) -> str | None:
    """A Keras object as a variant id and an axis name it: the name, then each argument as its
    initials and value ({"name": "adamw", "weight_decay": 0.004} is "adamw-wd0.004"). Records
    from before objects were axes hold the optimizer's bare name, "adam" being the default."""
    if value is None or value == "adam":
        return None
    if not isinstance(value, dict):
        return str(value)
    label = str(value["name"]).rsplit(":", 1)[-1].lower()
    for key, arg in sorted((k, v) for k, v in value.items() if k != "name"):
        initials = "".join(word[0] for word in key.split("_") if word)
        label += f"-{initials}{str(arg).lower()}"
    return label


def axis_value(variant: dict[str, Any], axis: str) -> Any:
    """One axis of a variant record (`record["variant"]`), old records read with the defaults."""
    if axis == "model":
        return (variant.get("model") or {}).get("name")
    if axis in OBJECT_AXES:
        return object_label((variant.get("train") or {}).get(axis))
    if axis in NESTED_AXES:
        section, field = NESTED_AXES[axis]
        return (variant.get(section) or {}).get(field, VARIANT_AXES[axis])
    return variant.get(axis, VARIANT_AXES[axis])


def variant_axes(variant: dict[str, Any], without: Iterable[str] = ()) -> dict[str, Any]:
    """The variant's axes by name, leaving out `without` (the axes a comparison varies)."""
    skip = set(without)
    unknown = skip - set(VARIANT_AXES)
    if unknown:
        raise KeyError(f"not a variant axis: {', '.join(sorted(unknown))}")
    return {axis: axis_value(variant, axis) for axis in VARIANT_AXES if axis not in skip}


def variant_key(variant: dict[str, Any], without: Iterable[str] = ()) -> tuple[Any, ...]:
    """A hashable key over the variant's axes but `without`: equal keys, the same variant as far
    as a comparison that varies only `without` is concerned."""
    return tuple(variant_axes(variant, without).values())
