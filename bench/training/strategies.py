"""Variant → tf.distribute strategy, with checks that turn "cannot run here" into a skip reason.

Cluster strategies (MultiWorkerMirrored, ParameterServer) are built here too, inside each task
process, from the TF_CONFIG that the cluster launcher (or a cluster manager) set.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import socket
import time
from pathlib import Path
from typing import Any

from bench.errors import VariantSkipped
from bench.scenario.schema import Variant
from bench.scenario.strategy_kinds import strategy_kind
from bench.training.devices import DeviceLayout

# NCCL without GPUs, by the field that asked for it (the strategy's all-reduce)
_NCCL_WITHOUT_GPUS = {
    "cross_device_ops": "NCCL all-reduce needs GPUs: TensorFlow registers no CPU kernel for "
                        "'NcclAllReduce'",
    "collective": "collective = \"nccl\" needs GPUs: NCCL has no CPU implementation"}

# How long a ParameterServer coordinator waits for its servers to listen, and how often it looks.
PEERS_LIMIT_S = 60.0
PEERS_POLL_S = 0.01

# Keras 3 fit() under MultiWorkerMirroredStrategy: reduce_per_replica() reduces the per-replica
# scalar metrics with `strategy.reduce("MEAN", v, axis=0)`, which fails on a scalar
# ("Invalid reduction dimension 0"). Upstream: keras-team/keras#20585, tensorflow/tensorflow#72388.
_KERAS_MWMS_BUG = 'strategy.reduce("MEAN", v, axis=0)'


def _keras_source_has(module: str, name: str, marker: str) -> bool:
    """Whether the installed Keras still contains a known-broken line in `module`'s source (a
    probe, not a version pin: a fixed Keras simply runs the cell). Read from the file, without
    importing Keras (and so TensorFlow): a cluster's supervisor asks before it starts any task.
    False when the source cannot be read: then the variant is tried and its result speaks."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)  # a top-level package is found, not imported
    if spec is None or not spec.submodule_search_locations:
        return False
    path = Path(list(spec.submodule_search_locations)[0], *rest.split(".")).with_suffix(".py")
    try:
        source = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return (f"def {name}" in source or f"class {name}" in source) and marker in source


def _keras_major() -> int | None:
    try:
        return int(importlib.metadata.version("keras").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def keras_fit_problem(strategy: str, flavour: str = "keras3") -> str | None:
    """Why Keras `fit` cannot run this strategy with the installed Keras, or None (tf-keras runs
    both cluster strategies). Imports neither Keras nor TensorFlow."""
    if flavour == "tf_keras":
        return None
    kind = strategy_kind(strategy)
    if not kind.keras3_fit:
        if (_keras_major() or 0) >= 3:
            return ("Keras 3 fit() has no ParameterServerStrategy support (it raises 'To use this "
                    "dataset, you need to pass this dataset to ClusterCoordinator."
                    "create_per_worker_dataset'); use api = \"ctl\", or train.keras = "
                    "\"tf_keras\"")
    if kind.fit_reduces_across_workers:
        if _keras_source_has("keras.src.backend.tensorflow.trainer", "reduce_per_replica",
                             _KERAS_MWMS_BUG):
            return ("Keras fit() under MultiWorkerMirroredStrategy fails in this Keras: "
                    "keras.src.backend.tensorflow.trainer.reduce_per_replica reduces scalar "
                    "per-replica metrics with strategy.reduce('MEAN', v, axis=0) -> 'Invalid "
                    "reduction dimension 0' (keras-team/keras#20585, tensorflow/tensorflow#72388); "
                    "use api = \"ctl\", or train.keras = \"tf_keras\"")
    return None



def known_skip(variant: Variant) -> str | None:
    """Why the installed Keras cannot run this variant's API or sharding, known without starting
    anything (a cluster's supervisor asks before it starts its tasks), or None."""
    if variant.api == "fit" and (problem := keras_fit_problem(variant.strategy,
                                                              variant.train.keras)):
        return problem
    if "partitioner" in variant.kind.fields:
        return partitioner_problem(variant.partitioner, variant.train.keras)
    return None


def check_supported(strategy: str, cross_device_ops: str, layout: DeviceLayout,
                    collective: str = "auto") -> None:
    """Raise VariantSkipped for combinations known not to work on this device kind."""
    field = strategy_kind(strategy).all_reduce
    wants_nccl = {"cross_device_ops": cross_device_ops, "collective": collective}.get(
        field or "") == "nccl"
    if wants_nccl and layout.kind != "gpu":
        raise VariantSkipped(_NCCL_WITHOUT_GPUS[field or ""])
    if wants_nccl and layout.logical_gpus_per_gpu > 1:
        raise VariantSkipped(
            f"NCCL does not run on logical GPUs ({layout.logical_gpus_per_gpu} split from each "
            "physical GPU here; TensorFlow: 'NCCL is not supported when using virtual GPUs')")


def partitioner_problem(partitioner: str, flavour: str = "keras3") -> str | None:
    """Why variables cannot be sharded across ps tasks with the installed Keras, or None."""
    if partitioner == "none" or flavour == "tf_keras":
        return None
    if _keras_source_has("keras.src.backend.tensorflow.core", "Variable",
                         "return self.value.handle"):
        return ("Keras 3 variables cannot wrap tf.distribute's ShardedVariable: gradients fail "
                "with \"'ShardedVariable' object has no attribute 'handle'\" "
                "(keras.src.backend.tensorflow.core.Variable.handle); use partitioner = \"none\", or "
                "train.keras = \"tf_keras\"")
    return None


def build_multi_worker(collective: str) -> Any:
    """Must run before anything initialises the TF context (collectives are set at startup).

    No collective timeout: TensorFlow starts a watchdog thread for every collective it runs with
    one, which sleeps out the whole timeout (base_collective_executor.cc), so a worker of a
    run of a few hundred steps holds some 1,500 threads and each step starts one. A peer that
    never answers is caught by the supervisor's budget and TensorFlow's heartbeats instead."""
    import tensorflow as tf

    impl = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation={"auto": impl.AUTO, "ring": impl.RING, "nccl": impl.NCCL}[collective])
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def build_parameter_server(partitioner: str, num_ps: int) -> Any:
    import tensorflow as tf

    partitioners = tf.distribute.experimental.partitioners
    variable_partitioner = {
        "none": None,
        "fixed": partitioners.FixedShardsPartitioner(num_shards=num_ps),
        "min_size": partitioners.MinSizePartitioner(min_shard_bytes=64 << 10, max_shards=num_ps),
    }[partitioner]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    await_peers(resolver)
    return tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=variable_partitioner)


def await_peers(resolver: Any, limit_s: float = PEERS_LIMIT_S) -> None:
    """Wait until every other task of the resolver's cluster accepts connections (at most
    `limit_s`; past it TensorFlow's own connection reports what is wrong).

    A coordinator starts beside its servers; gRPC, refused once, tries again only after its
    reconnect backoff of about a second, which nearly every cluster start would pay."""
    own = (resolver.task_type, resolver.task_id)
    peers = [address for job, tasks in resolver.cluster_spec().as_dict().items()
             for index, address in (tasks.items() if isinstance(tasks, dict) else enumerate(tasks))
             if (job, index) != own]
    deadline = time.monotonic() + limit_s
    while peers and time.monotonic() < deadline:
        peers = [address for address in peers if not _reachable(address, timeout_s=1.0)]
        if peers:
            time.sleep(PEERS_POLL_S)


def _reachable(address: str, timeout_s: float = 5.0) -> bool:
    host, _, port = address.removeprefix("grpc://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def build_tpu(tpu: str) -> Any:
    """TPUStrategy, or VariantSkipped with the resolver's own reason when there is no TPU.

    A grpc:// address with nothing behind it makes experimental_connect_to_cluster hang forever,
    so it is probed with a plain TCP connect first.
    """
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or None)
    except (ValueError, tf.errors.OpError) as exc:
        raise VariantSkipped(f"no TPU: TPUClusterResolver: {exc}") from None
    if tpu.startswith("grpc://") and not _reachable(tpu):
        raise VariantSkipped(f"no TPU: nothing accepts connections at {tpu}")
    try:
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as exc:
        raise VariantSkipped(f"no TPU: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    return tf.distribute.TPUStrategy(resolver)


def _cross_device_ops(name: str) -> Any:
    import tensorflow as tf

    return {
        "auto": lambda: None,
        "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
        "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
        "nccl": tf.distribute.NcclAllReduce,
    }[name]()


def build_strategy(strategy: str, cross_device_ops: str, layout: DeviceLayout) -> Any:
    """A strategy of one process over `layout`'s devices."""
    import tensorflow as tf

    check_supported(strategy, cross_device_ops, layout)
    devices = list(layout.devices)
    builders = {
        "default": tf.distribute.get_strategy,
        "one_device": lambda: tf.distribute.OneDeviceStrategy(devices[0]),
        "mirrored": lambda: tf.distribute.MirroredStrategy(
            devices=devices, cross_device_ops=_cross_device_ops(cross_device_ops)),
        "central_storage": lambda: tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=devices, parameter_device="/cpu:0"),
    }
    if strategy not in builders:
        raise ValueError(f"unknown strategy {strategy!r}")
    return builders[strategy]()


def build(variant: Variant, layout: DeviceLayout) -> Any:
    """The variant's strategy over `layout` (a cluster's from its TF_CONFIG). A
    MultiWorkerMirrored collective is configured here, before any op touches the context."""
    cluster_builders = {
        "multi_worker_mirrored": lambda: build_multi_worker(variant.collective),
        "parameter_server": lambda: build_parameter_server(variant.partitioner, variant.ps),
    }
    if "partitioner" in variant.kind.fields and (
            problem := partitioner_problem(variant.partitioner, variant.train.keras)):
        raise VariantSkipped(problem)
    if variant.strategy in cluster_builders:
        return cluster_builders[variant.strategy]()
    return build_strategy(variant.strategy, variant.cross_device_ops, layout)


def describe_strategy(strategy: Any) -> dict[str, Any]:
    """What was really built: class, replica count and the all-reduce implementation in use."""
    extended = getattr(strategy, "extended", None)
    cross_ops = getattr(extended, "_cross_device_ops", None) or getattr(
        extended, "_inferred_cross_device_ops", None
    )
    options = getattr(extended, "_communication_options", None)  # MultiWorkerMirrored
    implementation = getattr(options, "implementation", None)
    return {
        "class": type(strategy).__name__,
        "num_replicas_in_sync": int(strategy.num_replicas_in_sync),
        "cross_device_ops": type(cross_ops).__name__ if cross_ops is not None else None,
        "collective_implementation": getattr(implementation, "name", None),
        "variable_partitioner": type(getattr(extended, "_variable_partitioner", None)).__name__
        if getattr(extended, "_variable_partitioner", None) is not None else None,
    }
