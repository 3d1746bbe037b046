"""Commands for real clusters: `bench worker` (one task, started by the cluster manager) and
`bench cluster manifest` (the manager's job description)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from bench.cli.common import EnvCacheOption, ScenarioArg, console, err_console
from bench.errors import BenchError


class Resolver(enum.StrEnum):
    tf_config = "tf_config"
    slurm = "slurm"


def worker(
    scenario: ScenarioArg,
    variant: Annotated[str, typer.Option(help="Variant id (see `bench validate`).")],
    results_dir: Annotated[Path, typer.Option("--results-dir", "-o",
                                              help="Where the chief creates the run directory.")
                           ] = Path("results"),
    resolver: Annotated[Resolver, typer.Option(help="Where the cluster comes from: tf_config (the "
                                                    "TF_CONFIG variable, as Kubeflow's TFJob sets "
                                                    "it) or slurm (SlurmClusterResolver).")
                        ] = Resolver.tf_config,
    port_base: Annotated[Optional[int], typer.Option(
        help="First port per node with --resolver slurm (default: from SLURM_JOB_ID, so jobs "
             "sharing a node differ).")] = None,
    record: Annotated[Optional[Path], typer.Option(
        help="The chief writes its record here (JSON) instead of creating a run directory; "
             "what `bench run --launcher slurm` gathers.")] = None,
) -> None:
    """Run ONE task of a cluster variant, started by a cluster manager (TFJob, SLURM, ...).

    SCENARIO is a scenario file, or a run directory's variants.json.

    Every task of the cluster runs this same command; TF_CONFIG (or SLURM's variables) tells each
    which task it is. The chief writes the record. Exit code: 0 when the task's variant is ok or
    skipped, 1 when it failed, 2 on bad input.
    """
    from bench.launch.external import run_task

    code = run_task(scenario, variant, results_dir, resolver.value, port_base, record)
    raise typer.Exit(code=code)


def manifest(
    scenario: ScenarioArg,
    image: Annotated[str, typer.Option(help="Container image with bench and the scenario.")],
    format: Annotated[str, typer.Option("--format", help="Manifest kind (tfjob).")] = "tfjob",
    variant: Annotated[Optional[list[str]], typer.Option(help="Variant id(s); default: every "
                                                         "cluster variant.")] = None,
    scenario_path: Annotated[Optional[str], typer.Option(help="Scenario path inside the image "
                                                         "(default: as given).")] = None,
    results_dir: Annotated[str, typer.Option(help="Results directory inside the pods.")
                           ] = "/results",
    namespace: Annotated[Optional[str], typer.Option(help="Kubernetes namespace.")] = None,
    pvc: Annotated[Optional[str], typer.Option(help="PersistentVolumeClaim mounted at "
                                               "--results-dir in every pod (ReadWriteMany when "
                                               "pods can land on different nodes); without one "
                                               "the record stays in the chief's container.")
                   ] = None,
    gpus: Annotated[bool, typer.Option("--gpus/--no-gpus", help="Request nvidia.com/gpu for the "
                                       "replicas that compute (never for devices = \"cpu\" "
                                       "variants); --no-gpus for CPU-only nodes.")] = True,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here (refuses to "
                                                "overwrite) instead of stdout.")] = None,
) -> None:
    """Write Kubeflow TFJob YAML for a scenario's MultiWorkerMirrored / ParameterServer variants.

    GPUs are requested by default because a benchmark that silently lands on CPU measures the
    wrong thing; --no-gpus exists because a GPU limit keeps a pod Pending forever on a cluster
    without GPU nodes.
    """
    import yaml

    from bench.launch.tfjob import is_claim_name, tfjob
    from bench.results import write_text_atomic

    if format != "tfjob":
        raise BenchError(f"--format: only 'tfjob' is supported, got {format!r}")
    if pvc is not None and not is_claim_name(pvc):
        raise BenchError(f"--pvc: {pvc!r} is not a PersistentVolumeClaim name (lowercase letters, "
                         "digits, '-' and '.', starting and ending with a letter or digit, at "
                         "most 253 characters)")
    if pvc is not None and not results_dir.startswith("/"):
        raise BenchError(f"--results-dir: {results_dir!r} must be an absolute path: it is where "
                         "--pvc is mounted")
    wanted = cluster_variants(scenario, variant)
    if any(v.environment is not None for v in wanted):
        raise BenchError(f"{scenario}: environment: a TFJob's container image decides its "
                         "TensorFlow, and bench builds environments on this host only; build one "
                         "image per environment and give each its own scenario without the table")
    docs = [tfjob(v, image=image, scenario_path=scenario_path or str(scenario),
                  results_dir=results_dir, namespace=namespace, pvc=pvc, gpus=gpus)
            for v in wanted]
    if out is not None and out.exists():
        raise BenchError(f"{out}: exists; not overwriting")
    if pvc is None:  # stderr: stdout may be the YAML itself
        sys.stderr.write(f"warning: no --pvc: the record stays only in the chief pod's own "
                         f"filesystem ({results_dir}), out of kubectl cp's reach once the pod has "
                         "finished; pass --pvc NAME to keep it\n")
    text = yaml.safe_dump_all(docs, sort_keys=False)
    if out is None:
        sys.stdout.write(text)
        return
    write_text_atomic(out, text)
    console.print(f"wrote {len(docs)} TFJob manifest(s) to {out}")


def sbatch(
    scenario: ScenarioArg,
    variant: Annotated[Optional[list[str]], typer.Option(help="Variant id(s); default: every "
                                                         "cluster variant.")] = None,
    partition: Annotated[Optional[str], typer.Option(help="Slurm partition (#SBATCH "
                                                     "--partition).")] = None,
    sbatch_arg: Annotated[Optional[list[str]], typer.Option(
        help="Another #SBATCH option, e.g. --sbatch-arg=--gres=gpu:8 (repeatable).")] = None,
    results_dir: Annotated[str, typer.Option(help="Where the chief creates the run directory "
                                                  "(on the shared filesystem).")] = "results",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the script(s) into "
                                                "this directory (one per variant) instead of "
                                                "stdout.")] = None,
    env_cache: EnvCacheOption = None,
) -> None:
    """Write the Slurm batch script of each cluster variant, to submit yourself with sbatch.

    It is the script `bench run --launcher slurm` submits, except that the chief writes a run
    directory under --results-dir instead of handing its record to a waiting `bench run`.
    """
    from bench.launch import env_prepare
    from bench.launch.slurm import SlurmOptions, batch_script, cluster_worker_args
    from bench.results import make_dirs, write_text_atomic

    wanted = cluster_variants(scenario, variant)
    # the scripts name each environment's interpreter: it must be on storage the nodes share
    prepared = env_prepare.prepare(wanted, str(scenario), err_console, env_cache)
    prepared.release()
    if prepared.failures:
        label, reason = next(iter(prepared.failures.items()))
        raise BenchError(f"environment {label} did not build: {reason}")
    wanted = prepared.variants
    options = SlurmOptions(partition, tuple(sbatch_arg or ()))
    scripts = {v.id: batch_script(v, cluster_worker_args(scenario.resolve(), v,
                                                         results_dir=results_dir),
                                  f"bench-{v.id}-%j.log", options)
               for v in wanted}
    if out is None:
        sys.stdout.write("\n".join(scripts.values()))
        return
    make_dirs(out)
    for variant_id, text in scripts.items():
        path = out / f"{variant_id}.sbatch"
        write_text_atomic(path, text)
        console.print(f"wrote {path}")


def cluster_variants(scenario: Path, ids: list[str] | None) -> list[Any]:
    """The scenario's cluster variants, or those of `ids` (each must be one)."""
    from bench.scenario.loading import load_variants

    _, variants = load_variants(scenario)
    wanted = [v for v in variants if v.is_cluster and (not ids or v.id in ids)]
    missing = set(ids or []) - {v.id for v in wanted}
    if missing or not wanted:
        what = ", ".join(sorted(missing)) if missing else "no cluster variants"
        raise BenchError(f"{scenario}: --variant: {what} (cluster variants: "
                         f"{', '.join(v.id for v in variants if v.is_cluster) or 'none'})")
    return wanted
