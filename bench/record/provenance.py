"""The record's sections about what ran and where: the process's task, its devices and GPUs,
its packages, the strategy and model really built, and what trained (`bench.worker` fills them
before it measures, for throughput and `[fault]` variants alike)."""

from __future__ import annotations

from typing import Any

from bench.record.section import Number, Section, field


class Task(Section):
    """The cluster task that wrote the record."""

    type: str | None = field("chief, worker or ps")
    index: int | None = field("its index")


class Devices(Section):
    """The devices the worker computed on."""

    kind: str | None = field("`cpu`, `gpu` or `tpu`")
    devices: list[str] | None = field("the devices the strategy was given")
    logical_cpus: int | None = field("logical CPU devices split from the CPU")
    logical_gpus_per_gpu: int | None = field("logical GPUs split from each GPU")
    shared: bool | None = field("other processes of the variant use the same GPUs")
    simulated: bool | None = field("the replicas are logical devices sharing one device")
    physical: list[str] | None = field("physical devices as TensorFlow lists them")
    logical: list[str] | None = field("logical devices")
    cluster_computes_on: str | None = field("what the cluster's computing tasks ran on")


class WorkerEnvironment(Section):
    """What the worker really ran in."""

    python: str | None = field("its interpreter")
    python_version: str | None = field("its version")
    packages: dict[str, str] | None = field("versions of the packages that matter")
    digest: str | None = field("digest of every installed distribution")
    distributions: int | None = field("installed distributions")
    cuda: dict[str, Any] | None = field("CUDA and cuDNN of a CUDA build")


class StrategyInfo(Section):
    """The strategy really built."""

    class_: str | None = field("its class", alias="class")
    num_replicas_in_sync: int | None = field("replicas in sync")
    cross_device_ops: str | None = field("the all-reduce implementation in use")
    collective_implementation: str | None = field("MultiWorkerMirrored's collective")
    variable_partitioner: str | None = field("ParameterServer's partitioner")
    sharded_variables: list[str] | None = field(
        "the variables a ModelParallel layout split over devices (JAX), by path")


class StartState(Section):
    """What the process found at start (a forked worker must find nothing set)."""

    pid: int | None = field("its pid")
    tf_context_initialized: bool | None = field("a TensorFlow context existed")
    precision_policy: str | None = field("the Keras precision policy")
    keras_modules: list[str] | None = field(
        "the Keras packages loaded (`keras`, `tf_keras`): its own flavour's alone")


class KerasInfo(Section):
    flavour: str | None = field("`keras3` or `tf_keras`")
    version: str | None = field("its version")


class ModelParams(Section):
    trainable: int | None = field("trainable parameters")
    total: int | None = field("all parameters")


class Workload(Section):
    """What trained: the model class, the loss and the optimizer, and where each came from."""

    model_class: str | None = field("the model's class")
    compiled_by_builder: bool | None = field("the builder compiled the model itself")
    loss: dict[str, Any] | None = field("the loss: name, arguments, where it came from")
    metrics: list[str] | None = field("the metrics' names")
    optimizer: dict[str, Any] | None = field("the optimizer: class, learning rate, origin")


class VariableTable(Section):
    name: str | None = field("the table (variable) name")
    rows: int | None = field("its rows")
    bytes: int | None = field("its size")
    pieces: int | None = field("its shards or copies")
    bytes_by_place: dict[str, int] | None = field("bytes on each device or ps task")


class Variables(Section):
    """The model's weights by place."""

    bytes_by_place: dict[str, int] | None = field("bytes each device or ps task holds")
    tables: list[VariableTable] | None = field("every table of 1 MB or more")


class WorkerVersions(Section):
    tensorflow: str | None = field("TensorFlow's version")
    keras: str | None = field("Keras' version")
    keras_flavour: str | None = field("`keras3` or `tf_keras`")
    pid: int | None = field("the worker's pid")
    keras_backend: str | None = field("the Keras backend the worker ran (None: tensorflow)")
    jax: str | None = field("JAX's version, on the JAX backend")
    jaxlib: str | None = field("jaxlib's version, on the JAX backend")


# A metric's value after training: a number, a list (vector-valued), or a dict of them.
MetricValue = Number | list[Any] | dict[str, Any] | None
