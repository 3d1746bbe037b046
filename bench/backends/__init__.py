"""Keras backends beside TensorFlow's, each behind the one contract the worker calls.

A backend is `measure(variant, spawn_time, progress) -> the record's sections by name`, as the
worker's own TensorFlow path returns them: built under its strategy or distribution, on the
same plan (bench.training.schedule), gate and clock (bench.training.loop_clock), so the
measurement design does not fork per backend. The worker asks `measurer` for the variant's and
knows no backend by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.scenario.schema import Variant


def measurer(variant: Variant) -> Callable[..., dict[str, Any]] | None:
    """The measure function of the variant's backend; None: TensorFlow's, the worker's own."""
    if variant.backend == "jax":
        from bench.backends.jax_measure import measure

        return measure
    return None
