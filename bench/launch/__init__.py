"""Launchers start the processes a variant needs and return its record.

The launchers are imported when one is asked for, not with the package: the package's pure
modules (cluster_plan) are shared with bench.placement, which the launchers themselves import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from bench.protocol import ProgressFn
from bench.scenario.schema import Variant

if TYPE_CHECKING:
    from bench.launch.forkserver import ForkServers
    from bench.launch.slurm import SlurmOptions
    from bench.record.model import VariantRecord


class Launcher(Protocol):
    def run(self, variant: Variant, run_dir: Any, progress: ProgressFn | None = None
            ) -> VariantRecord: ...


def launcher_for(variant: Variant, forkservers: ForkServers | None = None,
                 slurm: SlurmOptions | None = None) -> Launcher:
    """With `slurm`, every variant is a Slurm job. Otherwise single-process strategies run
    locally and multi-process ones get a local cluster launcher; the process each starts (the
    worker, the cluster's supervisor) is forked from the fork server of its environment when
    there is one."""
    from bench.launch.cluster import ClusterLauncher
    from bench.launch.local import LocalLauncher
    from bench.launch.slurm import SlurmLauncher

    if slurm is not None:
        return SlurmLauncher(slurm)

    return ClusterLauncher(forkservers) if variant.is_cluster else LocalLauncher(forkservers)
