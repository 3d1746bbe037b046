"""Loss parity: does a strategy train the same model as the single-device baseline?

A faster strategy that trains a different model is not faster. With `[check] loss_parity`, each
worker also trains a fresh copy of the model for k steps from the same seed, on the same
unshuffled batches of one fixed global size, through the variant's own API path (Keras `fit` or
the custom loop), and records the loss on a fixed batch afterwards. The parent
(`verdicts.ParityJudge`) compares every variant with the baseline (default / one_device) of the
same precision: beyond the relative tolerance, the variant is marked "diverged" in its record, the
terminal and the report. The copy's weights are aligned first (bench.checks.alignment), so
the same model starts from the same weights on TensorFlow and on JAX, and the two backends'
variants are compared with one baseline.
"""

from __future__ import annotations

from typing import Any

from bench.checks.train_copy import Route, train_copy
from bench.scenario.schema import Variant


def measure(variant: Variant, route: Route, data: Any) -> dict[str, Any]:
    """Train a seeded copy for `steps` steps through the variant's API; the loss afterwards."""
    cfg = variant.check.loss_parity
    # Unshuffled, and augmented in one thread (seeded random ops then draw in a fixed order):
    # every variant must see the very same batches.
    fixed = variant.data.model_copy(update={"shuffle_buffer": 0, "cache": False,
                                            "map_parallelism": 1})
    copy, dataset = train_copy(variant, route, data, fixed, batch=cfg.batch,
                               learning_rate=cfg.learning_rate, steps=cfg.steps)
    probe = next(iter(dataset().take(1).as_numpy_iterator()))
    return {"status": "measured", "steps": cfg.steps, "batch": cfg.batch,
            "learning_rate": cfg.learning_rate,
            "loss": copy.objectives.batch_loss(copy.model, probe)}
