"""A run's environments, made ready before it starts: every `[environment]` point resolved against
the package index, built or found in the cache, and every variant given its interpreter.

Bad input stops the run here, before anything is written (a specifier no release matches, a
TensorFlow older than bench supports: one line naming the field). An environment that fails to
build fails only its own variants, with pip's error line as their reason; the run goes on.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from bench.errors import BenchError
from bench.launch import env_index, environments
from bench.placement import host_gpus
from bench.record.model import VariantRecord
from bench.scenario.environment import EnvironmentPoint
from bench.scenario.schema import Variant

# What a build shows as it goes: how far it is, from the latest of these its output reached.
STAGES = ("creating the virtualenv", "Collecting", "Installing collected packages",
          "Successfully installed", "listing what was installed")


@dataclass
class Prepared:
    """The variants with their environments filled in (interpreter, cache key, versions), and
    the environments that could not be built, by label, with why."""

    variants: list[Variant]
    failures: dict[str, str] = field(default_factory=dict)
    environments: list[dict[str, Any]] = field(default_factory=list)  # for environment.json
    seconds: float = 0.0
    holds: list[Any] = field(default_factory=list)  # shared locks: no prune while a run uses them

    def release(self) -> None:
        """Let go of the environments (`bench env prune` may remove them again)."""
        for lock in self.holds:
            lock.close()
        self.holds.clear()

    def failed_records(self) -> list[VariantRecord]:
        """A failed record for each variant whose environment did not build."""
        return [VariantRecord.failed(
                    v, f"environment {v.environment.label}: {self.failures[v.environment.label]}",
                    type="EnvironmentBuildFailed")
                for v in self.variants if v.environment and v.environment.label in self.failures]

    def runnable(self) -> list[Variant]:
        return [v for v in self.variants
                if not (v.environment and v.environment.label in self.failures)]


def points_of(variants: list[Variant]) -> list[EnvironmentPoint]:
    """The distinct environment points of `variants`, in order of first use."""
    seen: dict[str, EnvironmentPoint] = {}
    for v in variants:
        if v.environment is not None:
            seen.setdefault(v.environment.label, v.environment)
    return list(seen.values())


def prepare(variants: list[Variant], source: str, console: Console,
            cache: Path | None = None) -> Prepared:
    """Resolve, build or reuse the environments `variants` run in (only those: `--only` builds
    what it selects). Raises ScenarioError on a specifier the index cannot satisfy."""
    points = points_of(variants)
    if not points:
        return Prepared(variants)
    started = time.monotonic()
    requests = env_index.resolve(points, source, gpus=bool(host_gpus()))
    if requests and (problem := environments.checkout_problem()):
        raise BenchError(problem)
    root = environments.cache_root(cache)
    ready: dict[str, dict[str, Any]] = {}
    prepared = Prepared(variants)
    for point in points:
        if point.is_current:
            ready[point.label] = {"python": sys.executable, "key": None,
                                  "resolved": env_index.installed()}
            continue
        built = _ready(root, requests[point.label], point.label, console)
        prepared.environments.append(built.summary())
        if built.reason is not None:
            prepared.failures[point.label] = built.reason
            continue
        assert built.manifest is not None
        prepared.holds.append(environments.hold(root, built.name))
        ready[point.label] = {"python": built.python, "key": built.manifest["key"],
                              "resolved": built.manifest.get("resolved") or {}}
    prepared.variants = [
        v.model_copy(update={"environment": v.environment.model_copy(
            update=ready[v.environment.label])})
        if v.environment is not None and v.environment.label in ready else v
        for v in variants]
    prepared.seconds = time.monotonic() - started
    return prepared


def _ready(root: Path, request: env_index.Request, label: str, console: Console
           ) -> environments.Built:
    """One environment, from the cache (said so) or built with a progress bar."""
    if request.unresolved_because is not None:
        console.print(f"[yellow]environment {escape(label)}: the package index did not answer "
                      f"({escape(request.unresolved_because)}); {escape(request.tensorflow)} "
                      "as written[/]")
        if (found := environments.matching_cached(root, request)) is not None:
            manifest = environments.read_manifest(found)
            environments.touch(found)
            built = environments.Built(label, found.name, found, manifest, reused=True)
            _say(console, built)
            return built
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        what = f"environment {escape(label)} ({escape(request.tensorflow)})"
        task = progress.add_task(what, total=len(STAGES))

        def step(line: str) -> None:
            reached = [k for k, stage in enumerate(STAGES) if line.startswith(stage)]
            if reached:
                progress.update(task, completed=reached[0] + 1)
            progress.update(task, description=f"{what}: {escape(line[:70])}")

        built = environments.build(root, request, label, step)
    _say(console, built)
    return built


def _say(console: Console, built: environments.Built) -> None:
    manifest = built.manifest or {}
    versions = ", ".join(f"{n} {v}" for n, v in (manifest.get("resolved") or {}).items())
    if built.reason is not None:
        console.print(f"[red]environment {escape(built.label)}: build failed: "
                      f"{escape(built.reason)}[/] (log: {escape(str(built.log))})", soft_wrap=True)
    elif built.reused:
        console.print(f"environment {escape(built.label)}: reusing {escape(str(built.dir))} "
                      f"({escape(versions)})", soft_wrap=True)
    else:
        console.print(f"environment {escape(built.label)}: built in {built.seconds:.0f} s, "
                      f"{manifest.get('size_mb', 0) / 1024:.1f} GB ({escape(versions)}): "
                      f"{escape(str(built.dir))}", soft_wrap=True)
