"""The building blocks every scenario section shares: strict models, matrix axes, value types.

Pure pydantic, no TensorFlow: the parent and the worker share these, and validating must be
instant.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

T = TypeVar("T")


def _as_list(value: Any) -> Any:
    """Let a matrix axis be written as a scalar (`replicas = 2`) or a list (`replicas = [1, 2]`)."""
    return value if isinstance(value, list) else [value]


# A matrix axis: one value or a non-empty list of values; always a list after validation.
Axis = Annotated[list[T], BeforeValidator(_as_list), Field(min_length=1)]

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]

# Upper bounds: the largest values a run on one machine can mean. Each is said with its reason
# once here, and the fields that take it add the reason to their descriptions.
MAX_STEPS = 1_000_000
STEPS_WHY = (f"At most {MAX_STEPS:,}: at about 1 ms, the shortest step a Python-driven loop "
             "takes, that many steps are 17 minutes.")
MAX_TURNS = 1_000
TURNS_WHY = (f"At most {MAX_TURNS:,}: each turn is a round in which every live variant runs its "
             "windows in turn (a thousand turns of ten variants with 0.1 s windows are over half "
             "an hour of windows alone), and an interval narrows only as the square root of the "
             "turns.")
MAX_TRACE_STEPS = 1_000
MAX_REPLICAS = 64
REPLICAS_WHY = (f"At most {MAX_REPLICAS}: the devices of one host (the largest have 16 GPUs); "
                "logical CPU devices past the cores add no compute (on 2 cores, 8 ran 30% slower "
                "than 1).")
# What one live variant process may hold in host memory: the largest seed worker peaked at
# ~0.8 GB RSS, a fifth of it pages shared with the fork server; the default scenario's workers
# at ~0.5 GB. It sizes interleaved batches (bench.launch.rounds) and what a matrix would need.
PROCESS_BYTES = 3 << 28  # 768 MiB
MAX_WORKERS = 256
MAX_PS = 64
MAX_DEVICES_PER_WORKER = 16
PROCESSES_WHY = ("A cluster variant's processes are all alive at once, about 768 MiB each: a "
                 f"local cluster of {MAX_WORKERS} workers needs {MAX_WORKERS * PROCESS_BYTES >> 30} "
                 "GiB.")
MAX_BATCH = 1 << 20
BATCH_WHY = (f"At most {MAX_BATCH:,} (2^20): sixteen times the largest batch trained to accuracy "
             "(65,536, LAMB).")
MAX_TIMEOUT_S = 7 * 24 * 3600.0
# The variants of one scenario, and of one run (bench.scenario.size says why).
MAX_SCENARIO_VARIANTS = 10_000
MAX_RUN_VARIANTS = 1_000
MAX_NAME_LENGTH = 100

Steps = Annotated[int, Field(ge=1, le=MAX_STEPS)]
OptionalSteps = Annotated[int, Field(ge=0, le=MAX_STEPS)]  # 0 turns the phase off
Turns = Annotated[int, Field(ge=1, le=MAX_TURNS)]
Batch = Annotated[int, Field(ge=1, le=MAX_BATCH)]

StrategyName = Literal["default", "one_device", "mirrored", "central_storage",
                       "multi_worker_mirrored", "parameter_server", "tpu",
                       "data_parallel", "model_parallel"]
# The Keras backend a variant's process runs: TensorFlow (tf.distribute) or JAX
# (keras.distribution), each in its own process
BackendName = Literal["tensorflow", "jax"]
ApiName = Literal["fit", "ctl"]
PrecisionName = Literal["float32", "mixed_float16", "mixed_bfloat16"]
CrossDeviceOps = Literal["auto", "reduction_to_one_device", "hierarchical_copy", "nccl"]
DistributeDataset = Literal["experimental_distribute_dataset", "distribute_datasets_from_function"]
# Keras 3 (`keras`) or tf-keras 2.x (`tf_keras`, TF_USE_LEGACY_KERAS=1 in the variant's process)
KerasFlavour = Literal["keras3", "tf_keras"]
# How fit is fed: bench's tf.data pipeline, or the in-memory arrays (`fit(x, y, batch_size=...)`)
Feed = Literal["dataset", "numpy"]
# What trains of a keras.applications model: all of it, only a new head on a frozen base, or the
# head plus the last N layers of the base (fine-tuning)
Trainable = Literal["all", "head"] | Annotated[int, Field(ge=1)]

Collective = Literal["auto", "ring", "nccl"]
Partitioner = Literal["none", "fixed", "min_size"]
# model_parallel's LayoutMap rules: a regex over variable paths -> one entry per dimension, the
# mesh axis that dimension is split over or "none" (TOML has no null: Keras' None)
LayoutDim = Literal["batch", "model", "none"]


def _layout_rules(rules: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each rule a regular expression, each mesh axis splitting one dimension at most."""
    for pattern, dims in rules.items():
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a regular expression ({exc})") from None
        twice = sorted({d for d in dims if d != "none" and dims.count(d) > 1})
        if twice:
            raise ValueError(f"{pattern!r} splits two dimensions over mesh axis "
                             f"'{twice[0]}': an axis splits one dimension at most")
    return rules


LayoutRules = Annotated[dict[Annotated[str, Field(min_length=1, max_length=200)],
                             Annotated[list[LayoutDim], Field(min_length=1, max_length=8)]],
                        AfterValidator(_layout_rules)]



# Unknown keys are errors and numbers finite. Loading validates a file in pydantic's strict mode
# too (bench.scenario.loading): `true` is no integer and "100" no number.
STRICT = ConfigDict(extra="forbid", frozen=True, populate_by_name=True,
                    allow_inf_nan=False)


class Strict(BaseModel):
    """Unknown keys are errors: a typo in a scenario must never pass silently."""

    model_config = STRICT


def _shown_name(value: str) -> str:
    if not value.strip():
        raise ValueError("a blank name: give the scenario a name (it names its run directories "
                         "and report pages)")
    return value


# A name people read and files are named after: not blank, at most MAX_NAME_LENGTH characters
# (a path part is at most 255 bytes, and a run directory adds its time); the document check of
# bench.scenario.document has refused hidden characters before this.
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH),
                 AfterValidator(_shown_name)]


def _not_empty(value: Any) -> Any:
    if isinstance(value, list) and not value:
        raise ValueError("an empty list: give one value, or a list of the values to compare")
    return value


# A pipeline field that may also be a matrix axis: one value, or a list of values (the
# variants each get one value, so the pipeline code only ever sees scalars).
PipelineAxis = Annotated[T | list[T], BeforeValidator(_not_empty)]



class AxisFields:
    """Fields written as one value or a list of values (PipelineAxis): each value is a matrix axis."""

    def axis_values(self, field: str) -> list[Any]:
        """A field's values as a matrix axis (a scalar is an axis of one)."""
        value = getattr(self, field)
        return list(value) if isinstance(value, list) else [value]
