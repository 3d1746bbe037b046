"""Variant → tf.distribute strategy, with checks that turn "cannot run here" into a skip reason.

Only single-process strategies live here; multi-process ones (MultiWorkerMirrored,
ParameterServer, TPU) are built by their launchers and plug into the same worker loop.
"""

from __future__ import annotations

from typing import Any

from bench.devices import DeviceLayout
from bench.errors import VariantSkipped

STRATEGY_DESCRIPTIONS: dict[str, str] = {
    "default": "No explicit strategy (tf.distribute default strategy): the baseline",
    "one_device": "OneDeviceStrategy on the first device",
    "mirrored": "MirroredStrategy: synchronous data parallelism over local devices",
    "central_storage": "CentralStorageStrategy: variables on one device, compute mirrored",
}


def check_supported(strategy: str, cross_device_ops: str, layout: DeviceLayout) -> None:
    """Raise VariantSkipped for combinations known not to work on this device kind."""
    if strategy == "mirrored" and cross_device_ops == "nccl" and layout.kind != "gpu":
        raise VariantSkipped(
            "NCCL all-reduce needs GPUs: TensorFlow registers no CPU kernel for 'NcclAllReduce'"
        )


def _cross_device_ops(name: str) -> Any:
    import tensorflow as tf

    return {
        "auto": lambda: None,
        "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
        "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
        "nccl": tf.distribute.NcclAllReduce,
    }[name]()


def build_strategy(strategy: str, cross_device_ops: str, layout: DeviceLayout) -> Any:
    import tensorflow as tf

    check_supported(strategy, cross_device_ops, layout)
    devices = list(layout.devices)
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0])
    if strategy == "mirrored":
        return tf.distribute.MirroredStrategy(
            devices=devices, cross_device_ops=_cross_device_ops(cross_device_ops)
        )
    if strategy == "central_storage":
        return tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=devices, parameter_device="/cpu:0"
        )
    raise ValueError(f"unknown strategy {strategy!r}")


def describe_strategy(strategy: Any) -> dict[str, Any]:
    """What was really built: class, replica count and the all-reduce implementation in use."""
    extended = getattr(strategy, "extended", None)
    cross_ops = getattr(extended, "_cross_device_ops", None) or getattr(
        extended, "_inferred_cross_device_ops", None
    )
    return {
        "class": type(strategy).__name__,
        "num_replicas_in_sync": int(strategy.num_replicas_in_sync),
        "cross_device_ops": type(cross_ops).__name__ if cross_ops is not None else None,
    }
