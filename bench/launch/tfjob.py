"""Kubeflow TFJob manifests for a scenario's cluster variants.

The TFJob operator starts one pod per replica and sets TF_CONFIG in each; every container runs
`bench worker SCENARIO --variant ID`, so roles and counts come from the same plan the local
launcher uses. The rest of the manifest is there so the result outlives the job: the chief
writes the run directory onto a PersistentVolumeClaim, the clean-pod policy leaves the chief's
finished pod in place, and the replicas that run the model's steps ask for their GPUs.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from bench.launch.cluster_plan import Task, plan_tasks
from bench.placement import gpus_per_process
from bench.scenario.schema import Variant

_REPLICA_TYPE = {"chief": "Chief", "worker": "Worker", "ps": "PS"}
GPU_RESOURCE = "nvidia.com/gpu"  # the NVIDIA device plugin's resource name
RESULTS_VOLUME = "results"

# What happens to the pods once the job has finished (training-operator release-1.9,
# pkg/controller.v1/common/job.go, deletePodsAndServices): "All" deletes every pod, the
# chief's too, with its logs and any record on its own disk; "None" (the TFJob default) deletes
# none, so ParameterServer's ps and worker servers, which serve until killed, would hold their
# nodes and GPUs until someone deletes the job; "Running" deletes only the pods still Running or
# Pending. The job ends when the task that writes the record ends (see tfjob), so "Running"
# frees the servers and keeps that task's Succeeded or Failed pod, with its logs.
CLEAN_POD_POLICY = "Running"

# Kubernetes' rule for object names such as a PersistentVolumeClaim's (a DNS-1123 subdomain).
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _k8s_name(text: str) -> str:
    """A DNS-1123 name (lowercase alphanumerics and '-', at most 63 characters)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-") or "bench"


def is_claim_name(name: str) -> bool:
    """True for a name Kubernetes accepts for a PersistentVolumeClaim; checked here so a typo is
    a one-line error now, not a pod stuck in ContainerCreating later."""
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def gpus_per_replica(variant: Variant, task_type: str) -> int:
    """GPUs one replica of `task_type` asks for. Only the tasks that run the model's steps get
    them: MultiWorkerMirrored workers and ParameterServer workers (the coordinator schedules
    each step on one), `devices_per_worker` each (bench.placement's rule, as local runs). The
    ParameterServer chief only dispatches and ps tasks only hold variables (unless
    `cluster.ps_devices = "gpu"`), and a `devices = "cpu"` variant uses none at all; a GPU limit
    on any of them would only keep the pod Pending until a GPU node is free."""
    if variant.devices == "cpu":
        return 0
    return gpus_per_process(variant, Task(task_type, 0, task_type != "ps"))


def _pod_spec(variant: Variant, task_type: str, command: list[str], *, image: str,
              results_dir: str, pvc: str | None, gpus: bool) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "tensorflow",  # the container name the TFJob operator expects
        "image": image,
        "command": list(command),  # a copy each: no YAML aliases
    }
    count = gpus_per_replica(variant, task_type) if gpus else 0
    if count:
        # A quantity is a string in the Kubernetes API (and in the SDK's model of it).
        container["resources"] = {"limits": {GPU_RESOURCE: str(count)}}
    spec: dict[str, Any] = {"containers": [container]}
    if pvc:
        # Every replica mounts it: one template serves all MultiWorkerMirrored workers, worker 0
        # (the chief) among them, and every task then sees the same results directory.
        container["volumeMounts"] = [{"name": RESULTS_VOLUME, "mountPath": results_dir}]
        spec["volumes"] = [{"name": RESULTS_VOLUME, "persistentVolumeClaim": {"claimName": pvc}}]
    return spec


def tfjob(variant: Variant, *, image: str, scenario_path: str, results_dir: str = "/results",
          namespace: str | None = None, pvc: str | None = None, gpus: bool = True
          ) -> dict[str, Any]:
    """One TFJob for `variant`. `pvc` is the claim mounted at `results_dir` (without one the
    record lives on the chief container's own disk and goes with it); `gpus=False` requests no
    GPU anywhere, for clusters whose nodes have none.

    successPolicy stays at its default (training-operator release-1.9, tfjob_controller.go
    UpdateJobStatus): with a Chief replica the job succeeds when the chief completes, without
    one when worker 0 does. Both are the task that writes the record (cluster_plan.chief_of),
    so the job ends exactly when the record is written, whatever the ParameterServer servers,
    which never exit, are doing; "AllWorkers" would wait on them forever.
    """
    if pvc is not None and not is_claim_name(pvc):
        raise ValueError(f"not a PersistentVolumeClaim name: {pvc!r}")
    counts = Counter(task.type for task in plan_tasks(variant))
    command = ["bench", "worker", scenario_path, "--variant", variant.id,
               "--results-dir", results_dir]
    specs = {}
    for task_type in ("chief", "worker", "ps"):
        if not counts.get(task_type):
            continue
        specs[_REPLICA_TYPE[task_type]] = {
            "replicas": counts[task_type],
            "restartPolicy": "Never",
            "template": {"spec": _pod_spec(variant, task_type, command, image=image,
                                           results_dir=results_dir, pvc=pvc, gpus=gpus)},
        }
    metadata: dict[str, Any] = {"name": _k8s_name(f"bench-{variant.id}"),
                                "labels": {"app.kubernetes.io/name": "bench",
                                           "bench/scenario": _k8s_name(variant.scenario_name)},
                                "annotations": {"bench/variant": variant.id}}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata,
            "spec": {"runPolicy": {"cleanPodPolicy": CLEAN_POD_POLICY},
                     "tfReplicaSpecs": specs}}
