"""Precision policies and loss scaling.

Keras `compile` wraps the optimizer in a LossScaleOptimizer by itself under mixed_float16;
a custom loop must do it explicitly and scale the loss before taking gradients. Keras 3's
optimizer scales (`scale_loss`) and unscales inside `apply`; tf-keras's has `get_scaled_loss`
and `get_unscaled_gradients`, called by the loop.
"""

from __future__ import annotations

from typing import Any

from bench.errors import VariantSkipped
from bench.training.flavour import keras as keras_module


def check_supported(precision: str, device_kind: str, float16_on_cpu: str,
                    backend: str = "tensorflow") -> None:
    """TensorFlow's mixed_float16 on CPU runs single-threaded (~400x slower here): skip unless
    asked to run. XLA's CPU float16 on the JAX backend ran at float32's speed order here, and
    runs."""
    if (precision == "mixed_float16" and device_kind == "cpu" and float16_on_cpu == "skip"
            and backend == "tensorflow"):
        raise VariantSkipped(
            "mixed_float16 on CPU has no fast kernels (measured ~400x slower than float32); "
            "set train.float16_on_cpu = \"run\" to measure it anyway"
        )


def apply_policy(precision: str) -> str:
    """Set the process-wide Keras dtype policy; return the policy name actually in force."""
    keras = keras_module()
    keras.mixed_precision.set_global_policy(precision)
    return str(keras.mixed_precision.global_policy().name)


def needs_loss_scaling(precision: str) -> bool:
    return precision == "mixed_float16"


def wrap_for_custom_loop(optimizer: Any, precision: str) -> Any:
    """A custom loop gets dynamic loss scaling only where float16 gradients can underflow."""
    if not needs_loss_scaling(precision):
        return optimizer
    keras = keras_module()
    if hasattr(keras.optimizers, "LossScaleOptimizer"):  # Keras 3
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return keras.mixed_precision.LossScaleOptimizer(optimizer)


def loss_scale_notes(optimizer: Any) -> list[str]:
    """The record's note on loss scaling where `optimizer` scales the loss (Keras 3's
    LossScaleOptimizer, from compile or a custom loop, always dynamic): its scale at the end."""
    import numpy as np

    scale = getattr(optimizer, "dynamic_scale", None)
    if scale is None:
        return []
    return [f"loss scaling: {type(optimizer).__name__}, dynamic, scale "
            f"{float(np.asarray(scale)):g} at the end"]


def scale_loss(optimizer: Any, loss: Any) -> Any:
    """The loss multiplied by the optimizer's current loss scale."""
    if hasattr(optimizer, "get_scaled_loss"):  # tf-keras
        return optimizer.get_scaled_loss(loss)
    return optimizer.scale_loss(loss)


def unscale_gradients(optimizer: Any, grads: Any) -> Any:
    """tf-keras leaves unscaling to the loop; Keras 3's optimizer unscales in `apply`."""
    if hasattr(optimizer, "get_unscaled_gradients"):
        return optimizer.get_unscaled_gradients(grads)
    return grads
