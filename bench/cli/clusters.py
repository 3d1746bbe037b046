"""Commands for real clusters: `bench worker` (one task, started by the cluster manager) and
`bench cluster manifest` (the manager's job description)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from bench.cli.common import ScenarioArg, console
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
    port_base: Annotated[int, typer.Option(help="First port per node with --resolver slurm.")
                         ] = 8888,
) -> None:
    """Run ONE task of a cluster variant, started by a cluster manager (TFJob, SLURM, ...).

    Every task of the cluster runs this same command; TF_CONFIG (or SLURM's variables) tells each
    which task it is. The chief writes the record.
    """
    from bench.launch.external import run_task

    code = run_task(scenario, variant, results_dir, resolver.value, port_base)
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
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here (refuses to "
                                                "overwrite) instead of stdout.")] = None,
) -> None:
    """Write Kubeflow TFJob YAML for a scenario's MultiWorkerMirrored / ParameterServer variants."""
    import yaml

    from bench.launch.tfjob import tfjob
    from bench.scenario.loading import load_variants

    if format != "tfjob":
        raise BenchError(f"--format: only 'tfjob' is supported, got {format!r}")
    _, variants = load_variants(scenario)
    wanted = [v for v in variants if v.is_cluster and (not variant or v.id in variant)]
    missing = set(variant or []) - {v.id for v in wanted}
    if missing or not wanted:
        what = ", ".join(sorted(missing)) if missing else "no cluster variants"
        raise BenchError(f"{scenario}: --variant: {what} (cluster variants: "
                         f"{', '.join(v.id for v in variants if v.is_cluster) or 'none'})")
    docs = [tfjob(v, image=image, scenario_path=scenario_path or str(scenario),
                  results_dir=results_dir, namespace=namespace) for v in wanted]
    text = yaml.safe_dump_all(docs, sort_keys=False)
    if out is None:
        sys.stdout.write(text)
        return
    if out.exists():
        raise BenchError(f"{out}: exists; not overwriting")
    out.write_text(text)
    console.print(f"wrote {len(docs)} TFJob manifest(s) to {out}")
