"""Launch a single-process variant: one `python -m bench.worker` child per variant.

Multi-process strategies (MultiWorkerMirrored, ParameterServer) will start several children with
TF_CONFIG through a cluster launcher implementing the same `run` signature.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench import entrypoints
from bench.child_env import ChildEnv
from bench.launch.forkserver import ForkServer, ForkServers
from bench.launch.handback import no_record, take_record, timed_out
from bench.launch.process import Outcome, WorkerProcess, last_error_line
from bench.placement import detected_inventory, forks, host_gpus, plan_variant
from bench.protocol import ProgressFn
from bench.record.cluster import Launch
from bench.record.model import VariantRecord
from bench.results import LOGS_DIR, VARIANTS_FILE
from bench.scenario.environment import interpreter
from bench.scenario.schema import Variant


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A child's environment: this process's, with when it was started and the host's GPUs
    (unless a launcher above already told them), and `extra` over it."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    told = ChildEnv.from_env(env)
    env.update(ChildEnv(spawn_time=time.time(), host_gpus=(
        list(host_gpus()) if told.host_gpus is None else None)).to_env())
    env.update(extra or {})
    return env


def trace_dir(run_dir: Path, variant: Variant, task: str | None = None) -> Path:
    """Where a variant's (or one cluster task's) profiler output goes: a TensorBoard logdir."""
    base = run_dir / "traces" / variant.id
    return base / task if task else base


def checkpoint_dir(run_dir: Path, variant: Variant) -> Path:
    """Where a variant's checkpoints go (measure.checkpoint), one folder for all its tasks."""
    return run_dir / "checkpoints" / variant.id


def data_cache_dir(run_dir: Path) -> Path:
    """Data that every variant of a run would otherwise generate again (see data._synthetic);
    the runner removes it at the end of the run."""
    return run_dir / "cache"


def temp_dir(run_dir: Path) -> Path:
    """Every process of a run writes its temporary files here (TMPDIR): workers end with
    os._exit, so TensorFlow's autograph files, which it removes at interpreter exit, stay behind;
    the runner removes this folder at the end of the run."""
    return run_dir / "tmp"


def run_worker_command(variant: Variant, run_dir: Path, cmd: list[str], record_path: Path,
                       budget_s: float, progress: ProgressFn | None,
                       extra_env: dict[str, str] | None = None,
                       forkserver: ForkServer | None = None) -> VariantRecord:
    """Run one child under a wall-clock budget; return the record it wrote, or a failed one.
    Its clock (and its spawn time) starts once its fork server is ready (await_forkservers)."""
    if forkserver is not None:
        forkserver.wait_ready()
    log_path = run_dir / LOGS_DIR / f"{variant.id}.log"
    with WorkerProcess(cmd, worker_env(extra_env), log_path, progress,
                       forkserver=forkserver) as proc:
        outcome = proc.wait(budget_s)
    return launched_record(variant, proc, record_path, outcome, budget_s)


def launched_record(variant: Variant, proc: WorkerProcess, record_path: Path, outcome: Outcome,
                    budget_s: float, where: str = "") -> VariantRecord:
    """What a finished process leaves: its record (or a failed one), with how it started;
    `where` it was last let go from its gate, for a timeout's reason."""
    record = collect_record(variant, record_path, proc.log_path, outcome, budget_s, where)
    return record.add(launch=Launch(start_method=proc.start_method,
                                    fork_problem=proc.fork_problem))


def collect_record(variant: Variant, record_path: Path, log_path: Path, outcome: Outcome,
                   budget_s: float, where: str = "") -> VariantRecord:
    """The record the child wrote, or a failed one saying why there is none."""
    if (record := take_record(record_path)) is not None:
        return record.add(wall_s=outcome.duration_s)
    if outcome.timed_out:
        return no_record(variant, log_path,
                         timed_out(budget_s, f"{where}; worker process group killed"), "Timeout")
    cause = last_error_line(log_path) or "no output"
    return no_record(variant, log_path, f"worker exited with code {outcome.returncode} without "
                     f"a record: {cause}", "WorkerCrash", message=cause,
                     returncode=outcome.returncode)


def worker_command(run_dir: Path, variant: Variant, record_path: Path) -> list[str]:
    """The worker of one variant (or cluster task), with its environment's interpreter."""
    return entrypoints.command(entrypoints.WORKER, "--variants", str(run_dir / VARIANTS_FILE),
                               "--id", variant.id, "--record", str(record_path),
                               python=interpreter(variant.environment))


class LocalLauncher:
    """Runs a variant in one fresh process under a wall-clock budget.

    With a fork server of the variant's environment the process is forked from it (it has
    already imported TensorFlow: see bench.launch.forkserver); without one, or when it is
    unavailable, it is a new interpreter.
    """

    def __init__(self, forkservers: ForkServers | None = None) -> None:
        self.forkservers = forkservers

    def run(self, variant: Variant, run_dir: Path, progress: ProgressFn | None = None
            ) -> VariantRecord:
        record_path = record_path_of(run_dir, variant)
        return run_worker_command(variant, run_dir, worker_command(run_dir, variant, record_path),
                                  record_path, variant.measure.timeout_s, progress,
                                  variant_env(run_dir, variant),
                                  forkserver_for(variant, self.forkservers))


def forkserver_for(variant: Variant, forkservers: ForkServers | None) -> ForkServer | None:
    """The fork server of the variant's environment and Keras flavour (bench.placement
    .is_legacy_keras), if the run started one."""
    if forkservers is None or not forks(variant):
        return None
    return forkservers.get(interpreter(variant.environment), variant.train.keras)


def await_forkservers(variants: list[Variant], forkservers: ForkServers | None) -> None:
    """Wait until the fork servers these variants fork from are ready. A server's start-up (its
    TensorFlow import, begun with the run) is the run's: no variant's start, time or budget
    counts it."""
    for variant in variants:
        if (server := forkserver_for(variant, forkservers)) is not None:
            server.wait_ready()  # at once when it is ready already


def record_path_of(run_dir: Path, variant: Variant) -> Path:
    """Where a single-process variant's worker writes its record before the runner takes it."""
    return run_dir / LOGS_DIR / f"{variant.id}.record.json"


def variant_env(run_dir: Path, variant: Variant) -> dict[str, str]:
    """What a single-process variant's worker is told beyond the common worker environment: its
    devices (bench.placement), where to trace, where shared data is cached."""
    (main,) = plan_variant(variant, detected_inventory())
    return {**main.env, **run_paths_env(run_dir, variant)}


def run_paths_env(run_dir: Path, variant: Variant, task: str | None = None) -> dict[str, str]:
    """Where a variant's worker (or one cluster task) traces, saves checkpoints, finds the
    run's shared data cache and writes temporary files, and the run it belongs to (`run_dir`:
    how a test finds every process a run left behind)."""
    return {**ChildEnv(run_dir=str(run_dir), trace_dir=str(trace_dir(run_dir, variant, task)),
                       data_cache=str(data_cache_dir(run_dir)),
                       checkpoint_dir=str(checkpoint_dir(run_dir, variant))).to_env(),
            "TMPDIR": str(temp_dir(run_dir))}
