"""Launch a cluster variant (MultiWorkerMirrored, ParameterServer) on this host.

The parent starts one supervisor (`bench.launch.supervisor`), which enters a private network
namespace of its own unless the scenario chooses the host network, and gives it the variant's
budget plus a margin: the supervisor enforces the budget itself and names the task that failed or
hung; the parent's kill of the whole process group is the backstop. The supervisor is forked from
the run's fork server when there is one for the variant: it then has TensorFlow imported, and
forks its tasks' fork server from itself without importing it again.
"""

from __future__ import annotations

from pathlib import Path

from bench import entrypoints
from bench.launch import netns
from bench.launch.forkserver import ForkServers
from bench.launch.local import forkserver_for, record_path_of, run_worker_command
from bench.protocol import ProgressFn
from bench.record.model import VariantRecord
from bench.results import VARIANTS_FILE
from bench.scenario.environment import interpreter
from bench.scenario.schema import Variant

SUPERVISOR_MARGIN_S = 20.0  # teardown of a TF cluster takes a few seconds


def isolation_skip(variant: Variant) -> VariantRecord | None:
    """The skipped record of a cluster variant that cannot run here, or None."""
    if variant.network != "isolated" or not (problem := netns.isolation_problem()):
        return None
    return VariantRecord.skipped(variant, (
        f"cannot start the cluster in a private network namespace ({problem}); TensorFlow's "
        "servers listen on every interface, so bench only runs them on the host network when "
        "the scenario sets cluster.network = \"host\""))


def supervisor_command(variant: Variant, run_dir: Path) -> list[str]:
    """The supervisor of a cluster variant (check `isolation_skip` first)."""
    return entrypoints.command(entrypoints.CLUSTER_SUPERVISOR,
                               "--variants", str(run_dir / VARIANTS_FILE), "--id", variant.id,
                               "--record", str(record_path_of(run_dir, variant)),
                               "--network", variant.network,
                               python=interpreter(variant.environment))


def budget_s(variant: Variant) -> float:
    """The parent's wall-clock budget for a cluster's supervisor, which enforces the variant's
    own budget itself."""
    return variant.measure.timeout_s + SUPERVISOR_MARGIN_S


class ClusterLauncher:
    """Runs a cluster variant's supervisor under the variant's budget plus a margin."""

    def __init__(self, forkservers: ForkServers | None = None) -> None:
        self.forkservers = forkservers

    def run(self, variant: Variant, run_dir: Path, progress: ProgressFn | None = None
            ) -> VariantRecord:
        if (skipped := isolation_skip(variant)) is not None:
            return skipped
        return run_worker_command(variant, run_dir, supervisor_command(variant, run_dir),
                                  record_path_of(run_dir, variant), budget_s(variant), progress,
                                  forkserver=forkserver_for(variant, self.forkservers))
