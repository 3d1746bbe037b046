"""The scenario schema: pydantic models of every section, and the Variant a matrix point becomes.

pydantic gives strict typing, unknown-key rejection and precise error locations; `loading` turns
its errors into one line naming the file and the field. Nothing here imports TensorFlow: the
parent and the worker share these models, and validating must be instant. The sections with the
most fields live beside it (`data_config`, `train_config`; their shared types in `fields`) and
are importable from here.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from bench.axes import variant_axes
from bench.scenario.catalogue import validate_model_name
from bench.scenario.data_config import (
    ARRAY_DATASETS,
    BUILTIN_DATASETS,
    FILE_DATASETS,
    MNIST_SHAPE,
    DataConfig,
    FeatureConfig,
)
from bench.scenario.environment import EnvironmentConfig, EnvironmentPoint
from bench.scenario.fault import FaultConfig
from bench.scenario.fields import (
    BASELINE_STRATEGIES,
    CLUSTER_STRATEGIES,
    SINGLE_REPLICA_STRATEGIES,
    ApiName,
    Axis,
    AxisFields,
    Collective,
    CrossDeviceOps,
    DistributeDataset,
    Feed,
    KerasFlavour,
    NonNegativeInt,
    Partitioner,
    PipelineAxis,
    PositiveInt,
    PrecisionName,
    StrategyName,
    Strict,
    Trainable,
)
from bench.scenario.train_config import BatchConfig, KerasObject, TrainConfig

__all__ = [
    "ARRAY_DATASETS", "BASELINE_STRATEGIES", "BUILTIN_DATASETS", "CLUSTER_STRATEGIES",
    "FILE_DATASETS", "MNIST_SHAPE", "SINGLE_REPLICA_STRATEGIES", "ApiName", "BatchConfig",
    "DataConfig", "DistributeDataset", "FeatureConfig", "KerasObject", "PrecisionName",
    "TrainConfig",
]


class ScenarioMeta(Strict):
    name: Annotated[str, Field(min_length=1)]
    description: str = ""


class ModelConfig(Strict, AxisFields):
    """`name` is a registered model (`bench list`) or `"package.module:function"`."""

    name: str = "mlp"
    # An n x n matmul added to every forward pass (0: none). Real, known extra work per step, for
    # regression drills: a candidate made slower on purpose must be flagged by `bench compare`.
    extra_matmul: NonNegativeInt = 0
    # keras.applications models (resnet50, "applications.<Builder>"): "all", "head" (frozen base,
    # new head) or N (head + the last N layers of the base); a list is a matrix axis.
    trainable: PipelineAxis[Trainable] = "all"

    @model_validator(mode="after")
    def _known_model(self) -> ModelConfig:
        validate_model_name(self.name)
        return self


# A tf.data count: "autotune" lets tf.data tune it at run time.


class CheckpointConfig(Strict):
    """Save a checkpoint every `every` steps, keeping the newest `keep` (Keras ModelCheckpoint for
    fit, tf.train.CheckpointManager for the custom loops): the worker records each save's blocking
    time and size, one restore into a fresh model, and throughput with saving on vs off."""

    every: PositiveInt
    keep: PositiveInt = 1


class MeasureConfig(Strict):
    warmup_steps: NonNegativeInt = 10
    steps: PositiveInt = 100
    repeats: PositiveInt = 3
    trace_steps: NonNegativeInt = 10  # profiler window after the timed steps; 0 turns it off
    timeout_s: Annotated[float, Field(gt=0)] = 300.0
    # Interleave the timed windows of all live variants in shuffled rounds (bench.launch.rounds);
    # false runs the variants one after another, as `bench run --no-interleave` does.
    interleave: bool = True
    # Untimed steps after each gate release before an interleaved window's clock starts: a
    # variant's first step after idling at the gate runs cold (1.1-1.4x the same variant's steps
    # run back to back here, the second 1.0-1.1x), so by default one settles.
    settle_steps: NonNegativeInt = 1
    # Fresh input iterators the turns are spread over, as a user's epochs each start a new one:
    # under MirroredStrategy some iterators run their every step at half speed here, so one
    # iterator would show one of the two speeds; several show both, and the record their shares.
    iterators: PositiveInt = 1
    # How many variant processes may be alive at once ("auto": from free memory, and GPU memory
    # where there are GPUs); more variants are run in batches of this size.
    max_live: Literal["auto"] | PositiveInt = "auto"
    # Run a twin of the baseline variant (an A/A control) so the run states its own noise floor.
    control: bool = True
    # What checkpoints cost (bench.training.checkpointing); None: no checkpoints are written.
    checkpoint: CheckpointConfig | None = None


class StrategyConfig(Strict):
    name: StrategyName
    replicas: Axis[PositiveInt] = [1]
    devices: Literal["auto", "cpu", "gpu"] = "auto"
    cross_device_ops: Axis[CrossDeviceOps] = ["auto"]
    # Cluster strategies: worker processes, their local devices, parameter servers.
    workers: Axis[PositiveInt] = [1]
    devices_per_worker: Axis[PositiveInt] = [1]
    ps: Axis[PositiveInt] = [1]
    collective: Axis[Collective] = ["auto"]  # MultiWorkerMirrored all-reduce implementation
    partitioner: Partitioner = "none"  # ParameterServer variable sharding across ps tasks
    tpu: str = ""  # TPUClusterResolver name or address; "" = a TPU attached to this host
    # Precision policies for this entry only (default: train.precision), e.g. to compare
    # mixed_bfloat16 with float32 on one strategy without doubling the whole matrix.
    precision: Axis[PrecisionName] | None = None
    # This entry only, like precision: the training APIs, Keras flavours, the feed and the model
    # (default: [train], [data].feed and [model]), so one scenario can hold workloads that do not
    # make a full matrix (e.g. the seeds' tutorials).
    api: Axis[ApiName] | None = None
    keras: Axis[KerasFlavour] | None = None
    feed: Feed | None = None
    model: ModelConfig | None = None
    min_effect: Annotated[float, Field(ge=0, lt=1)] | None = None  # overrides compare.min_effect

    @model_validator(mode="after")
    def _consistent(self) -> StrategyConfig:
        given = self.model_fields_set
        if self.name in SINGLE_REPLICA_STRATEGIES and self.replicas != [1]:
            raise ValueError(f"strategy '{self.name}' runs exactly 1 replica; remove 'replicas'")
        if self.name != "mirrored" and self.cross_device_ops != ["auto"]:
            raise ValueError("'cross_device_ops' applies to strategy 'mirrored' only")
        if self.name in CLUSTER_STRATEGIES and "replicas" in given:
            raise ValueError(f"strategy '{self.name}' takes 'workers' (and 'devices_per_worker'), "
                             "not 'replicas'")
        only_for = {"workers": CLUSTER_STRATEGIES, "devices_per_worker": ("multi_worker_mirrored",),
                    "collective": ("multi_worker_mirrored",), "ps": ("parameter_server",),
                    "partitioner": ("parameter_server",), "tpu": ("tpu",)}
        for key, names in only_for.items():
            if key in given and self.name not in names:
                raise ValueError(f"'{key}' applies to strategy {' / '.join(map(repr, names))} only")
        return self


class LossParityConfig(Strict):
    """Train k steps from the same seed on the same batches; compare the loss with the baseline."""

    steps: PositiveInt = 10
    batch: PositiveInt = 64  # one global batch for every variant (must split over its replicas)
    learning_rate: Annotated[float, Field(gt=0)] = 0.001
    tolerance: Annotated[float, Field(gt=0)] = 0.01  # relative difference of the losses


class AccuracyConfig(Strict):
    """Train a seeded copy `steps` steps through the variant's own strategy and API, then
    evaluate it on a held-out split: below `min`, the variant is marked (a bound, as tf-models'
    benchmarks keep one, so a fast configuration that no longer learns is caught)."""

    min: Annotated[float, Field(gt=0, le=1)]
    steps: PositiveInt = 200  # at the variant's own global batch and learning rate
    # mnist / fashion_mnist / synthetic: "test" (held out) or "train"; tfds: any split it has;
    # tfrecord: "test" reads data.eval_files, "train" data.files
    eval_split: Annotated[str, Field(min_length=1)] = "test"


class CheckConfig(Strict):
    """Optional correctness checks run next to the measurement."""

    loss_parity: LossParityConfig | None = None
    accuracy: AccuracyConfig | None = None


class CompareConfig(Strict):
    """How `bench compare` judges this scenario's variants."""

    min_effect: Annotated[float, Field(ge=0, lt=1)] = 0.05  # smallest slowdown that counts


class ClusterConfig(Strict):
    """How local clusters (multi-worker, parameter-server) are started."""

    # isolated: a private network namespace (TensorFlow's servers bind 0.0.0.0, so this is the
    # only way to keep them off other interfaces); host: the machine's network, 127.0.0.1 ports.
    network: Literal["isolated", "host"] = "isolated"
    # Parameter servers hold variables and serve them: on CPU by default, so every GPU computes.
    ps_devices: Literal["cpu", "gpu"] = "cpu"


class Scenario(Strict):
    scenario: ScenarioMeta
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    batch: BatchConfig
    train: TrainConfig = TrainConfig()
    measure: MeasureConfig = MeasureConfig()
    cluster: ClusterConfig = ClusterConfig()
    compare: CompareConfig = CompareConfig()
    check: CheckConfig = CheckConfig()
    fault: FaultConfig | None = None
    environment: EnvironmentConfig | None = None  # which TensorFlow builds (a matrix axis)
    strategies: Annotated[list[StrategyConfig], Field(min_length=1)]

    @property
    def name(self) -> str:
        return self.scenario.name

    def digest(self) -> str:
        """A short hash of the validated content: two runs with equal digests ran the same scenario."""
        canonical = self.model_dump_json(by_alias=True, exclude=None if self.environment else {"environment"})
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class Variant(Strict):
    """One concrete point of a scenario's matrix; everything a worker process needs to run it."""

    id: str
    index: int
    scenario_name: str
    scenario_digest: str
    strategy: StrategyName
    replicas: int  # planned replicas in sync; a record's "effective" block says what ran
    devices: str
    cross_device_ops: CrossDeviceOps
    workers: int = 1
    devices_per_worker: int = 1
    ps: int = 0
    collective: Collective = "auto"
    partitioner: Partitioner = "none"
    tpu: str = ""
    network: Literal["isolated", "host"] = "isolated"
    ps_devices: Literal["cpu", "gpu"] = "cpu"
    min_effect: float = 0.05
    api: ApiName
    precision: PrecisionName
    distribute_dataset: DistributeDataset | None  # None for fit: Keras distributes the dataset
    batch_rule: Literal["weak", "strong"]
    per_replica_batch: int
    global_batch: int
    learning_rate: float  # the base learning rate (0.001 unless given) times lr_factor
    lr_scaling: str
    lr_factor: float = 1.0  # what the batch rule multiplies the base learning rate by
    # whether the scenario gave the base learning rate (batch.learning_rate or a [train]
    # optimizer table's); if not, a compiled model's optimizer keeps its own, times lr_factor
    learning_rate_given: bool = True
    # the scenario file's folder: every worker imports a user's modules from it first
    scenario_dir: str | None = None
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    measure: MeasureConfig
    check: CheckConfig = CheckConfig()
    fault: FaultConfig | None = None
    # The run's controls: "baseline" is the variant the A/A twin copies, "twin" the copy, and
    # "yardstick" the fixed calibration workload the nightly gate measures variants against.
    control: Literal["baseline", "twin", "yardstick"] | None = None
    environment: EnvironmentPoint | None = None  # its [environment] point (None: this interpreter)

    @property
    def is_cluster(self) -> bool:
        return self.strategy in CLUSTER_STRATEGIES

    @property
    def total_steps(self) -> int:
        """Warmup and timed steps (what a fault's at_step counts in)."""
        return self.measure.warmup_steps + self.measure.repeats * self.measure.steps

    def axes(self) -> dict[str, Any]:
        """The values that distinguish this variant from its siblings (`bench.axes`)."""
        return variant_axes(self.model_dump(mode="json"))
