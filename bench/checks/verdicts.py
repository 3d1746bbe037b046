"""Correctness checks next to the measurement: loss parity and the accuracy bound.

Both train a fresh copy of the model from the scenario's seed through the variant's own
strategy and API path (`train_copy`), after the timed steps so they cannot disturb them. What
each verdict means for display (terminal line, report table and summary) is described once here,
in `KINDS`, so every view marks a failing check the same way. Importing this module does not
import TensorFlow: the parent process renders verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.records import extra_failed


@dataclass(frozen=True)
class CheckKind:
    """How one check's verdict is shown: `good` holds, `bad` is flagged in red everywhere."""

    key: str  # record["checks"][key]
    label: str
    good: str
    bad: str
    value: Callable[[dict[str, Any]], float]  # the figure tables sort by
    detail: Callable[[dict[str, Any]], str]  # the figure in words, for either verdict

    def verdict(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record's check when it reached a verdict (not skipped, failed or a baseline)."""
        check = (record.get("checks") or {}).get(self.key) or {}
        return check if check.get("status") in (self.good, self.bad) else None


def _parity_detail(check: dict[str, Any]) -> str:
    if check["status"] == "diverged":
        return f"{check['relative_difference']:.1%} from {check['baseline']}"
    return f"{check['relative_difference']:.2%}"


def _accuracy_detail(check: dict[str, Any]) -> str:
    sign = "<" if check["status"] == "below" else "≥"
    return f"{check['accuracy']:.3f} {sign} {check['min']:g} on {check['eval_split']}"


LOSS_PARITY = CheckKind("loss_parity", "loss parity", "ok", "diverged",
                        lambda c: c["relative_difference"], _parity_detail)
ACCURACY = CheckKind("accuracy", "accuracy", "ok", "below", lambda c: c["accuracy"],
                     _accuracy_detail)
KINDS = (LOSS_PARITY, ACCURACY)


def run(variant: Any, strategy: Any, data: Any) -> dict[str, Any]:
    """Every check the scenario asks for; one that cannot run is reported, never fatal."""
    from bench.checks import accuracy, parity
    measures = {"loss_parity": parity.measure, "accuracy": accuracy.measure}
    results: dict[str, Any] = {}
    for key, measure in measures.items():
        if getattr(variant.check, key) is None:
            continue
        if variant.is_cluster:
            results[key] = {"status": "skipped", "reason": f"{key.replace('_', ' ')} is checked "
                            "for single-process strategies only"}
            continue
        try:
            results[key] = measure(variant, strategy, data)
        except Exception as exc:  # a check that cannot run is reported, not fatal
            results[key] = extra_failed(exc)
    return results


def train_copy(variant: Any, strategy: Any, data: Any, data_cfg: Any, *, batch: int,
               learning_rate: float, steps: int) -> tuple[Any, Callable[..., Any]]:
    """A fresh model from the scenario's seed, trained `steps` steps of global batch `batch`
    through the variant's own API path; returns it with the dataset function it trained on."""
    import keras

    from bench.data import sources as data_mod
    from bench.training import loops, models
    keras.utils.set_random_seed(variant.data.seed)
    with strategy.scope():
        model = models.build_model(variant.model.name, data_mod.model_input_shape(data, data_cfg),
                                   data.num_classes, variant.model.extra_matmul)
        optimizer = loops.make_optimizer(variant.train.optimizer, learning_rate)

    def dataset(input_context: Any = None) -> Any:
        return data_mod.make_dataset(data, data_cfg, batch, input_context)

    loops.train(variant, strategy, model, optimizer, dataset, global_batch=batch,
                total_steps=steps, steps_per_execution=1, jit_compile=False,
                progress=lambda done, total: None)
    return model, dataset
