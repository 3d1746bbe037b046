"""Which processes a cluster variant needs and the TF_CONFIG each one gets. Pure: no TensorFlow.

Shared by the local cluster launcher, `bench worker` (TF_CONFIG set by a cluster manager) and the
Kubeflow TFJob manifest, so the three always agree on roles and counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bench.scenario.schema import Variant


@dataclass(frozen=True)
class Task:
    type: str  # chief | worker | ps
    index: int
    trains: bool  # runs the bench worker (measures); otherwise a plain tf.distribute.Server

    @property
    def name(self) -> str:
        return f"{self.type}-{self.index}"


def plan_tasks(variant: Variant) -> list[Task]:
    """Every task of its strategy's roles (bench.scenario.strategy_kinds): MultiWorkerMirrored's N
    training workers (worker 0 is the chief); ParameterServer's chief (the coordinator that
    trains), N worker servers and K ps servers."""
    if not variant.is_cluster:
        raise ValueError(f"strategy {variant.strategy!r} is not a cluster strategy")
    return [Task(*task) for task in variant.kind.tasks(variant)]


def is_chief(task_type: str | None, index: int, jobs: Collection[str]) -> bool:
    """TensorFlow's rule for the task that writes (the record, the real checkpoint): the chief
    when the cluster's `jobs` have one, else worker 0; a process in no cluster (no task type) is
    its own chief."""
    if task_type is None:
        return True
    if "chief" in jobs:
        return task_type == "chief"
    return task_type == "worker" and index == 0


def chief_of(tasks: list[Task]) -> Task:
    """The task that writes the variant's record."""
    jobs = {t.type for t in tasks}
    return next((t for t in tasks if is_chief(t.type, t.index, jobs)), tasks[0])


def cluster_spec(tasks: list[Task], addresses: list[str]) -> dict[str, list[str]]:
    spec: dict[str, list[str]] = {}
    for task, address in zip(tasks, addresses, strict=True):
        spec.setdefault(task.type, []).append(address)
    return spec


def tf_config(spec: dict[str, list[str]], task: Task) -> str:
    return json.dumps({"cluster": spec, "task": {"type": task.type, "index": task.index}})


def read_tf_config() -> dict[str, Any]:
    """This process's TF_CONFIG, parsed: what the cluster manager or the launcher set ({} outside
    a cluster)."""
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def chief_and_index(config: dict[str, Any]) -> tuple[bool, int]:
    """Whether TF_CONFIG `config`'s task is the chief, and its index; a process in no cluster is
    its own chief, of index 0."""
    task = config.get("task") or {}
    index = int(task.get("index", 0))
    return is_chief(task.get("type"), index, config.get("cluster") or {}), index


def is_chief_config(config: dict[str, Any]) -> bool:
    """Whether TF_CONFIG `config` names the chief task (False without a task)."""
    return bool(config.get("task")) and chief_and_index(config)[0]
