"""Loss parity: does a strategy train the same model as the single-device baseline?

A faster strategy that trains a different model is not faster. With `[check] loss_parity`, each
worker also trains a fresh copy of the model for k steps from the same seed, on the same
unshuffled batches of one fixed global size, through the variant's own API path (Keras `fit` or
the custom loop), and records the loss on a fixed batch afterwards. The parent compares every
variant with the baseline (default / one_device) of the same precision: beyond the relative
tolerance, the variant is marked "diverged" in its record, the terminal and the report.
"""

from __future__ import annotations

from typing import Any

from bench.scenario.schema import BASELINE_STRATEGIES


def measure(variant: Any, strategy: Any, data: Any) -> dict[str, Any]:
    """Train a seeded copy for `steps` steps through the variant's API; the loss afterwards."""
    from bench.checks.verdicts import train_copy
    from bench.training import loops

    cfg = variant.check.loss_parity
    # Unshuffled, and augmented in one thread (seeded random ops then draw in a fixed order):
    # every variant must see the very same batches.
    fixed = variant.data.model_copy(update={"shuffle_buffer": 0, "cache": False,
                                            "map_parallelism": 1})
    model, dataset = train_copy(variant, strategy, data, fixed, batch=cfg.batch,
                                learning_rate=cfg.learning_rate, steps=cfg.steps)
    probe = next(iter(dataset().take(1)))
    return {"status": "measured", "steps": cfg.steps, "batch": cfg.batch,
            "learning_rate": cfg.learning_rate, "loss": loops.batch_loss(model, probe)}


class ParityJudge:
    """Compares each record's parity loss with the first baseline of the same precision."""

    def __init__(self) -> None:
        self.baselines: dict[str, dict[str, Any]] = {}

    def judge(self, record: dict[str, Any]) -> dict[str, Any]:
        parity = (record.get("checks") or {}).get("loss_parity")
        if not parity or parity.get("status") != "measured":
            return record
        variant = record["variant"]
        precision = variant["precision"]
        tolerance = variant["check"]["loss_parity"]["tolerance"]
        if variant["strategy"] in BASELINE_STRATEGIES and precision not in self.baselines:
            self.baselines[precision] = record
            parity.update(status="baseline")
            return record
        base = self.baselines.get(precision)
        if base is None:
            parity.update(status="no-baseline", reason=f"no {precision} baseline ran first")
            return record
        reference = base["checks"]["loss_parity"]["loss"]
        difference = abs(parity["loss"] - reference) / max(abs(reference), 1e-12)
        parity.update(status="ok" if difference <= tolerance else "diverged",
                      baseline=base["variant_id"], baseline_loss=reference,
                      relative_difference=difference, tolerance=tolerance)
        return record
