"""Kubeflow TFJob manifests for a scenario's cluster variants.

The TFJob operator starts one pod per replica and sets TF_CONFIG in each; every container runs
`bench worker SCENARIO --variant ID`, so the manifest only has to get roles and counts right,
which come from the same plan the local launcher uses.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from bench.launch.cluster_plan import plan_tasks
from bench.scenario.schema import Variant

_REPLICA_TYPE = {"chief": "Chief", "worker": "Worker", "ps": "PS"}


def _k8s_name(text: str) -> str:
    """A DNS-1123 name (lowercase alphanumerics and '-', at most 63 characters)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-") or "bench"


def tfjob(variant: Variant, *, image: str, scenario_path: str, results_dir: str = "/results",
          namespace: str | None = None) -> dict[str, Any]:
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
            "template": {"spec": {"containers": [{
                "name": "tensorflow",  # the container name the TFJob operator expects
                "image": image,
                "command": list(command),  # a copy each: no YAML aliases
            }]}},
        }
    metadata: dict[str, Any] = {"name": _k8s_name(f"bench-{variant.id}"),
                                "labels": {"app.kubernetes.io/name": "bench",
                                           "bench/scenario": _k8s_name(variant.scenario_name)},
                                "annotations": {"bench/variant": variant.id}}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata,
            "spec": {"runPolicy": {"cleanPodPolicy": "All"}, "tfReplicaSpecs": specs}}
