"""A fresh copy of the variant's model, trained from the scenario's seed through the variant's own
strategy and API path: what loss parity and the accuracy bound measure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def train_copy(variant: Any, strategy: Any, data: Any, data_cfg: Any, *, batch: int,
               learning_rate: float, steps: int) -> tuple[Any, Callable[..., Any]]:
    """A fresh model from the scenario's seed, trained `steps` steps of global batch `batch`
    through the variant's own API path; returns it with the dataset function it trained on."""
    from bench.data import sources as data_mod
    from bench.training import flavour, loops, models, paths
    from bench.training.gate import Gate
    from bench.training.schedule import Schedule

    flavour.keras().utils.set_random_seed(variant.data.seed)
    with strategy.scope():
        model = models.build_configured(variant.model, data_mod.model_input_shape(data, data_cfg),
                                        data.num_classes)
        optimizer = loops.make_optimizer(variant.train.optimizer, learning_rate)

    def dataset(input_context: Any = None) -> Any:
        return data_mod.make_dataset(data, data_cfg, batch, input_context)

    # One ungated window: the checks run after the variant's last gate, alone on the machine.
    schedule = Schedule(warmup_steps=0, window_steps=steps, repeats=1, gate=Gate(None, 0.0))
    paths.train(variant, strategy, model, optimizer, dataset, global_batch=batch,
                schedule=schedule, steps_per_execution=1, jit_compile=False,
                progress=lambda done, total: None)
    return model, dataset
