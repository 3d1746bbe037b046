"""A fresh copy of the variant's model, trained from the scenario's seed through the variant's own
strategy and API path: what loss parity and the accuracy bound measure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.scenario.schema import Variant


def train_copy(variant: Variant, strategy: Any, data: Any, data_cfg: Any, *, batch: int,
               learning_rate: float, steps: int) -> tuple[Any, Callable[..., Any]]:
    """A fresh workload from the scenario's seed, trained `steps` steps of global batch `batch`
    through the variant's own API path; returns it with the dataset function it trained on."""
    from bench.data import sources as data_mod
    from bench.training import flavour, loop_choice, workload
    from bench.training.gate import Gate
    from bench.training.schedule import Schedule

    flavour.keras().utils.set_random_seed(variant.data.seed)

    def dataset(input_context: Any = None) -> Any:
        return data_mod.make_dataset(data, data_cfg, batch, input_context)

    with strategy.scope():
        copy = workload.build(variant, data_mod.model_inputs(data, data_cfg), learning_rate)
        metrics = copy.objectives.metrics(next(iter(dataset().take(1))), copy.model)
    # One ungated window: the checks run after the variant's last gate, alone on the machine.
    schedule = Schedule(warmup_steps=steps, window_steps=0, repeats=0, gate=Gate(None, 0.0))
    loop_choice.train(variant, strategy, copy, metrics, dataset, global_batch=batch,
                schedule=schedule, steps_per_execution=1, jit_compile=False,
                progress=lambda done, total: None)
    return copy, dataset
