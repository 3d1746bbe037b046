"""Launch a cluster variant (MultiWorkerMirrored, ParameterServer) on this host.

The parent starts one supervisor (`bench.launch.supervisor`), inside a private network namespace
unless the scenario chooses the host network, and gives it the variant's budget plus a margin:
the supervisor enforces the budget itself and names the task that failed or hung; the parent's
kill of the whole process group is the backstop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import entrypoints
from bench.launch import netns
from bench.launch.local import run_worker_command
from bench.protocol import ProgressFn
from bench.records import base_record, finish
from bench.results import VARIANTS_FILE
from bench.scenario.schema import Variant

SUPERVISOR_MARGIN_S = 20.0  # teardown of a TF cluster takes a few seconds


class ClusterLauncher:
    def run(self, variant: Variant, run_dir: Path, progress: ProgressFn | None = None
            ) -> dict[str, Any]:
        record_path = run_dir / "logs" / f"{variant.id}.record.json"
        cmd = entrypoints.command(entrypoints.CLUSTER_SUPERVISOR,
                                  "--variants", str(run_dir / VARIANTS_FILE), "--id", variant.id,
                                  "--record", str(record_path), "--network", variant.network)
        if variant.network == "isolated":
            problem = netns.isolation_problem()
            if problem:
                return finish(base_record(variant), "skipped", reason=(
                    "cannot start the cluster in a private network namespace "
                    f"({problem}); TensorFlow's servers listen on every interface, so bench "
                    "only runs them on the host network when the scenario sets "
                    "cluster.network = \"host\""))
            cmd = netns.isolated_command(cmd)
        return run_worker_command(variant, run_dir, cmd, record_path,
                                  variant.measure.timeout_s + SUPERVISOR_MARGIN_S, progress)
