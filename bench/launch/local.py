"""Launch a single-process variant: one `python -m bench.worker` child per variant.

Multi-process strategies (MultiWorkerMirrored, ParameterServer) will start several children with
TF_CONFIG through a cluster launcher implementing the same `run` signature.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from bench import entrypoints
from bench.fingerprint import HOST_GPUS_ENV
from bench.launch.forkserver import ForkServer, ForkServers
from bench.launch.process import Outcome, WorkerProcess, last_error_line
from bench.placement import (
    detected_inventory,
    host_gpus,
    needs_fresh_interpreter,
    plan_variant,
)
from bench.protocol import CHECKPOINT_DIR_ENV, ProgressFn
from bench.records import failed
from bench.results import VARIANTS_FILE, read_json
from bench.scenario.environment import interpreter
from bench.scenario.schema import Variant


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env["BENCH_SPAWN_TIME"] = repr(time.time())
    env.setdefault(HOST_GPUS_ENV, json.dumps(list(host_gpus())))
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


def run_worker_command(variant: Variant, run_dir: Path, cmd: list[str], record_path: Path,
                       budget_s: float, progress: ProgressFn | None,
                       extra_env: dict[str, str] | None = None,
                       forkserver: ForkServer | None = None) -> dict[str, Any]:
    """Run one child under a wall-clock budget; return the record it wrote, or a failed one."""
    log_path = run_dir / "logs" / f"{variant.id}.log"
    with WorkerProcess(cmd, worker_env(extra_env), log_path, progress,
                       forkserver=forkserver) as proc:
        outcome = proc.wait(budget_s)
    record = collect_record(variant, record_path, log_path, outcome, budget_s)
    record["launch"] = {"start_method": proc.start_method, "fork_problem": proc.fork_problem}
    return record


def collect_record(variant: Variant, record_path: Path, log_path: Path, outcome: Outcome,
             budget_s: float) -> dict[str, Any]:
    """The record the child wrote, or a failed one saying why there is none."""
    if record_path.exists():
        record: dict[str, Any] = read_json(record_path)
        record_path.unlink()
        record["wall_s"] = outcome.duration_s
        return record
    if outcome.timed_out:
        return failed(variant, f"timed out after {budget_s:g} s (measure.timeout_s); "
                               "worker process group killed",
                      type="Timeout", message=last_error_line(log_path), log=str(log_path))
    cause = last_error_line(log_path) or "no output"
    return failed(variant, f"worker exited with code {outcome.returncode} without a record: "
                           f"{cause}", type="WorkerCrash", message=cause, log=str(log_path),
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
            ) -> dict[str, Any]:
        record_path = record_path_of(run_dir, variant)
        return run_worker_command(variant, run_dir, worker_command(run_dir, variant, record_path),
                                  record_path, variant.measure.timeout_s, progress,
                                  variant_env(run_dir, variant),
                                  forkserver_for(variant, self.forkservers))


def forkserver_for(variant: Variant, forkservers: ForkServers | None) -> ForkServer | None:
    """The fork server of the variant's environment, unless it needs a fresh interpreter
    (tf_keras: see bench.placement.needs_fresh_interpreter)."""
    if forkservers is None or needs_fresh_interpreter(variant):
        return None
    return forkservers.get(interpreter(variant.environment))


def record_path_of(run_dir: Path, variant: Variant) -> Path:
    """Where a single-process variant's worker writes its record before the runner takes it."""
    return run_dir / "logs" / f"{variant.id}.record.json"


def variant_env(run_dir: Path, variant: Variant) -> dict[str, str]:
    """What a single-process variant's worker is told beyond the common worker environment: its
    devices (bench.placement), where to trace, where shared data is cached."""
    (main,) = plan_variant(variant, detected_inventory())
    return {**main.env, **run_paths_env(run_dir, variant)}


def run_paths_env(run_dir: Path, variant: Variant) -> dict[str, str]:
    """Where a variant's worker traces, saves checkpoints and finds the run's shared data cache,
    and the run it belongs to (BENCH_RUN_DIR: how a test finds every process a run left behind)."""
    return {"BENCH_RUN_DIR": str(run_dir), "BENCH_TRACE_DIR": str(trace_dir(run_dir, variant)),
            "BENCH_DATA_CACHE": str(data_cache_dir(run_dir)),
            CHECKPOINT_DIR_ENV: str(checkpoint_dir(run_dir, variant))}
