"""The scenario schema: pydantic models of every section, and the Variant a matrix point becomes.

pydantic gives strict typing, unknown-key rejection and precise error locations; `loading` turns
its errors into one line naming the file and the field. Nothing here imports TensorFlow: the
parent and the worker share these models, and validating must be instant.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)

from bench.axes import variant_axes
from bench.scenario.catalogue import validate_model_name
from bench.scenario.environment import EnvironmentConfig, EnvironmentPoint
from bench.scenario.fault import FaultConfig

T = TypeVar("T")


def _as_list(value: Any) -> Any:
    """Let a matrix axis be written as a scalar (`replicas = 2`) or a list (`replicas = [1, 2]`)."""
    return value if isinstance(value, list) else [value]


# A matrix axis: one value or a non-empty list of values; always a list after validation.
Axis = Annotated[list[T], BeforeValidator(_as_list), Field(min_length=1)]

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]

StrategyName = Literal["default", "one_device", "mirrored", "central_storage",
                       "multi_worker_mirrored", "parameter_server", "tpu"]
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

SINGLE_REPLICA_STRATEGIES = ("default", "one_device")
# What every other strategy is measured and checked against (speed-ups, loss parity).
BASELINE_STRATEGIES = SINGLE_REPLICA_STRATEGIES
# Strategies whose variants are clusters of processes described by TF_CONFIG.
CLUSTER_STRATEGIES = ("multi_worker_mirrored", "parameter_server")


class _Strict(BaseModel):
    """Unknown keys are errors: a typo in a scenario must never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ScenarioMeta(_Strict):
    name: Annotated[str, Field(min_length=1)]
    description: str = ""


def _not_empty(value: Any) -> Any:
    if isinstance(value, list) and not value:
        raise ValueError("an empty list: give one value, or a list of the values to compare")
    return value


# A pipeline field that may also be a matrix axis: one value, or a list of values (the
# variants each get one value, so the pipeline code only ever sees scalars).
PipelineAxis = Annotated[T | list[T], BeforeValidator(_not_empty)]


class _AxisFields:
    """Fields written as one value or a list of values (PipelineAxis): each value is a matrix axis."""

    def axis_values(self, field: str) -> list[Any]:
        """A field's values as a matrix axis (a scalar is an axis of one)."""
        value = getattr(self, field)
        return list(value) if isinstance(value, list) else [value]


class ModelConfig(_Strict, _AxisFields):
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
Autotune = Literal["autotune"]
Prefetch = Autotune | NonNegativeInt
MapParallelism = Autotune | PositiveInt
ImageSize = Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [H, W]


ARRAY_DATASETS = ("synthetic", "mnist", "fashion_mnist")  # held in memory as numpy arrays
FILE_DATASETS = ("tfrecord", "tfds")  # read from files by tf.data
MNIST_SHAPE = (28, 28, 1)  # one example of the MNIST family (mnist, fashion_mnist), as stored


class DataConfig(_Strict, _AxisFields):
    """Which examples to feed and how the tf.data pipeline is shaped."""

    name: Literal["synthetic", "mnist", "fashion_mnist", "tfrecord", "tfds"] = "synthetic"
    path: str | None = None  # explicit .npz file or directory of IDX files
    download: bool = False  # allow keras.datasets to fetch from the internet
    # tfrecord only: a glob of TFRecord shards in bench's schema (`bench data write-tfrecord`),
    # and of the held-out shards that check.accuracy evaluates on
    files: str | None = None
    eval_files: str | None = None
    interleave_cycle_length: MapParallelism = "autotune"  # files read at once
    interleave_parallelism: MapParallelism = "autotune"  # threads reading them
    # tfds only: a dataset tensorflow_datasets can load (name[/config][:version]), already
    # prepared under data_dir (default: tfds's own, ~/tensorflow_datasets); never downloaded
    tfds_name: str | None = None
    data_dir: str | None = None
    fallback: Literal["none", "synthetic"] = "none"
    num_examples: PositiveInt = 10_000  # synthetic data (also a fallback's size)
    # synthetic data; also what a fallback to synthetic data substitutes for tfrecord and tfds
    shape: list[PositiveInt] = list(MNIST_SHAPE)
    # synthetic [timesteps, features] only: each series is cut to a random length in
    # [timesteps / 4, timesteps] and zero-padded (the LSTM masks the padding)
    variable_length: bool = False
    num_classes: Annotated[int, Field(ge=2)] = 10  # synthetic and tfrecord data
    seed: int = 0
    shuffle_buffer: NonNegativeInt = 10_000  # 0 turns shuffling off
    cache: bool = True
    # Both may be lists: each value becomes a matrix axis (input-pipeline comparisons).
    prefetch: PipelineAxis[Prefetch] = "autotune"  # 0 turns prefetch off
    map_parallelism: PipelineAxis[MapParallelism] = "autotune"
    auto_shard: Literal["auto", "data", "file", "off"] = "auto"
    # "numpy": Keras fit gets the in-memory arrays (fit(x, y, batch_size=...)) and builds the
    # pipeline itself; in-memory data and api = "fit" only
    feed: Feed = "dataset"
    # Host-side image preprocessing in the tf.data map (train and eval: resize; train only:
    # the random augmentations; eval takes a central crop of random_crop's size instead).
    resize: ImageSize | None = None
    random_crop: ImageSize | None = None
    random_flip: bool = False  # left-right
    random_brightness: Annotated[float, Field(ge=0)] = 0.0  # max delta added (0: off)



class BatchConfig(_Strict):
    """weak: per-replica batch fixed; strong: global batch fixed and split across replicas."""

    rule: Literal["weak", "strong"] = "weak"
    per_replica: Axis[PositiveInt] | None = None
    global_batch: Axis[PositiveInt] | None = Field(default=None, alias="global")
    learning_rate: Annotated[float, Field(gt=0)] = 0.001
    lr_scaling: Literal["none", "linear", "sqrt"] = "none"
    lr_reference_batch: PositiveInt | None = None  # batch at which learning_rate applies

    @model_validator(mode="after")
    def _batch_matches_rule(self) -> BatchConfig:
        if self.rule == "weak":
            if self.global_batch is not None:
                raise ValueError("'global' is for rule = \"strong\"; weak scaling sets 'per_replica'")
            if self.per_replica is None:
                raise ValueError("rule = \"weak\" needs 'per_replica'")
        else:
            if self.per_replica is not None:
                raise ValueError("'per_replica' is for rule = \"weak\"; strong scaling sets 'global'")
            if self.global_batch is None:
                raise ValueError("rule = \"strong\" needs 'global'")
        return self


class TrainConfig(_Strict, _AxisFields):
    api: Axis[ApiName] = ["fit", "ctl"]
    precision: Axis[PrecisionName] = ["float32"]
    distribute_dataset: Axis[DistributeDataset] = ["experimental_distribute_dataset"]
    optimizer: Literal["adam", "sgd"] = "adam"
    # A list of any of these three is a matrix axis.
    keras: PipelineAxis[KerasFlavour] = "keras3"
    steps_per_execution: PipelineAxis[PositiveInt] = 1
    jit_compile: PipelineAxis[bool] = False
    # mixed_float16 on CPU runs single-threaded (~400x slower): skip it unless asked to run.
    float16_on_cpu: Literal["skip", "run"] = "skip"
    # TF_GPU_THREAD_MODE for processes that compute on GPUs (None: TensorFlow's default, global).
    # gpu_private gives each GPU its own kernel-launch threads, which helps small steps.
    gpu_thread_mode: Literal["global", "gpu_private", "gpu_shared"] | None = None


class CheckpointConfig(_Strict):
    """Save a checkpoint every `every` steps, keeping the newest `keep` (Keras ModelCheckpoint for
    fit, tf.train.CheckpointManager for the custom loops): the worker records each save's blocking
    time and size, one restore into a fresh model, and throughput with saving on vs off."""

    every: PositiveInt
    keep: PositiveInt = 1


class MeasureConfig(_Strict):
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
    # How many variant processes may be alive at once ("auto": from free memory, and GPU memory
    # where there are GPUs); more variants are run in batches of this size.
    max_live: Literal["auto"] | PositiveInt = "auto"
    # Run a twin of the baseline variant (an A/A control) so the run states its own noise floor.
    control: bool = True
    # What checkpoints cost (bench.training.checkpointing); None: no checkpoints are written.
    checkpoint: CheckpointConfig | None = None


class StrategyConfig(_Strict):
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


class LossParityConfig(_Strict):
    """Train k steps from the same seed on the same batches; compare the loss with the baseline."""

    steps: PositiveInt = 10
    batch: PositiveInt = 64  # one global batch for every variant (must split over its replicas)
    learning_rate: Annotated[float, Field(gt=0)] = 0.001
    tolerance: Annotated[float, Field(gt=0)] = 0.01  # relative difference of the losses


class AccuracyConfig(_Strict):
    """Train a seeded copy `steps` steps through the variant's own strategy and API, then
    evaluate it on a held-out split: below `min`, the variant is marked (a bound, as tf-models'
    benchmarks keep one, so a fast configuration that no longer learns is caught)."""

    min: Annotated[float, Field(gt=0, le=1)]
    steps: PositiveInt = 200  # at the variant's own global batch and learning rate
    # mnist / fashion_mnist / synthetic: "test" (held out) or "train"; tfds: any split it has;
    # tfrecord: "test" reads data.eval_files, "train" data.files
    eval_split: Annotated[str, Field(min_length=1)] = "test"


class CheckConfig(_Strict):
    """Optional correctness checks run next to the measurement."""

    loss_parity: LossParityConfig | None = None
    accuracy: AccuracyConfig | None = None


class CompareConfig(_Strict):
    """How `bench compare` judges this scenario's variants."""

    min_effect: Annotated[float, Field(ge=0, lt=1)] = 0.05  # smallest slowdown that counts


class ClusterConfig(_Strict):
    """How local clusters (multi-worker, parameter-server) are started."""

    # isolated: a private network namespace (TensorFlow's servers bind 0.0.0.0, so this is the
    # only way to keep them off other interfaces); host: the machine's network, 127.0.0.1 ports.
    network: Literal["isolated", "host"] = "isolated"
    # Parameter servers hold variables and serve them: on CPU by default, so every GPU computes.
    ps_devices: Literal["cpu", "gpu"] = "cpu"


class Scenario(_Strict):
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


class Variant(_Strict):
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
    learning_rate: float
    lr_scaling: str
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
