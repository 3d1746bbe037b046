"""keras.distribution on JAX: the devices a variant's process sees and the distribution it
trains under (none for the one-device default, DataParallel, ModelParallel with a LayoutMap).

On a CPU the devices are XLA's host devices, as many as the launcher asked for through
XLA_FLAGS (bench.child_env.backend_env): the JAX counterpart of TensorFlow's logical CPU
devices, sharing the same cores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bench.errors import VariantSkipped, WorkloadError
from bench.scenario.schema import Variant

BATCH_AXIS, MODEL_AXIS = "batch", "model"
# The layout of bench's built-in models under model_parallel (a scenario's `layout` replaces
# it): every kernel's output dimension (and its bias) split over the mesh's model axis, as the
# Keras distribution guide shards Dense and Conv layers; other variables replicated.
BUILTIN_LAYOUT = (
    (r".*dense.*kernel", (None, MODEL_AXIS)),
    (r".*dense.*bias", (MODEL_AXIS,)),
    (r".*conv2d.*kernel", (None, None, None, MODEL_AXIS)),
    (r".*conv2d.*bias", (MODEL_AXIS,)),
)


@dataclass
class Placement:
    """The distribution a variant trains under and the devices it spans."""

    distribution: Any  # None: one device, no keras.distribution
    devices: list[Any]
    kind: str  # the devices' platform: cpu | gpu | tpu

    @property
    def replicas(self) -> int:
        """Replicas in sync: the batch is split this many ways (1 without a distribution and
        under ModelParallel, whose mesh's batch axis is 1)."""
        if self.distribution is None:
            return 1
        return int(self.distribution.device_mesh.shape[0])

    def data_layout(self, shape: tuple[int, ...]) -> Any:
        """Where a batch of `shape` goes: its jax sharding (None: the default device)."""
        if self.distribution is None:
            return None
        return self.distribution.get_data_layout(shape).backend_layout

    def describe(self, model: Any) -> dict[str, Any]:
        """The record's strategy_info; under ModelParallel also the variables its layout split
        over devices (read from their shardings: what happened, not what was asked)."""
        dist = self.distribution
        sharded = ([v.path for v in model.weights if not v.value.sharding.is_fully_replicated]
                   if isinstance(dist, _model_parallel()) else None)
        return {"class": type(dist).__name__ if dist is not None else "NoDistribution",
                "num_replicas_in_sync": self.replicas,
                "cross_device_ops": None, "collective_implementation": None,
                "sharded_variables": sharded}


def _model_parallel() -> type:
    import keras

    return keras.distribution.ModelParallel


def layout_rules(variant: Variant) -> list[tuple[str, tuple[str | None, ...]]]:
    """The LayoutMap rules of a model_parallel variant: the scenario's (`"none"` is Keras'
    None), else bench's own for its built-in models."""
    if variant.layout is None:
        return list(BUILTIN_LAYOUT)
    return [(pattern, tuple(None if d == "none" else d for d in dims))
            for pattern, dims in variant.layout.items()]


def layout_notes(strategy_info: dict[str, Any], variant: Variant) -> list[str]:
    """A ModelParallel layout that split no variable is said: every device then holds and
    computes the whole model."""
    if strategy_info.get("sharded_variables") != []:
        return []
    given = "the scenario's layout" if variant.layout is not None else (
        "bench's layout (Dense and Conv2D layers by their default names)")
    return [f"model_parallel: {given} matched no variable of the model, so every variable is "
            "replicated; name the model's variables in [[strategies]] layout"]


def keep_tensorflow_off_gpus() -> None:
    """Hide the GPUs from TensorFlow in a JAX process: TensorFlow only feeds tf.data here, and
    on first use it would take the memory of every GPU it sees, which JAX needs (the Keras JAX
    guide does the same). Before any TensorFlow op; nothing changes on a host without GPUs."""
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")


def build(variant: Variant) -> Placement:
    """The variant's distribution over the devices JAX sees, set process-wide (Keras builds
    every variable under it). Fewer devices than replicas is a skip with the reason."""
    import jax
    import keras

    devices = jax.devices()
    kind = devices[0].platform
    wanted = variant.kind.process_replicas(variant)
    if len(devices) < wanted:
        raise VariantSkipped(f"{variant.strategy} over {wanted} devices, and JAX sees "
                             f"{len(devices)} {kind} device(s)")
    devices = devices[:wanted]
    if variant.strategy == "default":
        return Placement(None, devices[:1], kind)
    names = [f"{d.platform}:{d.id}" for d in devices]
    if variant.strategy == "data_parallel":
        dist = keras.distribution.DataParallel(devices=names)
    else:
        mesh = keras.distribution.DeviceMesh((1, wanted), [BATCH_AXIS, MODEL_AXIS], names)
        layout = keras.distribution.LayoutMap(mesh)
        for pattern, axes in layout_rules(variant):
            layout[pattern] = axes
        dist = keras.distribution.ModelParallel(layout_map=layout, batch_dim_name=BATCH_AXIS)
        if variant.layout is not None:
            _check_layouts(dist, list(variant.layout))
    keras.distribution.set_distribution(dist)
    return Placement(dist, devices, kind)


def _check_layouts(dist: Any, patterns: list[str]) -> None:
    """A scenario's layout rule that does not fit the variable it matches is one line naming
    both, where JAX would fail deep in a device_put: more dimensions than the variable has, or
    a dimension that its mesh axis' devices do not divide. (A rule with fewer dimensions leaves
    the rest unsplit, as a jax PartitionSpec does.)"""
    lookup = dist.get_variable_layout
    sizes = dict(zip(dist.device_mesh.axis_names, dist.device_mesh.shape, strict=True))

    def get_variable_layout(variable: Any) -> Any:
        layout = lookup(variable)
        axes, shape = tuple(getattr(layout, "axes", None) or ()), tuple(variable.shape)
        rule = next((p for p in patterns if re.search(p, variable.path)), None)
        problem = (f"gives {len(axes)} dimensions to a variable of {len(shape)}"
                   if len(axes) > len(shape) else next(
                       (f"splits dimension {i} ({shape[i]}) over '{axis}', whose {sizes[axis]} "
                        "devices do not divide it"
                        for i, axis in enumerate(axes)
                        if axis is not None and shape[i] % sizes[axis]), None))
        if rule is not None and problem is not None:
            raise WorkloadError(f"[[strategies]] layout rule {rule!r} {problem}: variable "
                                f"'{variable.path}' has shape {list(shape)}")
        return layout

    dist.get_variable_layout = get_variable_layout


def devices_section(placement: Placement) -> dict[str, Any]:
    """The record's devices: the JAX devices the distribution spans (XLA host devices on a CPU
    share its cores, as TensorFlow's logical devices do)."""
    import jax

    names = [str(d) for d in placement.devices]
    return {"kind": placement.kind, "devices": names,
            "logical_cpus": len(names) if placement.kind == "cpu" else None,
            "simulated": placement.kind == "cpu" and len(names) > 1,
            "physical": [f"{d.platform}:{d.id}" for d in jax.devices()],
            "logical": names}
