"""Precision policies and loss scaling.

Keras 3 `compile` wraps the optimizer in a LossScaleOptimizer by itself under mixed_float16;
a custom loop must do it explicitly and scale the loss before taking gradients.
"""

from __future__ import annotations

from typing import Any

from bench.errors import VariantSkipped


def check_supported(precision: str, device_kind: str, float16_on_cpu: str) -> None:
    """mixed_float16 on CPU runs single-threaded (~400x slower here): skip unless asked to run."""
    if precision == "mixed_float16" and device_kind == "cpu" and float16_on_cpu == "skip":
        raise VariantSkipped(
            "mixed_float16 on CPU has no fast kernels (measured ~400x slower than float32); "
            "set train.float16_on_cpu = \"run\" to measure it anyway"
        )


def apply_policy(precision: str) -> str:
    """Set the process-wide Keras dtype policy; return the policy name actually in force."""
    import keras

    keras.mixed_precision.set_global_policy(precision)
    return str(keras.mixed_precision.global_policy().name)


def needs_loss_scaling(precision: str) -> bool:
    return precision == "mixed_float16"


def wrap_for_custom_loop(optimizer: Any, precision: str) -> Any:
    """A custom loop gets dynamic loss scaling only where float16 gradients can underflow."""
    if not needs_loss_scaling(precision):
        return optimizer
    import keras

    return keras.optimizers.LossScaleOptimizer(optimizer)
