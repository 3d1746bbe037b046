"""`bench env`: the fingerprint every run records (with no subcommand, as always), and the cache of
virtualenvs that scenarios' `[environment]` tables build: `bench env list`, `prune` and `build`."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from bench.cli import inspecting
from bench.cli.common import EnvCacheOption, ScenarioArg, console


def env(ctx: typer.Context,
        devices: Annotated[bool, typer.Option(help="Probe devices in a child process.")] = True
        ) -> None:
    """Print the environment fingerprint that every run records; `list`, `prune` and `build`
    manage the virtualenvs of scenarios' environment tables."""
    if ctx.invoked_subcommand is None:
        inspecting.env(devices)


def _gb(size: float) -> str:
    return f"{size / 2**30:.1f} GB"


def _ago(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit} ago"
    return "just now"


def list_(env_cache: EnvCacheOption = None) -> None:
    """Show the cached environments: what each holds, its size, when it was built and used."""
    from bench.launch import environments

    root = environments.cache_root(env_cache)
    found = environments.cached(root)
    table = Table(title=f"environments in {escape(str(root))}", title_justify="left")
    for column in ("name", "TensorFlow", "Keras", "tf-keras", "Python", "size", "built",
                   "last used", "checkout"):
        table.add_column(column, overflow="fold")
    now = time.time()
    for env_dir, manifest in found:
        if manifest is None:
            table.add_row(escape(env_dir.name), "[yellow]incomplete build[/]", *[""] * 7)
            continue
        packages = manifest.get("packages") or {}
        tf = packages.get("tensorflow-cpu") or packages.get("tensorflow") or next(
            (v for k, v in packages.items() if k.startswith("tf-nightly")), "-")
        table.add_row(escape(env_dir.name), tf, packages.get("keras", "-"),
                      packages.get("tf-keras", "-"), manifest.get("python_version", "-"),
                      _gb((manifest.get("size_mb") or 0) * 2**20),
                      str(manifest.get("built_at", "-")),
                      _ago(now - environments.last_used(env_dir)),
                      escape(str(manifest.get("checkout", "-"))))
    console.print(table)
    total = sum((m or {}).get("size_mb") or 0 for _, m in found) * 2**20
    console.print(f"{len(found)} environment(s), {_gb(total)}")


def prune(
    names: Annotated[Optional[list[str]], typer.Argument(
        help="Environments to remove: folder names (bench env list) or key prefixes.",
        show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Remove every cached environment.")] = False,
    unused_days: Annotated[Optional[float], typer.Option(
        min=0, help="Remove environments no run used for this many days.")] = None,
    env_cache: EnvCacheOption = None,
) -> None:
    """Remove cached environments: those named, every one (--all), the unused ones
    (--unused-days), and always incomplete builds and those whose checkout is gone. An
    environment a running bench uses is kept."""
    from bench.launch import environments

    root = environments.cache_root(env_cache)
    removed, busy = environments.prune(root, tuple(names or ()), all_, unused_days)
    for name, size, why in removed:
        console.print(f"removed {escape(name)} ({_gb(size)}): {escape(why)}")
    for name in busy:
        console.print(f"[yellow]kept {escape(name)}: a running bench uses it[/]")
    left = len(environments.cached(root))
    console.print(f"freed {_gb(sum(size for _, size, _ in removed))}; {left} environment(s) "
                  f"left in {escape(str(root))}")


def build(
    scenario: ScenarioArg,
    only: Annotated[Optional[list[str]], typer.Option(help="Only the environments of variants "
                                                      "whose id matches this glob.")] = None,
    env_cache: EnvCacheOption = None,
) -> None:
    """Resolve and build (or find in the cache) the environments SCENARIO's variants run in,
    without running anything: before a run, or on a login node before Slurm jobs. Exit code 0
    when every one is ready, 1 when one failed to build, 2 on bad input."""
    from bench.launch import env_prepare
    from bench.runner import select
    from bench.scenario.loading import load_variants

    _, variants = load_variants(scenario)
    variants = select(variants, only or [], str(scenario))
    prepared = env_prepare.prepare(variants, str(scenario), console, env_cache)
    prepared.release()
    if not prepared.environments:
        console.print(f"{escape(str(scenario))}: no environment to build (no environment "
                      "table, or only 'current')")
    raise typer.Exit(code=1 if prepared.failures else 0)

