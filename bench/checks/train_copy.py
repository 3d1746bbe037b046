"""A fresh copy of the variant's model, trained from the scenario's seed through the variant's own
strategy and API path: what loss parity and the accuracy bound measure.

The backend's part is a `Route`: the scope the copy is built in, its training loop, and how a
trained model is judged on a held-out split. TensorFlow's is `StrategyRoute` (a tf.distribute
strategy); JAX's is bench.backends.jax_checks.JaxRoute (keras.distribution, set process-wide).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from bench.scenario.schema import Variant


class Route(Protocol):
    """How a backend builds, trains and judges the checks' copies."""

    backend: str

    def scope(self) -> AbstractContextManager[Any]: ...

    def train(self, variant: Variant, copy: Any, metrics: list[Any],
              dataset: Callable[..., Any], *, batch: int, schedule: Any) -> Any: ...

    def accuracy_counts(self, model: Any, dataset: Any, threshold: float) -> tuple[int, int]: ...


class StrategyRoute:
    """TensorFlow: the copy built under the variant's tf.distribute strategy, trained by its
    own loop (bench.training.loop_choice), counted through the strategy."""

    backend = "tensorflow"

    def __init__(self, strategy: Any) -> None:
        self.strategy = strategy

    def scope(self) -> AbstractContextManager[Any]:
        return self.strategy.scope()

    def train(self, variant: Variant, copy: Any, metrics: list[Any],
              dataset: Callable[..., Any], *, batch: int, schedule: Any) -> Any:
        from bench.training import loop_choice

        return loop_choice.train(variant, self.strategy, copy, metrics, dataset,
                                 global_batch=batch, schedule=schedule, steps_per_execution=1,
                                 jit_compile=False, progress=lambda done, total: None)

    def accuracy_counts(self, model: Any, dataset: Any, threshold: float) -> tuple[int, int]:
        from bench.training.held_out import accuracy_counts

        return accuracy_counts(self.strategy, model, dataset, threshold=threshold)


def train_copy(variant: Variant, route: Route, data: Any, data_cfg: Any, *, batch: int,
               learning_rate: float, steps: int) -> tuple[Any, Callable[..., Any]]:
    """A fresh workload from the scenario's seed, its weights aligned (bench.checks.alignment),
    trained `steps` steps of global batch `batch` through the variant's own API path; returns
    it with the dataset function it trained on."""
    from bench.checks.alignment import align_weights
    from bench.data import sources as data_mod
    from bench.training import flavour, workload
    from bench.training.gate import Gate
    from bench.training.schedule import Schedule

    flavour.keras().utils.set_random_seed(variant.data.seed)

    def dataset(input_context: Any = None) -> Any:
        return data_mod.make_dataset(data, data_cfg, batch, input_context)

    with route.scope():
        copy = workload.build(variant, data_mod.model_inputs(data, data_cfg), learning_rate)
        probe = next(iter(dataset().take(1).as_numpy_iterator()))
        copy.model(probe[0], training=False)  # a model built by its first call has its weights
        align_weights(copy.model, variant.data.seed)
        metrics = copy.objectives.metrics(probe, copy.model)
    # One ungated window: the checks run after the variant's last gate, alone on the machine.
    schedule = Schedule(warmup_steps=steps, window_steps=0, repeats=0, gate=Gate(None, 0.0))
    route.train(variant, copy, metrics, dataset, batch=batch, schedule=schedule)
    return copy, dataset
