"""What each strategy a scenario can name is, said once: the code asks this instead of comparing
names. Pure data, no pydantic and no TensorFlow: the parent's quick commands read it too.

A strategy runs in one process (local) or is a cluster of processes told their roles through
TF_CONFIG. Each cluster role says whether its task trains (runs the bench worker and measures)
or serves (a plain tf.distribute.Server), and whether it computes replicas (and so gets GPUs).
The task that writes the record, and the real checkpoints, is the chief: TensorFlow's rule
(`bench.launch.cluster_plan.is_chief`), which the description's `chief` names for each strategy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol


class Shape(Protocol):
    """What a description reads of a variant (bench.scenario.schema.Variant, which imports this
    module, has all of it)."""

    replicas: int
    workers: int
    devices_per_worker: int
    ps: int


@dataclass(frozen=True)
class Role:
    """One kind of task of a cluster strategy."""

    type: str  # its TF_CONFIG job: chief | worker | ps
    count: str | None  # the variant's field that says how many (None: one)
    trains: bool  # runs the bench worker (measures); otherwise a tf.distribute.Server
    computes: Literal["always", "never", "with ps_devices = gpu"]  # runs replicas, gets GPUs


@dataclass(frozen=True)
class StrategyKind:
    name: str
    summary: str  # what `bench list` says of it
    # one device: what every other strategy is measured and checked against (speed-ups, loss
    # parity); it runs exactly one replica
    baseline: bool = False
    roles: tuple[Role, ...] = ()  # a cluster's tasks, in the order they are planned; () local
    chief: tuple[str, int] | None = None  # the task that writes the record and the checkpoints
    # A ClusterCoordinator on the chief schedules the steps on the workers: the chief runs no
    # step itself (its trace and per-step observation would show dispatch, not compute), steps
    # are scheduled and timed in blocks, and the workers read their own input iterators.
    coordinated: bool = False
    # Where its replicas come from, per computing process: `replicas` (one process),
    # `devices_per_worker` (each worker of a cluster) or one device each.
    replicas_per_process: Literal["replicas", "devices_per_worker", "one"] = "replicas"
    all_reduce: str | None = None  # the variant field naming its all-reduce (NCCL needs GPUs)
    keras3_fit: bool = True  # Keras 3's fit runs it (with tf-keras every strategy runs fit)
    # Keras fit reduces its scalar metrics across workers (MultiWorkerMirrored), where one Keras
    # release fails (bench.training.strategies.keras_fit_problem).
    fit_reduces_across_workers: bool = False
    # [fault]: how a lost worker is recovered: the whole cluster restarts from the last backup
    # ("cluster"), or only the lost task restarts while the coordinator goes on ("task").
    recovers_by: Literal["cluster", "task"] | None = None
    fields: frozenset[str] = field(default_factory=frozenset)  # [[strategies]] fields it takes
    resolved: bool = False  # found by a cluster resolver, on its own devices (TPU)
    # The Keras backends that have it: tf.distribute strategies run on TensorFlow only, the
    # keras.distribution ones on JAX only, the default (one device) on both.
    backends: tuple[str, ...] = ("tensorflow",)

    @property
    def cluster(self) -> bool:
        return bool(self.roles)

    def role(self, task_type: str) -> Role | None:
        return next((r for r in self.roles if r.type == task_type), None)

    def trains(self, task_type: str) -> bool:
        """Whether a task of that type runs the bench worker (a local process always does)."""
        role = self.role(task_type)
        return role.trains if role is not None else not self.cluster

    def computes(self, task_type: str, ps_devices: str = "cpu") -> bool:
        """Whether a task of that type runs replicas (and so gets GPUs)."""
        role = self.role(task_type)
        if role is None:
            return not self.cluster
        return role.computes == "always" or (role.computes == "with ps_devices = gpu"
                                             and ps_devices == "gpu")

    def tasks(self, variant: Shape) -> list[tuple[str, int, bool]]:
        """(type, index, trains) of every task of `variant`, each role as many times as its
        count field says."""
        return [(role.type, i, role.trains) for role in self.roles
                for i in range(getattr(variant, role.count) if role.count else 1)]

    def process_replicas(self, variant: Shape) -> int:
        """Replicas each computing process of `variant` builds its strategy over."""
        return {"replicas": variant.replicas, "devices_per_worker": variant.devices_per_worker,
                "one": 1}[self.replicas_per_process]


_WORKER = Role("worker", "workers", trains=True, computes="always")
KINDS: dict[str, StrategyKind] = {kind.name: kind for kind in (
    StrategyKind("default", "No explicit strategy (tf.distribute default strategy, or one JAX "
                 "device): each backend's baseline", baseline=True,
                 backends=("tensorflow", "jax")),
    StrategyKind("one_device", "OneDeviceStrategy on the first device", baseline=True),
    StrategyKind("mirrored", "MirroredStrategy: synchronous data parallelism over local devices",
                 all_reduce="cross_device_ops", fields=frozenset({"replicas", "cross_device_ops"})),
    StrategyKind("central_storage", "CentralStorageStrategy: variables on one device, compute "
                 "mirrored", fields=frozenset({"replicas"})),
    StrategyKind("multi_worker_mirrored", "MultiWorkerMirroredStrategy: worker processes with "
                 "TF_CONFIG, collective all-reduce", roles=(_WORKER,), chief=("worker", 0),
                 replicas_per_process="devices_per_worker", all_reduce="collective",
                 fit_reduces_across_workers=True, recovers_by="cluster",
                 fields=frozenset({"workers", "devices_per_worker", "collective"})),
    StrategyKind("parameter_server", "ParameterServerStrategy: ps + worker processes, "
                 "ClusterCoordinator loop",
                 roles=(Role("chief", None, trains=True, computes="never"),
                        Role("worker", "workers", trains=False, computes="always"),
                        Role("ps", "ps", trains=False, computes="with ps_devices = gpu")),
                 chief=("chief", 0), coordinated=True, replicas_per_process="one",
                 keras3_fit=False, recovers_by="task",
                 fields=frozenset({"workers", "ps", "partitioner"})),
    StrategyKind("tpu", "TPUStrategy: where a TPU is attached or named; skipped with the "
                 "resolver's reason", resolved=True, fields=frozenset({"tpu"})),
    StrategyKind("data_parallel", "keras.distribution.DataParallel (JAX): the batch split over "
                 "local devices, variables replicated", backends=("jax",),
                 fields=frozenset({"replicas"})),
    StrategyKind("model_parallel", "keras.distribution.ModelParallel (JAX): variables sharded "
                 "over a device mesh by a LayoutMap", backends=("jax",),
                 fields=frozenset({"replicas", "layout"})),
)}


def strategy_kind(name: str | None) -> StrategyKind:
    """The description of strategy `name` (a scenario's names are validated against KINDS)."""
    try:
        return KINDS[str(name)]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(KINDS)})") from None


BASELINE_STRATEGIES = tuple(name for name, kind in KINDS.items() if kind.baseline)
CLUSTER_STRATEGIES = tuple(name for name, kind in KINDS.items() if kind.cluster)
