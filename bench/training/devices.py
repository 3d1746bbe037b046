"""Device discovery and the device layout of one worker process.

Logical CPU devices can be configured once per process, before any op runs (a second call raises
`RuntimeError: Virtual devices cannot be modified after being initialized`), which is why every
variant gets its own process. `plan_layout` is pure so its decisions are testable without devices.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bench.errors import VariantSkipped


@dataclass(frozen=True)
class DeviceLayout:
    kind: str  # "gpu" or "cpu": what the replicas compute on
    devices: tuple[str, ...]  # one device name per replica
    logical_cpus: int  # logical CPU devices this process creates (1 = left as is)

    @property
    def simulated(self) -> bool:
        """Replicas on logical CPU devices share the same cores: they add no compute."""
        return self.kind == "cpu" and len(self.devices) > 1

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "simulated": self.simulated}


def plan_layout(requested: str, replicas: int, gpus_available: int) -> DeviceLayout:
    """Choose GPUs when present (or demanded), else logical CPU devices; skip what cannot fit."""
    use_gpu = requested == "gpu" or (requested == "auto" and gpus_available > 0)
    if use_gpu:
        if gpus_available == 0:
            raise VariantSkipped("devices = \"gpu\" but no GPU is visible to TensorFlow")
        if replicas > gpus_available:
            raise VariantSkipped(f"needs {replicas} GPUs, this machine has {gpus_available}")
        return DeviceLayout("gpu", tuple(f"/gpu:{i}" for i in range(replicas)), 1)
    return DeviceLayout("cpu", tuple(f"/cpu:{i}" for i in range(replicas)), replicas)


def configure(requested: str, replicas: int) -> DeviceLayout:
    """Inspect this process's devices and create the logical CPU devices the variant needs.

    Must run before TensorFlow initialises its context (before any op or strategy is built).
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    layout = plan_layout(requested, replicas, len(gpus))
    if layout.kind == "gpu":
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    elif layout.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * layout.logical_cpus
        )
    return layout


def describe() -> dict[str, list[str]]:
    """Physical and logical devices as TensorFlow sees them, for records and `bench list`."""
    import tensorflow as tf

    return {
        "physical": [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()],
        "logical": [d.name for d in tf.config.list_logical_devices()],
    }
