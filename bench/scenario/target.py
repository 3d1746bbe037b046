"""The `[target]` table: train every variant to a quality target and count what it took.

Throughput says which variant steps fastest; a target asks which trains the model to the quality
needed soonest (MLPerf Training's question). Each variant trains a fresh model per seed, is
evaluated on a held-out split every `every_examples` examples seen (the same points of training
for every global batch), and stops at the target or at the budget. Pure: no TensorFlow.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from bench.scenario.fields import Strict

MAX_TARGET_SEEDS = 20  # each seed trains a model to the target: minutes each at worst
MAX_TARGET_EXAMPLES = 10**10  # about 170,000 epochs of MNIST: no budget is larger
# Metrics whose values are fractions (a higher value is better): bounded to [0, 1].
FRACTION_METRICS = ("accuracy", "auc", "precision", "recall", "f1")
# Metrics that are errors (a lower value is better) and cannot be negative.
ERROR_METRICS = ("loss", "error", "crossentropy", "hinge", "mean_squared", "mean_absolute",
                 "mse", "mae", "rmse", "msle", "huber", "poisson", "kl_divergence", "logcosh")


def default_direction(metric: str) -> Literal["above", "below"]:
    """A loss or an error is reached below its value; anything else (accuracy) above."""
    name = metric.lower()
    return "below" if any(kind in name for kind in ERROR_METRICS) else "above"


def value_problem(metric: str, value: float) -> str | None:
    """Why `metric` can never take `value` (None: it can)."""
    name = metric.lower()
    if any(kind in name for kind in FRACTION_METRICS) and not 0.0 < value <= 1.0:
        return f"{value} is outside what {metric} can reach (0 < value <= 1)"
    if any(kind in name for kind in ERROR_METRICS) and value < 0:
        return f"{value}: {metric} is never negative"
    return None


class TargetConfig(Strict):
    """Train every variant to `value` of `metric` on the held-out split, per seed, and record the
    examples, epochs and seconds it took (or that the budget ran out first)."""

    metric: Annotated[str, Field(min_length=1)] = Field("accuracy", description=(
        "What is judged: \"accuracy\" (correct classes on the held-out split), \"loss\" (the "
        "training loss on it), or the name of a metric of [train] metrics (or of a compiled "
        "model's metrics)."))
    value: float = Field(description=(
        "The target value, e.g. 0.85 for accuracy (0 < value <= 1), a loss at or above 0."))
    direction: Literal["above", "below"] | None = Field(None, description=(
        "Reached when the metric is at or above the value, or at or below it. None: below for a "
        "loss or an error, above otherwise."))
    eval_split: Annotated[str, Field(min_length=1)] = Field("test", description=(
        "The held-out split it is judged on, chosen as check.accuracy chooses it: "
        "mnist / fashion_mnist / synthetic \"test\" or \"train\"; tfds: any split it has; "
        "tfrecord: \"test\" reads data.eval_files."))
    every_examples: Annotated[int, Field(ge=1, le=MAX_TARGET_EXAMPLES)] = Field(description=(
        "Evaluate after every this many training examples seen, so variants of different global "
        "batches are judged at the same points of training (a multiple of every variant's "
        "global batch)."))
    max_examples: Annotated[int, Field(ge=1, le=MAX_TARGET_EXAMPLES)] | None = Field(
        None, description=("The budget in examples seen; give it or max_epochs (or both: the "
                           "smaller counts)."))
    max_epochs: Annotated[float, Field(gt=0, le=100_000)] | None = Field(None, description=(
        "The budget in epochs of the training split (in-memory datasets, whose size bench "
        "knows before it runs)."))
    max_seconds: Annotated[float, Field(gt=0, le=86_400)] = Field(120.0, description=(
        "The budget in seconds of training (evaluation apart) per seed; past it the seed is "
        "\"not reached\" with its best value. At most a day."))
    seeds: Annotated[int, Field(ge=1, le=MAX_TARGET_SEEDS)] = Field(1, description=(
        "Seeds trained per variant: data.seed, data.seed + 1, ... (the initial weights and the "
        "shuffle). The median over them is the variant's figure; with 5 or more the fastest and "
        f"the slowest are dropped first, as MLPerf does. At most {MAX_TARGET_SEEDS}."))

    start: Literal["keras", "aligned"] = Field("keras", description=(
        "Each seed's initial weights: \"keras\", the model's own initialisers (each backend "
        "draws them from its own generator, so TensorFlow and JAX start a seed apart); "
        "\"aligned\", every weight drawn again from NumPy from its initialiser's distribution "
        "(as the loss-parity check starts its copies): the same start on both backends, so their "
        "examples to target compare seed by seed."))

    @property
    def reached_when(self) -> Literal["above", "below"]:
        return self.direction or default_direction(self.metric)

    def reached(self, value: float) -> bool:
        """Whether `value` meets the target."""
        return value >= self.value if self.reached_when == "above" else value <= self.value
