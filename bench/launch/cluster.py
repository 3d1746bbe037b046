"""Launch a cluster variant (MultiWorkerMirrored, ParameterServer) on this host.

The parent starts one supervisor (`bench.launch.supervisor`), inside a private network namespace
unless the scenario chooses the host network, and gives it the variant's budget plus a margin:
the supervisor enforces the budget itself and names the task that failed or hung; the parent's
kill of the whole process group is the backstop.
"""

from __future__ import annotations

from pathlib import Path

from bench import entrypoints
from bench.launch import netns
from bench.launch.local import record_path_of, run_worker_command
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
    """The supervisor of a cluster variant, in its own network namespace unless the scenario
    chooses the host network (check `isolation_skip` first)."""
    cmd = entrypoints.command(entrypoints.CLUSTER_SUPERVISOR,
                              "--variants", str(run_dir / VARIANTS_FILE), "--id", variant.id,
                              "--record", str(record_path_of(run_dir, variant)),
                              "--network", variant.network,
                              python=interpreter(variant.environment))
    return netns.isolated_command(cmd) if variant.network == "isolated" else cmd


def budget_s(variant: Variant) -> float:
    """The parent's wall-clock budget for a cluster's supervisor, which enforces the variant's
    own budget itself."""
    return variant.measure.timeout_s + SUPERVISOR_MARGIN_S


class ClusterLauncher:
    def run(self, variant: Variant, run_dir: Path, progress: ProgressFn | None = None
            ) -> VariantRecord:
        if (skipped := isolation_skip(variant)) is not None:
            return skipped
        return run_worker_command(variant, run_dir, supervisor_command(variant, run_dir),
                                  record_path_of(run_dir, variant), budget_s(variant), progress)
