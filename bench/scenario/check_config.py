"""The scenario's `[check]` table: the correctness checks run next to the measurement (loss
parity against the baseline, a bound on held-out accuracy)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from bench.scenario import fields as limits
from bench.scenario.fields import Batch, Steps, Strict


class LossParityConfig(Strict):
    """Train k steps from the same seed on the same batches; compare the loss with the baseline."""

    steps: Steps = Field(10, description=f"Training steps of the fresh copy. {limits.STEPS_WHY}")
    batch: Batch = Field(64, description=(
        f"One global batch for every variant (must split over its replicas). {limits.BATCH_WHY}"))
    learning_rate: Annotated[float, Field(gt=0)] = Field(0.001, description=(
        "Learning rate of the fresh copy."))
    tolerance: Annotated[float, Field(gt=0, le=1)] = Field(0.01, description=(
        "Largest relative difference of the losses that still counts as parity (at most 1: "
        "losses 100% apart)."))


class AccuracyConfig(Strict):
    """Train a seeded copy `steps` steps through the variant's own strategy and API, then
    evaluate it on a held-out split: below `min`, the variant is marked (a bound, as tf-models'
    benchmarks keep one, so a fast configuration that no longer learns is caught)."""

    min: Annotated[float, Field(gt=0, le=1)] = Field(description=(
        "The accuracy bound: below it, the variant is marked."))
    steps: Steps = Field(200, description=(
        f"Training steps, at the variant's own global batch and learning rate. {limits.STEPS_WHY}"))
    eval_split: Annotated[str, Field(min_length=1)] = Field("test", description=(
        "mnist / fashion_mnist / synthetic: \"test\" (held out) or \"train\"; tfds: any split it has; "
        "tfrecord: \"test\" reads data.eval_files, \"train\" data.files."))


class CheckConfig(Strict):
    """Optional correctness checks run next to the measurement."""

    loss_parity: LossParityConfig | None = Field(None, description=(
        "Check that every variant trains the same model as the baseline."))
    accuracy: AccuracyConfig | None = Field(None, description=(
        "Check that every variant still learns: a bound on held-out accuracy."))
