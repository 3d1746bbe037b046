"""Accuracy bound: does the variant's configuration still learn the task?

A configuration that is fast but no longer learns (a broken input pipeline, a loss-scaling bug,
a learning rate the batch rule scaled too far) is not fast. With `[check] accuracy`, each worker
trains a fresh seeded copy of the model for `steps` steps through its own strategy and API, on
its own training pipeline (shuffle, augmentation and all) at its own global batch and learning
rate, then counts correct predictions on the held-out split through the same strategy. Below
`min`, the variant is marked "below" in its record, the terminal and the report, as tf-models'
benchmarks do with their accuracy bounds.
"""

from __future__ import annotations

from typing import Any

from bench.checks.train_copy import Route, train_copy
from bench.scenario.schema import Variant


def measure(variant: Variant, route: Route, data: Any) -> dict[str, Any]:
    """Train `steps` steps, evaluate on `eval_split`, compare with the bound."""
    from bench.data import sources as data_mod

    cfg = variant.check.accuracy
    batch = variant.global_batch
    copy, _ = train_copy(variant, route, data, variant.data, batch=batch,
                         learning_rate=variant.learning_rate, steps=cfg.steps)
    held_out = data_mod.load(variant.data, split=cfg.eval_split)
    if held_out.num_classes != data.num_classes:
        raise ValueError(f"the {cfg.eval_split} split has {held_out.num_classes} classes, the "
                         f"training data {data.num_classes}")
    correct, total = route.accuracy_counts(
        copy.model, data_mod.make_dataset(held_out, variant.data, batch, train=False),
        0.0 if copy.objectives.from_logits() else 0.5)
    accuracy = correct / total
    return {"status": "ok" if accuracy >= cfg.min else "below", "accuracy": accuracy,
            "min": cfg.min, "steps": cfg.steps, "batch": batch,
            "learning_rate": variant.learning_rate, "eval_split": cfg.eval_split,
            "eval_examples": total, "eval_source": held_out.source,
            "eval_fallback_reason": held_out.fallback_reason}
