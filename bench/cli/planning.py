"""`bench plan`: what bench would start for each variant, on this host or a made-up one.

A dry run: no TensorFlow, no process started. It prints what `bench.placement.plan_variant`
returns, the same function every launcher uses, so a laptop shows what an 8-GPU box would get.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from bench.child_env import ChildEnv
from bench.cli.common import ScenarioArg, console
from bench.errors import BenchError

MAX_GPUS = 1024  # more than any one host has: a typo, not an inventory

_SHOWN_ENV = ("CUDA_VISIBLE_DEVICES", "TF_GPU_THREAD_MODE",
              ChildEnv.name("logical_gpu_memory_mb"), ChildEnv.name("gpu_shared"))


def plan(
    scenario: ScenarioArg,
    gpus: Annotated[Optional[int], typer.Option(help="Plan for a host with this many GPUs "
                                                "instead of this one's (nvidia-smi).")] = None,
    cuda_visible_devices: Annotated[Optional[str], typer.Option(
        "--cuda-visible-devices", help="Plan as if CUDA_VISIBLE_DEVICES were set to this list "
                                       "(default: this shell's value).")] = None,
    gpu_memory_mb: Annotated[Optional[int], typer.Option(
        help="Memory of each made-up GPU (with --gpus), for logical-GPU limits.")] = None,
    only: Annotated[Optional[list[str]], typer.Option(help="Only variants whose id matches "
                                                      "this glob (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: a list of {variant, "
                                          "processes: [{role, index, devices, env}]}.")] = False,
) -> None:
    """Show, for every variant, each process bench would start: role, devices, environment."""
    import fnmatch
    import os

    from bench.placement import Inventory, plan_variant
    from bench.scenario.loading import load_variants

    if gpus is not None and not 0 <= gpus <= MAX_GPUS:
        raise BenchError(f"--gpus: must be between 0 and {MAX_GPUS}, got {gpus}")
    if gpu_memory_mb is not None and gpu_memory_mb <= 0:
        raise BenchError(f"--gpu-memory-mb: must be positive, got {gpu_memory_mb}")
    _, variants = load_variants(scenario)
    if only:
        variants = [v for v in variants if any(fnmatch.fnmatchcase(v.id, p) for p in only)]
        if not variants:
            raise BenchError(f"--only: no variant of {scenario} matches {', '.join(only)}")
    visible = (cuda_visible_devices if cuda_visible_devices is not None
               else os.environ.get("CUDA_VISIBLE_DEVICES"))
    if gpus is not None:
        inventory = Inventory.fake(gpus, visible, gpu_memory_mb)
    else:
        from bench.fingerprint import gpus as detected_gpus

        inventory = Inventory.from_gpus(detected_gpus(), visible)
    plans = [{"variant": v.id, "processes": [p.to_dict() for p in plan_variant(v, inventory)]}
             for v in variants]
    if as_json:
        typer.echo(json.dumps(plans, indent=2))
        return
    _print_table(scenario, inventory.gpu_ids, inventory.source, plans)


def _print_table(scenario: Path, gpu_ids: tuple[str, ...], source: str, plans: list[dict]
                 ) -> None:
    host = f"GPUs {', '.join(gpu_ids)} ({source})" if gpu_ids else f"no GPU ({source})"
    table = Table(title=f"{escape(str(scenario))}: {host}", title_justify="left")
    for column in ("variant", "process", "devices", "environment"):
        table.add_column(column, overflow="fold")
    for entry in plans:
        for k, proc in enumerate(entry["processes"]):
            env = " ".join(f"{key}={proc['env'][key]!r}" for key in _SHOWN_ENV
                           if key in proc["env"])
            if "TF_CONFIG" in proc["env"]:
                env = (env + " TF_CONFIG=<cluster, ports chosen at launch>").strip()
            table.add_row(escape(entry["variant"]) if k == 0 else "",
                          f"{proc['role']} {proc['index']}", escape(", ".join(proc["devices"])),
                          escape(env) or "-")
        table.add_section()
    console.print(table)
