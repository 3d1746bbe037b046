"""Launchers start the processes a variant needs and return its record."""

from __future__ import annotations

from typing import Any, Protocol

from bench.launch.cluster import ClusterLauncher
from bench.launch.forkserver import ForkServer
from bench.launch.local import LocalLauncher
from bench.protocol import ProgressFn
from bench.scenario.schema import Variant


class Launcher(Protocol):
    def run(self, variant: Variant, run_dir: Any, progress: ProgressFn | None = None
            ) -> dict[str, Any]: ...


def launcher_for(variant: Variant, forkserver: ForkServer | None = None) -> Launcher:
    """Single-process strategies run locally (forked from `forkserver` when given);
    multi-process ones get a cluster launcher, whose tasks are always new interpreters."""
    return ClusterLauncher() if variant.is_cluster else LocalLauncher(forkserver)
