"""`bench worker`: run one task of a cluster variant under a cluster manager's own launch.

Kubeflow's TFJob (and any manager that does the same) starts every task with TF_CONFIG set;
SLURM starts every task with SLURM_* variables, which TensorFlow's SlurmClusterResolver turns
into a cluster. Either way this process runs exactly its own task: a parameter-server `ps` or
`worker` task serves, a training task measures, and only the chief writes the run directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import fingerprint, results
from bench.child_env import ChildEnv
from bench.errors import BenchError
from bench.launch.cluster_plan import is_chief_config, plan_tasks
from bench.placement import flavour_env, task_computes
from bench.record.cluster import Cluster
from bench.scenario.loading import load_variants
from bench.scenario.schema import Scenario, Variant


def find_variant(path: Path, variant_id: str) -> tuple[str, Variant, Scenario | None]:
    """The variant from a scenario file, or from a run directory's variants.json (what
    `bench run --launcher slurm` gives its jobs: the variants as the run's options shaped them).
    Returns the scenario's name, the variant and the scenario (None for a variants file)."""
    if path.name == results.VARIANTS_FILE:
        variants, scenario = results.read_json(path), None
    else:
        scenario, variants = load_variants(path)
    variant = results.variant_by_id(variants, variant_id, path)
    return variant.scenario_name, variant, scenario


def _gpus_on_node() -> int:
    """GPUs on this node. SlurmClusterResolver counts them itself with nvidia-smi and crashes
    (FileNotFoundError, TF 2.21) where nvidia-smi is absent, so we count and tell it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([g for g in visible.split(",") if g.strip()])
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def tf_config_from_slurm(variant: Variant, port_base: int) -> str:
    """TF_CONFIG for this SLURM task, from TensorFlow's SlurmClusterResolver."""
    import tensorflow as tf

    jobs = dict(Counter(task.type for task in plan_tasks(variant)))
    gpus = _gpus_on_node()
    if gpus:
        gpu_args = {"gpus_per_node": gpus}
    else:
        # The resolver packs tasks onto a node by stepping through its GPUs, so with none it
        # fails (range step 0) or lists no task. With auto_set_gpu=False that bookkeeping is
        # never applied: one nominal slot per task lets CPU-only nodes resolve.
        gpu_args = {"gpus_per_node": sum(jobs.values()), "gpus_per_task": 1}
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
        jobs=jobs, port_base=port_base, auto_set_gpu=False, **gpu_args)
    return json.dumps({"cluster": resolver.cluster_spec().as_dict(),
                       "task": {"type": resolver.task_type, "index": resolver.task_id}})


def cluster_config(variant: Variant, resolver: str, port_base: int) -> dict[str, Any]:
    if resolver == "slurm":
        os.environ["TF_CONFIG"] = tf_config_from_slurm(variant, port_base)
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise BenchError("TF_CONFIG is not set: the cluster manager must set it for every task "
                         "(or use --resolver slurm inside a SLURM job)")
    try:
        config = json.loads(raw)
        config["task"]["type"], config["task"]["index"]  # noqa: B018 - both must exist
    except (ValueError, KeyError, TypeError):
        raise BenchError(f"TF_CONFIG is not a valid cluster description: {raw[:200]}") from None
    return config


def port_base_for_job(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """A port base that differs between Slurm jobs (so two jobs sharing a node do not collide):
    20000 + 100 x (job id mod 400), below the usual ephemeral range."""
    job = environ.get("SLURM_JOB_ID", "")
    return 20000 + 100 * (int(job) % 400) if job.isdigit() else 8888


def hide_gpus_unless_computing(variant: Variant, task_type: str) -> None:
    """A task that computes nothing (a ParameterServer coordinator, its ps tasks unless the
    scenario puts them on GPUs) is hidden the GPUs a cluster manager gave it."""
    if not task_computes(variant, task_type):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def run_task(scenario_path: Path, variant_id: str, results_dir: Path, resolver: str,
             port_base: int | None, record_path: Path | None = None) -> int:
    """Run this process's task. The chief writes the record: to `record_path` when given (a
    launcher gathers it), else into a new run directory under `results_dir`."""
    scenario_name, variant, scenario = find_variant(scenario_path, variant_id)
    if not variant.is_cluster:
        raise BenchError(f"{scenario_path}: variant '{variant_id}' is not a cluster strategy; "
                         "use `bench run`")
    os.environ.update(flavour_env(variant))  # before the Slurm resolver imports TensorFlow
    config = cluster_config(variant, resolver,
                            port_base if port_base is not None else port_base_for_job())
    task_type = config["task"]["type"]
    hide_gpus_unless_computing(variant, task_type)
    if (told := ChildEnv.from_env()).trace_dir:  # one trace folder per task, as local clusters have
        os.environ.update(told.but(trace_dir=str(
            Path(told.trace_dir) / f"{task_type}-{config['task']['index']}")).to_env())
    if not variant.kind.trains(task_type):  # it serves: a ParameterServer worker or ps task
        from bench.launch import ps_server as server
        return server.main()
    from bench.worker import run_variant

    record = run_variant(variant, spawn_time=time.time(), progress=lambda done, total: None)
    record.cluster = Cluster(network="external", spec=config["cluster"], resolver=resolver,
                             chief="this task")
    if is_chief_config(config) and record_path is not None:
        record.write(record_path)
        print(f"{record.status}: record written to {record_path}")
    elif is_chief_config(config):
        run_dir = results.create_run_dir(results_dir, scenario_name)
        results.init_run(run_dir, scenario_path, [variant.model_dump(mode="json", by_alias=True)],
                         fingerprint.environment(scenario.digest() if scenario else
                                                 variant.scenario_digest))
        results.append_record(run_dir, record)
        print(f"{record.status}: record written to {run_dir / results.RECORDS_FILE}")
    else:
        print(f"{record.status}: {task_type}:{config['task']['index']} done (the chief writes "
              "the record)")
    if record.status == "failed":
        print(f"failed: {record.reason}", file=sys.stderr)
        return 1
    return 0
