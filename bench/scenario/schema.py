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
from bench.scenario import fields as limits
from bench.scenario.catalogue import validate_model_name
from bench.scenario.check_config import CheckConfig
from bench.scenario.data_config import (
    ARRAY_DATASETS,
    BUILTIN_DATASETS,
    FILE_DATASETS,
    MNIST_SHAPE,
    DataConfig,
    FeatureConfig,
)
from bench.scenario.digest import digest_json
from bench.scenario.environment import EnvironmentConfig, EnvironmentPoint
from bench.scenario.fault import FaultConfig
from bench.scenario.fields import (
    ApiName,
    Axis,
    AxisFields,
    BackendName,
    Collective,
    CrossDeviceOps,
    DistributeDataset,
    Feed,
    KerasFlavour,
    LayoutRules,
    Name,
    OptionalSteps,
    Partitioner,
    PipelineAxis,
    PrecisionName,
    Steps,
    StrategyName,
    Strict,
    Trainable,
    Turns,
)
from bench.scenario.strategy_kinds import KINDS, StrategyKind, strategy_kind
from bench.scenario.target import TargetConfig
from bench.scenario.train_config import BatchConfig, KerasObject, TrainConfig

__all__ = [
    "ARRAY_DATASETS", "BUILTIN_DATASETS", "FILE_DATASETS", "MNIST_SHAPE", "ApiName",
    "BatchConfig", "DataConfig", "DistributeDataset", "FeatureConfig", "KerasObject",
    "PrecisionName", "TrainConfig",
]


class ScenarioMeta(Strict):
    name: Name = Field(description=(
        "The scenario's name: run directories and reports are named after it (not blank, no "
        "control or invisible characters, at most 100 characters)."))
    description: str = Field("", description="What question the scenario answers (shown in reports).")


class ModelConfig(Strict, AxisFields):
    """`name` is a registered model (`bench list`) or `"package.module:function"`."""

    name: str = Field("mlp", description=(
        "A built-in model (mlp, cnn, lstm, resnet50, transformer, recommender), \"applications.<Builder>\" "
        "(any keras.applications builder, weights=None) or \"package.module:function\" (your builder)."))
    extra_matmul: Annotated[int, Field(ge=0, le=16_384)] = Field(0, description=(
        "An n x n matmul added to every forward pass (0: none). Real, known extra work per step, for "
        "regression drills: a candidate made slower on purpose must be flagged by `bench compare`. "
        "At most 16,384: a float32 matrix of 1 GiB, 8.8 TFLOP a step."))
    trainable: PipelineAxis[Trainable] = Field("all", description=(
        "keras.applications models (resnet50, \"applications.<Builder>\"): \"all\", \"head\" (frozen base, "
        "new head) or N (head + the last N layers of the base: fine-tuning)."))

    @model_validator(mode="after")
    def _known_model(self) -> ModelConfig:
        validate_model_name(self.name)
        return self


# A tf.data count: "autotune" lets tf.data tune it at run time.


class CheckpointConfig(Strict):
    """Save a checkpoint every `every` steps, keeping the newest `keep` (Keras ModelCheckpoint for
    fit, tf.train.CheckpointManager for the custom loops): the worker records each save's blocking
    time and size, one restore into a fresh model, and throughput with saving on vs off."""

    every: Steps = Field(description=f"Save every K steps. {limits.STEPS_WHY}")
    keep: Annotated[int, Field(ge=1, le=100)] = Field(1, description=(
        "How many of the newest saves to keep; at most 100, each a copy of the model on disk."))


# What sizing by duration (`min_window_s`, `settle_s`) may make of a window's or a turn's
# settling planned steps: at most this many times as many, or MAX_SIZED_STEPS where that is
# more. It bounds the steps a loop that fixes them up front (a `fit` epoch, in-memory arrays)
# must plan for.
MAX_WINDOW_GROWTH = 8
MAX_SIZED_STEPS = 128


class MeasureConfig(Strict):
    warmup_steps: OptionalSteps = Field(50, description=(
        "Steps run before the first turn (the first compiles; tf.data fills its caches), "
        f"measured but kept out of the statistics. {limits.STEPS_WHY}"))
    steps: Steps = Field(16, description=(
        "Steps per window: each turn runs an unobserved window (the headline) of at least this "
        "many steps, more to last `min_window_s`, and an observed one (the per-step samples) of "
        f"this many. {limits.STEPS_WHY}"))
    repeats: Turns = Field(12, description=(
        "Turns per variant: the number of interleaved rounds. The noise floor is an interval "
        "over them: 12 rounds gave about ±3-4% on a noisy 2-core VM, 3 rounds several times "
        f"that (docs/measuring/measurements.md#noise-floor-interval). {limits.TURNS_WHY}"))
    min_window_s: Annotated[float, Field(ge=0, le=3600)] = Field(0.1, description=(
        "Least duration of an unobserved window: a variant whose `steps` would take less, at "
        "its step time before its first window (its first turn's settling steps or its warmup's "
        "median step, the shorter), runs longer unobserved windows from its first turn on (at "
        f"most {MAX_WINDOW_GROWTH} times `steps`, or {MAX_SIZED_STEPS} steps where that is "
        "more). A window's one sync at its end costs about a step, a large share of a few short "
        "steps. 0 keeps `steps`; single-process variants only (a cluster's tasks must run the "
        "same steps). At most an hour."))
    trace_steps: Annotated[int, Field(ge=0, le=limits.MAX_TRACE_STEPS)] = Field(10, description=(
        "Profiler window after the turns (beside an untraced window of as many steps); 0 turns "
        f"it off. At most {limits.MAX_TRACE_STEPS:,}: a small CNN's trace is about 53 KB a step, and "
        "xprof converts a whole trace at once."))
    timeout_s: Annotated[float, Field(gt=0, le=limits.MAX_TIMEOUT_S)] = Field(300.0, description=(
        "Budget per variant, in seconds of its own running time; its process group is killed past "
        "it. At most a week (604,800 s): a budget longer than that guards against nothing."))
    interleave: bool = Field(True, description=(
        "Interleave the timed windows of all live variants in shuffled rounds (bench.launch.rounds); false "
        "runs the variants one after another, as `bench run --no-interleave` does."))
    settle_steps: OptionalSteps = Field(1, description=(
        "The least untimed steps after each gate release before a turn's windows (0: none). "
        f"{limits.STEPS_WHY}"))
    settle_s: Annotated[float, Field(ge=0, le=3600)] = Field(0.05, description=(
        "Least duration of that settling: a variant released from its gate runs cold, its "
        "steps 10-70% slow for their first 50 ms (a 2-core VM, steps of 2 ms; longer settling, "
        "0.1-1 s, did not bring its headline closer to a plain loop's: "
        "docs/measuring/measurements.md#settling). The first turn settles, each step synced, "
        "until this long has passed since its release, and every later turn settles as many "
        f"steps (at least `settle_steps`, at most {MAX_WINDOW_GROWTH} times them or "
        f"{MAX_SIZED_STEPS}, where that is more). 0 settles `settle_steps`; single-process "
        "variants only. At most an hour."))
    iterators: Turns = Field(1, description=(
        "Fresh input iterators the turns are spread over, each made after its turn's gate; the "
        "record gives each one's rate, and the terminal calls out two clearly apart speeds. "
        "bench keeps every iterator alive, so the headline is the step's rate; what ending one "
        f"costs an epoch is measured apart (`epochs`). At most {limits.MAX_TURNS:,}."))
    epochs: Annotated[int, Field(ge=0, le=limits.MAX_TURNS)] = Field(1, description=(
        "Short epochs at the variant's finish, after its turns, each on a fresh input iterator "
        "that ends at once, as a loop over a finite dataset ends each epoch (a plain `fit("
        "dataset, epochs=N)`, `for batch in dataset`): the record holds how long each end took, "
        "where such a loop waits for tf.data's autotune thread. 0 turns them off; local "
        f"single-process variants only, not the run's control twin or yardstick. At most "
        f"{limits.MAX_TURNS:,}."))
    epoch_steps: Steps = Field(64, description=f"Steps in each of those epochs. {limits.STEPS_WHY}")
    max_live: Literal["auto"] | Annotated[int, Field(ge=1, le=limits.MAX_RUN_VARIANTS)] = Field(
        "auto", description=(
            "How many variant processes may be alive at once (\"auto\": from free memory, and GPU "
            "memory where there are GPUs); more variants are run in batches of this size. At most "
            f"{limits.MAX_RUN_VARIANTS:,}, the variants one run may hold."))
    control: bool = Field(True, description=(
        "Run a twin of the baseline variant (an A/A control) so the run states its own noise floor."))
    checkpoint: CheckpointConfig | None = Field(None, description=(
        "What checkpoints cost (bench.training.checkpointing); none: no checkpoints are written."))


class StrategyConfig(Strict):
    name: StrategyName = Field(description=(
        "The tf.distribute strategy: default, one_device, mirrored, central_storage, "
        "multi_worker_mirrored, parameter_server or tpu; or the keras.distribution one (JAX): "
        "data_parallel or model_parallel."))
    replicas: Axis[Annotated[int, Field(ge=1, le=limits.MAX_REPLICAS)]] = Field([1], description=(
        "Replicas in sync (mirrored, central_storage); one_device and default run exactly 1. "
        f"{limits.REPLICAS_WHY}"))
    devices: Literal["auto", "cpu", "gpu"] = Field("auto", description=(
        "auto: GPUs when present, else logical CPU devices; gpu or cpu forces one kind (cpu hides the "
        "GPUs)."))
    cross_device_ops: Axis[CrossDeviceOps] = Field(["auto"], description=(
        "MirroredStrategy's all-reduce implementation (mirrored only); nccl is skipped on CPU."))
    workers: Axis[Annotated[int, Field(ge=1, le=limits.MAX_WORKERS)]] = Field([1], description=(
        f"Cluster strategies: worker processes, each with its own TF_CONFIG. At most "
        f"{limits.MAX_WORKERS}. {limits.PROCESSES_WHY}"))
    devices_per_worker: Axis[Annotated[int, Field(ge=1, le=limits.MAX_DEVICES_PER_WORKER)]] = Field(
        [1], description=(
            "MultiWorkerMirrored: GPUs per worker (on CPU a worker always uses CPU:0). At most "
            f"{limits.MAX_DEVICES_PER_WORKER}, the GPUs of the largest hosts."))
    ps: Axis[Annotated[int, Field(ge=1, le=limits.MAX_PS)]] = Field([1], description=(
        f"ParameterServer: parameter-server tasks. At most {limits.MAX_PS}. {limits.PROCESSES_WHY}"))
    collective: Axis[Collective] = Field(["auto"], description=(
        "MultiWorkerMirrored all-reduce implementation (nccl is skipped on CPU)."))
    partitioner: Partitioner = Field("none", description="ParameterServer variable sharding across ps tasks.")
    layout: LayoutRules | None = Field(None, description=(
        "model_parallel: the LayoutMap rules, a regex over variable paths (`re.search`, as "
        "keras.distribution.LayoutMap matches them) -> the mesh axis each dimension is split "
        "over, `\"model\"`, `\"batch\"` or `\"none\"`; e.g. `{ \"hidden.*kernel\" = "
        "[\"none\", \"model\"] }`. Variables no rule matches are replicated. Default: bench's "
        "layout for its built-in models (every Dense and Conv2D kernel's output dimension, and "
        "its bias, split over `model`)."))
    tpu: str = Field("", description=(
        "TPUClusterResolver name or address; \"\" = a TPU attached to this host."))
    precision: Axis[PrecisionName] | None = Field(None, description=(
        "Precision policies for this entry only (default: train.precision), e.g. to compare mixed_bfloat16 "
        "with float32 on one strategy without doubling the whole matrix."))
    api: Axis[ApiName] | None = Field(None, description=(
        "The training APIs for this entry only (default: train.api), so one scenario can hold workloads "
        "that do not make a full matrix (e.g. the seeds' tutorials)."))
    keras: Axis[KerasFlavour] | None = Field(None, description=(
        "The Keras flavours for this entry only (default: train.keras)."))
    backend: Axis[BackendName] | None = Field(None, description=(
        "The Keras backends for this entry only (default: train.backend, or the strategy's own "
        "backend where it has one only); each must have the strategy."))
    feed: Feed | None = Field(None, description="How fit is fed, for this entry only (default: data.feed).")
    model: ModelConfig | None = Field(None, description=(
        "The model for this entry only, a table like [model] (default: [model])."))
    batch: BatchConfig | None = Field(None, description=(
        "The [batch] table for this entry only (its ids then name the rule and the scaling)."))
    min_effect: Annotated[float, Field(ge=0, lt=1)] | None = Field(None, description=(
        "Overrides compare.min_effect for this entry's variants."))

    def backends(self, train: TrainConfig) -> list[str]:
        """The Keras backends this entry runs on, not yet judged (bench.scenario.matrix judges
        them): its own `backend`, else train.backend's that have the strategy, else the
        strategy's own."""
        if self.backend is not None:
            return list(self.backend)
        kind = strategy_kind(self.name)
        return [b for b in train.backend if b in kind.backends] or [kind.backends[0]]

    @model_validator(mode="after")
    def _consistent(self) -> StrategyConfig:
        given = self.model_fields_set
        kind = strategy_kind(self.name)

        def only_for(key: str) -> ValueError:
            names = [name for name, other in KINDS.items() if key in other.fields]
            return ValueError(f"'{key}' applies to strategy {' / '.join(map(repr, names))} only")

        if kind.baseline and self.replicas != [1]:
            raise ValueError(f"strategy '{self.name}' runs exactly 1 replica; remove 'replicas'")
        if "cross_device_ops" not in kind.fields and self.cross_device_ops != ["auto"]:
            raise only_for("cross_device_ops")
        if kind.cluster and "replicas" in given:
            raise ValueError(f"strategy '{self.name}' takes 'workers' (and 'devices_per_worker'), "
                             "not 'replicas'")
        for key in ("workers", "devices_per_worker", "collective", "ps", "partitioner", "tpu",
                    "layout"):
            if key in given and key not in kind.fields:
                raise only_for(key)
        return self


class CompareConfig(Strict):
    """How `bench compare` judges this scenario's variants."""

    min_effect: Annotated[float, Field(ge=0, lt=1)] = Field(0.05, description=(
        "The smallest slowdown that counts as a regression (0.05: 5%)."))


class ClusterConfig(Strict):
    """How local clusters (multi-worker, parameter-server) are started."""

    network: Literal["isolated", "host"] = Field("isolated", description=(
        "isolated: a private network namespace (TensorFlow's servers bind 0.0.0.0, so this is the only way "
        "to keep them off other interfaces); host: the machine's network, 127.0.0.1 ports."))
    ps_devices: Literal["cpu", "gpu"] = Field("cpu", description=(
        "Parameter servers hold variables and serve them: on CPU by default, so every GPU computes."))


class Scenario(Strict):
    scenario: ScenarioMeta = Field(description="The scenario's name and the question it answers.")
    model: ModelConfig = Field(ModelConfig(), description="The model every variant trains.")
    data: DataConfig = Field(DataConfig(), description=(
        "Which examples to feed and how the tf.data pipeline is shaped."))
    batch: BatchConfig = Field(description="The batch-scaling rule, the batch sizes and the learning rate.")
    train: TrainConfig = Field(TrainConfig(), description=(
        "How each step trains: API, precision, loss, optimizer, metrics, Keras flavour, compilation."))
    measure: MeasureConfig = Field(MeasureConfig(), description=(
        "How variants are measured: steps, rounds, budget, interleaving, controls."))
    cluster: ClusterConfig = Field(ClusterConfig(), description=(
        "How local clusters (multi-worker, parameter-server) are started."))
    compare: CompareConfig = Field(CompareConfig(), description=(
        "How `bench compare` judges this scenario's variants."))
    check: CheckConfig = Field(CheckConfig(), description=(
        "Optional correctness checks run next to the measurement."))
    fault: FaultConfig | None = Field(None, description="Kill a worker mid-run and measure the recovery.")
    environment: EnvironmentConfig | None = Field(None, description=(
        "Which TensorFlow builds the variants run with, each in a cached virtualenv."))
    strategies: Annotated[list[StrategyConfig], Field(min_length=1)] = Field(description=(
        "The strategy entries, one [[strategies]] table each."))
    target: TargetConfig | None = Field(None, description=(
        "Train every variant to a quality target and record examples and time to it "
        "(docs/guides/time-to-target.md)."))

    @property
    def name(self) -> str:
        return self.scenario.name

    def digest(self) -> str:
        """A short hash of the validated content: two runs with equal digests ran the same scenario."""
        canonical = digest_json(self.model_dump(mode="json", by_alias=True))
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
    layout: LayoutRules | None = None  # model_parallel's LayoutMap rules (None: bench's own)
    tpu: str = ""
    network: Literal["isolated", "host"] = "isolated"
    ps_devices: Literal["cpu", "gpu"] = "cpu"
    min_effect: float = 0.05
    api: ApiName
    precision: PrecisionName
    backend: BackendName = "tensorflow"  # the Keras backend its processes run
    distribute_dataset: DistributeDataset | None  # None for fit: Keras distributes the dataset
    batch_rule: Literal["weak", "strong"]
    per_replica_batch: int
    global_batch: int
    learning_rate: float  # the base learning rate (0.001 unless given) times lr_factor
    lr_scaling: str
    lr_factor: float = 1.0  # what the batch rule multiplies the base learning rate by
    lr_warmup_examples: int = 0  # the learning rate ramps up to its scaled value over these
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
    target: TargetConfig | None = None  # train to a quality target after the measurement

    @property
    def kind(self) -> StrategyKind:
        """What its strategy is (bench.scenario.strategy_kinds)."""
        return strategy_kind(self.strategy)

    @property
    def is_cluster(self) -> bool:
        return self.kind.cluster

    @property
    def total_steps(self) -> int:
        """Warmup and timed steps (what a fault's at_step counts in)."""
        return self.measure.warmup_steps + self.measure.repeats * self.measure.steps

    def axes(self) -> dict[str, Any]:
        """The values that distinguish this variant from its siblings (`bench.axes`)."""
        return variant_axes(self.model_dump(mode="json"))
