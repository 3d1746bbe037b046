"""Scenario files: TOML → validated pydantic models → a matrix of concrete Variants.

pydantic gives us strict typing, unknown-key rejection and precise error locations for free; the
only thing we add is turning its errors into one line that names the file and the field.
Nothing here imports TensorFlow: validating and expanding must be instant.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import math
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from bench.axes import DATA_AXES
from bench.errors import ScenarioError

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


class ModelConfig(_Strict):
    """`name` is a registered model (`bench list`) or `"package.module:function"`."""

    name: str = "mlp"
    # An n x n matmul added to every forward pass (0: none). Real, known extra work per step, for
    # regression drills: a candidate made slower on purpose must be flagged by `bench compare`.
    extra_matmul: NonNegativeInt = 0

    @model_validator(mode="after")
    def _known_model(self) -> ModelConfig:
        from bench.training.models import validate_model_name

        validate_model_name(self.name)
        return self


# A tf.data count: "autotune" lets tf.data tune it at run time.
Autotune = Literal["autotune"]
Prefetch = Autotune | NonNegativeInt
MapParallelism = Autotune | PositiveInt
ImageSize = Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [H, W]


def _not_empty(value: Any) -> Any:
    if isinstance(value, list) and not value:
        raise ValueError("an empty list: give one value, or a list of the values to compare")
    return value


# A pipeline field that may also be a matrix axis: one value, or a list of values (the
# variants each get one value, so the pipeline code only ever sees scalars).
PipelineAxis = Annotated[T | list[T], BeforeValidator(_not_empty)]

ARRAY_DATASETS = ("synthetic", "mnist", "fashion_mnist")  # held in memory as numpy arrays
FILE_DATASETS = ("tfrecord", "tfds")  # read from files by tf.data


class DataConfig(_Strict):
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
    shape: list[PositiveInt] = [28, 28, 1]
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
    # Host-side image preprocessing in the tf.data map (train and eval: resize; train only:
    # the random augmentations; eval takes a central crop of random_crop's size instead).
    resize: ImageSize | None = None
    random_crop: ImageSize | None = None
    random_flip: bool = False  # left-right
    random_brightness: Annotated[float, Field(ge=0)] = 0.0  # max delta added (0: off)

    def axis_values(self, field: str) -> list[Any]:
        """A pipeline field's values as a matrix axis (a scalar is an axis of one)."""
        value = getattr(self, field)
        return list(value) if isinstance(value, list) else [value]


# Fields that only mean something for some sources: set elsewhere, they are an error.
_DATA_FIELDS_FOR = {
    "files": ("tfrecord",), "eval_files": ("tfrecord",), "interleave_cycle_length": ("tfrecord",),
    "interleave_parallelism": ("tfrecord",), "tfds_name": ("tfds",), "data_dir": ("tfds",),
}
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


class TrainConfig(_Strict):
    api: Axis[ApiName] = ["fit", "ctl"]
    precision: Axis[PrecisionName] = ["float32"]
    distribute_dataset: Axis[DistributeDataset] = ["experimental_distribute_dataset"]
    optimizer: Literal["adam", "sgd"] = "adam"
    steps_per_execution: PositiveInt = 1
    jit_compile: bool = False
    # mixed_float16 on CPU runs single-threaded (~400x slower): skip it unless asked to run.
    float16_on_cpu: Literal["skip", "run"] = "skip"


class MeasureConfig(_Strict):
    warmup_steps: NonNegativeInt = 10
    steps: PositiveInt = 100
    repeats: PositiveInt = 3
    trace_steps: NonNegativeInt = 10  # profiler window after the timed steps; 0 turns it off
    timeout_s: Annotated[float, Field(gt=0)] = 300.0


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
    strategies: Annotated[list[StrategyConfig], Field(min_length=1)]

    @property
    def name(self) -> str:
        return self.scenario.name

    def digest(self) -> str:
        """A short hash of the validated content: two runs with equal digests ran the same scenario."""
        canonical = self.model_dump_json(by_alias=True)
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

    @property
    def is_cluster(self) -> bool:
        return self.strategy in CLUSTER_STRATEGIES

    def axes(self) -> dict[str, Any]:
        """The values that distinguish this variant from its siblings, for tables and matching."""
        return {
            "strategy": self.strategy,
            "replicas": self.replicas,
            "workers": self.workers,
            "ps": self.ps,
            "cross_device_ops": self.cross_device_ops,
            "collective": self.collective,
            "api": self.api,
            "distribute_dataset": self.distribute_dataset,
            "precision": self.precision,
            "batch_rule": self.batch_rule,
            "global_batch": self.global_batch,
            "map_parallelism": self.data.map_parallelism,
            "prefetch": self.data.prefetch,
        }


def _scaled_lr(batch: BatchConfig, global_batch: int, reference_batch: int) -> float:
    factor = global_batch / reference_batch
    if batch.lr_scaling == "linear":
        return batch.learning_rate * factor
    if batch.lr_scaling == "sqrt":
        return batch.learning_rate * math.sqrt(factor)
    return batch.learning_rate


def _variant_id(strategy: str, shape: str, devices: str, options: tuple[str, ...], api: str,
                dd: str | None, precision: str, global_batch: int) -> str:
    parts = [strategy, shape]
    if devices != "auto":
        parts.append(devices)
    parts += [o for o in options if o not in ("auto", "none")]
    parts.append(api)
    if dd == "distribute_datasets_from_function":
        parts.append("dsfn")
    parts += [precision, f"gb{global_batch}"]
    return "-".join(parts)


def _shapes(strat: StrategyConfig) -> list[dict[str, Any]]:
    """The process/device shapes one strategy entry expands to, with the id label of each."""
    base = {"cross_device_ops": "auto", "collective": "auto", "workers": 1,
            "devices_per_worker": 1, "ps": 0}
    if strat.name == "multi_worker_mirrored":
        return [{**base, "workers": w, "devices_per_worker": d, "collective": c,
                 "replicas": w * d, "label": f"w{w}x{d}"}
                for w, d, c in itertools.product(strat.workers, strat.devices_per_worker,
                                                 strat.collective)]
    if strat.name == "parameter_server":
        # Each scheduled step runs one whole batch on one worker: 1 replica in sync.
        return [{**base, "workers": w, "ps": p, "replicas": 1, "label": f"ps{p}w{w}"}
                for p, w in itertools.product(strat.ps, strat.workers)]
    return [{**base, "cross_device_ops": c, "replicas": r, "label": f"r{r}"}
            for r, c in itertools.product(strat.replicas, strat.cross_device_ops)]


def _data_points(data: DataConfig) -> list[tuple[DataConfig, str]]:
    """The input-pipeline axes (map_parallelism x prefetch): one DataConfig each, with the id
    suffix that tells them apart ("-map1-pf0"); an axis of one value adds nothing to ids."""
    labels = {"map_parallelism": "map", "prefetch": "pf"}
    axes = [data.axis_values(field) for field in DATA_AXES]
    points = []
    for values in itertools.product(*axes):
        label = "".join(f"-{labels[field]}{'auto' if value == 'autotune' else value}"
                        for field, value, axis in zip(DATA_AXES, values, axes, strict=True)
                        if len(axis) > 1)
        points.append((data.model_copy(update=dict(zip(DATA_AXES, values, strict=True))), label))
    return points


def expand(scenario: Scenario, source: str = "<scenario>") -> list[Variant]:
    """Expand every list-valued axis into the cross product of concrete variants, in file order."""
    batch = scenario.batch
    train = scenario.train
    variants: list[Variant] = []
    seen: set[str] = set()
    for s_index, strat in enumerate(scenario.strategies):
        batch_values = batch.per_replica if batch.rule == "weak" else batch.global_batch
        assert batch_values is not None  # guaranteed by BatchConfig validation
        for shape, batch_value, precision, api in itertools.product(
            _shapes(strat), batch_values, strat.precision or train.precision, train.api
        ):
            replicas = shape["replicas"]
            if batch.rule == "weak":
                per_replica, global_batch = batch_value, batch_value * replicas
                reference = batch.lr_reference_batch or batch_value
            else:
                if batch_value % replicas:
                    raise ScenarioError(
                        source, "batch.global",
                        f"{batch_value} does not split evenly over {replicas} replicas "
                        f"(strategies[{s_index}])",
                    )
                per_replica, global_batch = batch_value // replicas, batch_value
                reference = batch.lr_reference_batch or batch_value
            dd_values: list[str | None] = list(train.distribute_dataset) if api == "ctl" else [None]
            for dd, (data, data_label) in itertools.product(dd_values, _data_points(scenario.data)):
                options = (shape["cross_device_ops"], shape["collective"], strat.partitioner)
                vid = _variant_id(strat.name, shape["label"], strat.devices, options, api, dd,
                                  precision, global_batch) + data_label
                if vid in seen:
                    raise ScenarioError(source, f"strategies[{s_index}]",
                                        f"variant '{vid}' is declared twice")
                seen.add(vid)
                variants.append(Variant(
                    id=vid, index=len(variants), scenario_name=scenario.name,
                    scenario_digest=scenario.digest(), strategy=strat.name, replicas=replicas,
                    devices=strat.devices, cross_device_ops=shape["cross_device_ops"],
                    workers=shape["workers"], devices_per_worker=shape["devices_per_worker"],
                    ps=shape["ps"], collective=shape["collective"], partitioner=strat.partitioner,
                    tpu=strat.tpu, network=scenario.cluster.network,
                    min_effect=strat.min_effect if strat.min_effect is not None
                    else scenario.compare.min_effect,
                    api=api, precision=precision,
                    distribute_dataset=dd, batch_rule=batch.rule, per_replica_batch=per_replica,
                    global_batch=global_batch,
                    learning_rate=_scaled_lr(batch, global_batch, reference),
                    lr_scaling=batch.lr_scaling, model=scenario.model, data=data,
                    train=train, measure=scenario.measure, check=scenario.check,
                ))
    parity = scenario.check.loss_parity
    for v in variants:
        if parity and not v.is_cluster and parity.batch % v.replicas:
            raise ScenarioError(source, "check.loss_parity.batch",
                                f"{parity.batch} does not split over the {v.replicas} replicas "
                                f"of {v.id}")
    k = train.steps_per_execution
    if k > 1:
        m = scenario.measure
        for field, value in (("warmup_steps", m.warmup_steps), ("steps", m.steps)):
            if value % k:
                raise ScenarioError(source, f"measure.{field}",
                                    f"{value} is not a multiple of train.steps_per_execution={k}")
    return variants


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "literal[", "int", "list[")):
            continue  # pydantic's internal validator tags, meaningless to a user
        else:
            out += f".{part}" if out else str(part)
    return out


_MODELS_BY_SECTION: dict[str, type[BaseModel]] = {
    "": Scenario, "scenario": ScenarioMeta, "model": ModelConfig, "data": DataConfig,
    "batch": BatchConfig, "train": TrainConfig, "measure": MeasureConfig,
    "cluster": ClusterConfig, "compare": CompareConfig, "strategies": StrategyConfig,
    "check": CheckConfig,
}


def _allowed_keys(section: str) -> list[str]:
    model = _MODELS_BY_SECTION.get(section.split("[")[0], Scenario)
    return sorted((f.alias or name) for name, f in model.model_fields.items())


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    loc = tuple(error["loc"])
    field = _field_path(loc)
    if error["type"] == "extra_forbidden":
        parent = field.rsplit(".", 1)[0] if "." in field else ""
        key = str(loc[-1])
        allowed = _allowed_keys(parent)
        hint = difflib.get_close_matches(key, allowed, n=1)
        suggestion = f"; did you mean '{hint[0]}'?" if hint else f" (allowed: {', '.join(allowed)})"
        return field, f"unknown key{suggestion}"
    if error["type"] == "missing":
        return field, "required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if error["type"] not in ("value_error", "model_type") and not isinstance(value, dict):
        message += f" (got {value!r})"
    return field, message


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    """Validate a decoded TOML document; raise ScenarioError naming the first bad field."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        field, message = _describe(errors[0])
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        raise ScenarioError(source, field or None, message) from None
    _check_data_fields(scenario, source)
    check_pairing(scenario, source)
    return scenario


def input_shape(data: DataConfig) -> tuple[int, ...] | None:
    """The shape of one example as stored (MNIST-like sets are 28 x 28 x 1); None when only the
    files can tell (tfrecord, tfds): then the worker checks the pairing once it has read them."""
    if data.name in FILE_DATASETS:
        return None
    return tuple(data.shape) if data.name == "synthetic" else (28, 28, 1)


def pairing_problem(model: str, data: DataConfig, shape: tuple[int, ...]) -> tuple[str, str] | None:
    """(field, why) when the model cannot take what the pipeline yields from examples of `shape`:
    shared by the scenario check here and the worker's check once files have been read."""
    from bench.data.preprocess import output_shape, preprocess_problem
    from bench.training.models import input_problem

    if problem := preprocess_problem(data, shape):
        return problem
    fed = output_shape(data, shape)
    if problem := input_problem(model, fed):
        return "model.name", (f"'{model}' {problem}; data '{data.name}' gives examples of shape "
                              f"{list(fed)}")
    return None


def _check_data_fields(scenario: Scenario, source: str) -> None:
    """Fields that need or exclude each other, named one at a time."""
    data = scenario.data
    for field, names in _DATA_FIELDS_FOR.items():
        if field in data.model_fields_set and data.name not in names:
            raise ScenarioError(source, f"data.{field}", "applies to data.name = "
                                f"{' / '.join(map(repr, names))} only, not '{data.name}'")
    required = {"tfrecord": ("files", "a glob of TFRecord shards, e.g. "
                                      "\"data/train-*.tfrecord\" (bench data write-tfrecord)"),
                "tfds": ("tfds_name", "the tensorflow_datasets name, e.g. \"mnist\"")}
    if data.name in required and getattr(data, required[data.name][0]) is None:
        field, what = required[data.name]
        raise ScenarioError(source, f"data.{field}", f"required for data.name = '{data.name}': "
                            f"{what}")
    if data.auto_shard == "file" and data.name not in FILE_DATASETS:
        raise ScenarioError(source, "data.auto_shard", f"'file' shards by input file; data "
                            f"'{data.name}' is held in memory (use 'data' or 'auto')")
    accuracy = scenario.check.accuracy
    if accuracy is None:
        return
    split = accuracy.eval_split
    if data.name in ARRAY_DATASETS + ("tfrecord",) and split not in ("test", "train"):
        raise ScenarioError(source, "check.accuracy.eval_split", f"'{split}': data "
                            f"'{data.name}' has the splits 'train' and 'test'")
    if data.name == "tfrecord" and split == "test" and data.eval_files is None:
        raise ScenarioError(source, "data.eval_files", "required by check.accuracy (eval_split "
                            "= 'test'): a glob of the held-out TFRecord shards")


def check_pairing(scenario: Scenario, source: str) -> None:
    """Model and data must fit each other: caught at load, not minutes into a run."""
    shape = input_shape(scenario.data)
    if shape is not None and (problem := pairing_problem(scenario.model.name, scenario.data,
                                                          shape)):
        raise ScenarioError(source, *problem)
    if scenario.data.variable_length and (scenario.data.name != "synthetic" or
                                          shape is None or len(shape) != 2):
        raise ScenarioError(source, "data.variable_length", "applies to synthetic series "
                            f"[timesteps, features] only; shape is {list(shape or [])}")


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every failure is a one-line ScenarioError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(str(path), None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), None, f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(str(path), None, f"invalid TOML: {exc}") from None
    return parse_scenario(data, str(path))


def load_variants(path: str | Path) -> tuple[Scenario, list[Variant]]:
    scenario = load_scenario(path)
    return scenario, expand(scenario, str(path))
