"""Device discovery and the device layout of one worker process.

Logical CPU devices can be configured once per process, before any op runs (a second call raises
`RuntimeError: Virtual devices cannot be modified after being initialized`), which is why every
variant gets its own process. `plan_layout` (bench.placement) is pure so its decisions are testable
without devices.
"""

from __future__ import annotations

import os

from bench.child_env import ChildEnv
from bench.placement import DEFAULT_LOGICAL_GPU_MEMORY_MB, DeviceLayout, plan_layout

__all__ = ["DeviceLayout", "cluster_device_kind", "configure", "describe", "enable_memory_growth",
           "gpu_facts", "plan_layout"]


def configure(requested: str, replicas: int) -> DeviceLayout:
    """Inspect this process's devices and create the logical devices the variant needs.

    Must run before TensorFlow initialises its context (before any op or strategy is built).
    The launcher already chose this process's GPUs (CUDA_VISIBLE_DEVICES, bench.placement);
    `devices = "cpu"` also hides them here, for processes a cluster manager started.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if requested == "cpu" and gpus:
        tf.config.set_visible_devices([], "GPU")
        gpus = []
    told = ChildEnv.from_env()
    layout = plan_layout(requested, replicas, len(gpus), shared=bool(told.gpu_shared))
    if layout.gpu_memory == "limit":  # memory growth cannot be set beside logical GPUs
        limit = told.logical_gpu_memory_mb or DEFAULT_LOGICAL_GPU_MEMORY_MB
        for gpu in gpus:
            tf.config.set_logical_device_configuration(
                gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)]
                * layout.logical_gpus_per_gpu)
    elif layout.gpu_memory == "growth":
        enable_memory_growth()
    elif layout.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * layout.logical_cpus
        )
    return layout


def cluster_device_kind() -> dict[str, str]:
    """What the variant's computing cluster tasks run on, as the launcher planned it (a
    ParameterServer coordinator itself computes on nothing); {} outside a planned cluster."""
    kind = ChildEnv.from_env().cluster_computes_on
    return {"cluster_computes_on": kind} if kind else {}


def describe() -> dict[str, list[str]]:
    """Physical and logical devices as TensorFlow sees them, for records and `bench list`."""
    import tensorflow as tf

    return {
        "physical": [f"{d.device_type}:{d.name}" for d in tf.config.list_physical_devices()],
        "logical": [d.name for d in tf.config.list_logical_devices()],
    }


def enable_memory_growth() -> int:
    """Let every visible GPU's memory grow on demand; returns how many GPUs TensorFlow sees.

    By default the first TensorFlow process to touch a GPU reserves nearly all of its memory, so
    a parameter-server task would starve the worker sharing its GPU. Must run before TensorFlow
    initialises its context.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    return len(gpus)


def gpu_facts() -> dict[str, object]:
    """The GPUs a record ran beside, and the CUDA/cuDNN this TensorFlow was built with.

    nvidia-smi knows memory, driver and UUID; only TensorFlow knows which GPUs this process can
    use, and whether its build can use any (a CPU wheel on a GPU host sees none).
    """
    import tensorflow as tf

    from bench import fingerprint

    gpus = tf.config.list_physical_devices("GPU")
    visible = [(g.name, tf.config.experimental.get_device_details(g)) for g in gpus]
    build = tf.sysconfig.get_build_info()
    return {
        "gpus": fingerprint.merge_gpu_views(fingerprint.gpus(), visible,
                                            os.environ.get("CUDA_VISIBLE_DEVICES")),
        "count": len(gpus),
        "built_with_cuda": tf.test.is_built_with_cuda(),
        "cuda_build": {"cuda_version": build.get("cuda_version"),
                       "cudnn_version": build.get("cudnn_version")},
    }
