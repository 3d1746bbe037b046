"""The checks' copies on JAX (bench.checks.train_copy's Route): built under the distribution
bench.backends.jax_distribution.build set process-wide, trained by the variant's own path
(bench.backends.jax_loops.train), judged on NumPy batches by the model under its distribution
(the batches are not split: a held-out split's last batch need not divide over the replicas)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from bench.backends import jax_loops, jax_target
from bench.backends.jax_distribution import Placement
from bench.scenario.schema import Variant


class JaxRoute:
    """keras.distribution's way: no scope (the distribution is the process's), one loop."""

    backend = "jax"

    def __init__(self, placement: Placement) -> None:
        self.placement = placement

    def scope(self) -> AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def train(self, variant: Variant, copy: Any, metrics: list[Any],
              dataset: Callable[..., Any], *, batch: int, schedule: Any) -> Any:
        return jax_loops.train(variant, copy, metrics, dataset, self.placement,
                               schedule=schedule, global_batch=batch,
                               progress=lambda done, total: None)

    def accuracy_counts(self, model: Any, dataset: Any, threshold: float) -> tuple[int, int]:
        return jax_target.accuracy_counts(model, dataset, threshold)
