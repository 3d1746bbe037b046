"""Which processes a variant starts, on which devices, with which environment. Pure: no TensorFlow.

One function, `plan_variant`, serves `bench plan` (a dry run on any machine, with the real GPU
inventory or a made-up one), the local launcher, the cluster supervisor and the Slurm launcher,
so what the plan shows is what runs. Inside one process, `plan_layout` turns the GPUs the process
can see into one device per replica; the worker applies it with TensorFlow.

The rules, and why:
- A process is told its GPUs with CUDA_VISIBLE_DEVICES, always: without it every process of a
  cluster would build its strategy over every GPU of the host (2 workers on 8 GPUs = 16 replicas
  fighting over 8 devices, in a record that says 2).
- MultiWorkerMirrored workers get disjoint slices of `devices_per_worker` GPUs; ParameterServer
  workers one GPU each; parameter servers and the coordinator none (they hold variables and
  dispatch, they do not compute) unless the scenario asks (`cluster.ps_devices = "gpu"`).
- `devices = "cpu"` hides the GPUs (CUDA_VISIBLE_DEVICES=""): otherwise TensorFlow would place
  the default strategy on GPU:0 while the record says CPU.
- Fewer GPUs than a process's replicas: each physical GPU is split into logical GPUs with a
  memory limit, as bench does with logical CPUs; the record says simulated. Processes that must
  share a GPU (more cluster workers than GPUs) split its memory between them.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from bench import fingerprint
from bench.child_env import ChildEnv, backend_env
from bench.errors import VariantSkipped
from bench.launch.cluster_plan import Task, cluster_spec, plan_tasks, tf_config
from bench.scenario.schema import Variant

# The plan tells each process (bench.child_env, read by bench.training.devices.configure) the
# memory limit of its logical GPUs, whether other processes share its GPUs, and, in a cluster,
# what the computing tasks run on: the ParameterServer coordinator, which writes the record,
# computes nothing itself, so its own device kind would misstate the variant.
# tf-keras instead of Keras 3: TensorFlow reads it once, at import, so it is in the environment a
# tf_keras variant's processes start with (and such a process is never forked from the fork
# server, which has imported TensorFlow with Keras 3).
LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
MEMORY_SHARE = 0.9  # of a GPU's memory, split between its logical GPUs (the rest: CUDA context)
DEFAULT_LOGICAL_GPU_MEMORY_MB = 2048  # when the GPU's memory is unknown
PORT_PLACEHOLDER = "<port>"


@dataclass(frozen=True)
class Inventory:
    """The GPUs a run may use, named as CUDA_VISIBLE_DEVICES names them (index or UUID)."""

    gpu_ids: tuple[str, ...] = ()
    memory_mb: int | None = None  # the smallest of them, for splitting into logical GPUs
    source: str = "nvidia-smi"

    @classmethod
    def from_gpus(cls, gpus: list[dict[str, Any]], visible: str | None,
                  source: str = "nvidia-smi") -> Inventory:
        """The physical GPUs, restricted by a CUDA_VISIBLE_DEVICES already set (None: unset)."""
        kept = fingerprint.cuda_visible_gpus(gpus, visible)
        memories = [g["memory_mb"] for _, g in kept if g.get("memory_mb")]
        return cls(tuple(token for token, _ in kept), min(memories) if memories else None,
                   source)

    @classmethod
    def fake(cls, gpus: int, visible: str | None = None, memory_mb: int | None = None
             ) -> Inventory:
        """A made-up host with `gpus` GPUs, for `bench plan --gpus N` and tests."""
        listed = [{"index": i, "uuid": None, "memory_mb": memory_mb} for i in range(gpus)]
        return cls.from_gpus(listed, visible, source=f"--gpus {gpus}")

    @property
    def gpus(self) -> int:
        return len(self.gpu_ids)


@functools.cache
def host_gpus() -> tuple[dict[str, Any], ...]:
    """This host's GPUs (fingerprint.gpus), asked once per process: nvidia-smi takes a while."""
    return tuple(fingerprint.gpus())


@functools.cache
def detected_inventory() -> Inventory:
    """This host's inventory, as this process's CUDA_VISIBLE_DEVICES leaves it."""
    return Inventory.from_gpus(list(host_gpus()), os.environ.get("CUDA_VISIBLE_DEVICES"))


@dataclass(frozen=True)
class DeviceLayout:
    """What one process's replicas compute on."""

    kind: str  # "gpu", "cpu" or "tpu"
    devices: tuple[str, ...]  # one device name per replica
    logical_cpus: int = 1  # logical CPU devices the process creates (1 = left as is)
    logical_gpus_per_gpu: int = 1  # logical GPUs split from each visible GPU (1 = none)
    shared: bool = False  # other processes of the variant compute on the same GPUs

    @property
    def simulated(self) -> bool:
        """Replicas that share hardware (logical CPUs of one host, logical GPUs of one GPU, or
        GPUs shared with another process) add no compute."""
        if self.kind == "cpu":
            return len(self.devices) > 1
        return self.kind == "gpu" and (self.logical_gpus_per_gpu > 1 or self.shared)

    @property
    def gpu_memory(self) -> str | None:
        """How the process's GPUs hand out memory: "limit", a fixed share per logical GPU (logical
        GPUs need one, and a GPU shared with another process is split between them); "growth", on
        demand (else TensorFlow reserves nearly all of it at once); None without GPUs."""
        if self.kind != "gpu":
            return None
        return "limit" if self.logical_gpus_per_gpu > 1 or self.shared else "growth"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "simulated": self.simulated}


def plan_layout(requested: str, replicas: int, gpus_available: int, shared: bool = False
                ) -> DeviceLayout:
    """GPUs when present (or demanded), split into logical GPUs when fewer than the replicas;
    else logical CPU devices."""
    use_gpu = requested == "gpu" or (requested == "auto" and gpus_available > 0)
    if not use_gpu:
        return DeviceLayout("cpu", tuple(f"/cpu:{i}" for i in range(replicas)), replicas)
    if gpus_available == 0:
        raise VariantSkipped("devices = \"gpu\" but no GPU is visible to TensorFlow")
    per_gpu = math.ceil(replicas / gpus_available)
    return DeviceLayout("gpu", tuple(f"/gpu:{i}" for i in range(replicas)), 1, per_gpu, shared)


@dataclass(frozen=True)
class ProcessPlan:
    """One process of a variant: its role, the devices it gets, the environment it starts with."""

    role: str  # "main" (a single-process variant), or a cluster task type: chief | worker | ps
    index: int
    trains: bool  # runs the bench worker; otherwise a plain tf.distribute.Server
    devices: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "index": self.index, "devices": list(self.devices),
                "env": dict(self.env)}


def _gpu_process(ids: list[str], replicas: int, sharers: int, inventory: Inventory,
                 thread_mode: str | None) -> tuple[tuple[str, ...], dict[str, str]]:
    """Devices and environment of a process computing `replicas` replicas on GPUs `ids`."""
    env = {"CUDA_VISIBLE_DEVICES": ",".join(ids)}
    if thread_mode:
        env["TF_GPU_THREAD_MODE"] = thread_mode
    per_gpu = math.ceil(replicas / len(ids))
    if sharers > 1:
        env.update(ChildEnv(gpu_shared=True).to_env())
    if per_gpu > 1 or sharers > 1:
        memory = inventory.memory_mb
        limit = (int(memory * MEMORY_SHARE / (per_gpu * sharers)) if memory
                 else DEFAULT_LOGICAL_GPU_MEMORY_MB)
        env.update(ChildEnv(logical_gpu_memory_mb=limit).to_env())
    if per_gpu > 1:
        return tuple(f"gpu:{g} ({per_gpu} logical)" for g in ids), env
    return tuple(f"gpu:{g}" for g in ids[:replicas]), env


def _cpu_process(replicas: int, inventory: Inventory) -> tuple[tuple[str, ...], dict[str, str]]:
    env = {"CUDA_VISIBLE_DEVICES": ""} if inventory.gpus else {}
    return (("cpu",) if replicas == 1 else (f"cpu ({replicas} logical)",)), env


def _slices(ids: tuple[str, ...], processes: int, per_process: int) -> tuple[list[list[str]], int]:
    """Disjoint slices of `per_process` GPUs when there are enough, else one GPU each, round
    robin; and how many processes share each GPU."""
    if len(ids) >= processes * per_process:
        return [list(ids[i * per_process:(i + 1) * per_process]) for i in range(processes)], 1
    return [[ids[i % len(ids)]] for i in range(processes)], math.ceil(processes / len(ids))


def is_legacy_keras(variant: Variant) -> bool:
    """A tf_keras variant imports TensorFlow with TF_USE_LEGACY_KERAS=1, so it forks only from a
    process that imported it so (its own fork server), never from one with Keras 3 loaded."""
    return variant.train.keras == "tf_keras"


def plan_variant(variant: Variant, inventory: Inventory,
                 addresses: list[str] | None = None) -> list[ProcessPlan]:
    """Every process `variant` starts on a host with `inventory` (a tf_keras variant's with
    TF_USE_LEGACY_KERAS=1)."""
    plans = _plan_processes(variant, inventory, addresses)
    if not (extra := flavour_env(variant)):
        return plans
    return [ProcessPlan(p.role, p.index, p.trains, p.devices, {**p.env, **extra})
            for p in plans]


def flavour_env(variant: Variant) -> dict[str, str]:
    """What the Keras flavour and backend add to every process's environment (a Slurm job's, a
    `bench worker` task's too)."""
    legacy = {LEGACY_KERAS_ENV: "1"} if is_legacy_keras(variant) else {}
    return {**legacy, **backend_env(variant.backend, variant.kind.process_replicas(variant),
                                    budget_s=variant.measure.timeout_s)}


def forks(variant: Variant) -> bool:
    """Whether the variant's process may fork from a fork server (which imported Keras on
    TensorFlow): not on another Keras backend, which Keras reads once, at import."""
    return variant.backend == "tensorflow"


def _plan_processes(variant: Variant, inventory: Inventory,
                    addresses: list[str] | None = None) -> list[ProcessPlan]:
    """Cluster processes get TF_CONFIG with `addresses` (one per task); without them the ports
    are left out."""
    thread_mode = variant.train.gpu_thread_mode
    use_gpu = variant.devices == "gpu" or (variant.devices == "auto" and inventory.gpus > 0)
    if variant.kind.resolved:  # a TPU: the resolver finds its devices
        return [ProcessPlan("main", 0, True, ("tpu",), {})]
    if not variant.is_cluster:
        if use_gpu and inventory.gpus:
            ids = list(inventory.gpu_ids[:variant.replicas])
            devices, env = _gpu_process(ids, variant.replicas, 1, inventory, thread_mode)
        else:
            devices, env = _cpu_process(variant.replicas, inventory)
        return [ProcessPlan("main", 0, True, devices, env)]

    tasks = plan_tasks(variant)
    computing = [t for t in tasks if task_computes(variant, t.type)]
    per_process = gpus_per_process(variant, computing[0]) if computing else 1
    slices, sharers = (_slices(inventory.gpu_ids, len(computing), per_process)
                       if use_gpu and inventory.gpus else ([], 1))
    spec = cluster_spec(tasks, addresses or [f"127.0.0.1:{PORT_PLACEHOLDER}" for _ in tasks])
    plans = []
    for task in tasks:
        if task in computing and slices:
            devices, env = _gpu_process(slices[computing.index(task)], per_process, sharers,
                                        inventory, thread_mode)
        elif task in computing:
            devices, env = _cpu_process(per_process, inventory)
        else:  # the coordinator and (unless asked) the parameter servers
            devices, env = ("cpu",), ({"CUDA_VISIBLE_DEVICES": ""} if inventory.gpus else {})
        plans.append(ProcessPlan(task.type, task.index, task.trains, devices,
                                 {**env, "TF_CONFIG": tf_config(spec, task),
                                  **ChildEnv(cluster_computes_on="gpu" if slices else "cpu"
                                             ).to_env()}))
    return plans


def gpus_per_process(variant: Variant, task: Task | None = None) -> int:
    """GPUs a process wants when there are enough: a single-process variant one per replica, a
    computing cluster task `devices_per_worker` (MultiWorkerMirrored) or one, the others none.
    Kubeflow GPU limits and Slurm GPU requests come from here too."""
    if task is None:
        return variant.replicas if not variant.is_cluster else 0
    if not task_computes(variant, task.type):
        return 0
    return variant.kind.process_replicas(variant)


def task_computes(variant: Variant, task_type: str) -> bool:
    """Whether a cluster task runs replicas (and so gets GPUs), as its strategy's role says:
    MultiWorkerMirrored workers, ParameterServer workers, and ps tasks when the scenario puts
    them on GPUs; never the ParameterServer coordinator (the chief)."""
    return variant.kind.computes(task_type, variant.ps_devices)


def plan_for_task(plans: list[ProcessPlan], task: Task) -> ProcessPlan:
    return next(p for p in plans if (p.role, p.index) == (task.type, task.index))
