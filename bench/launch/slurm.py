"""Run variants as Slurm jobs: `bench run --launcher slurm` and `bench cluster sbatch`.

One batch script serves both: bench either submits it itself (then watches the job under the
variant's budget and gathers the chief's record from the shared filesystem, as real clusters
have one) or prints it for users who submit themselves. Every task of a cluster variant runs
`bench worker ... --resolver slurm`, and TensorFlow's SlurmClusterResolver turns the job's SLURM_*
variables into the cluster, in the roles `plan_tasks` gives (chief, workers, parameter servers).
A single-process variant is a one-task job running the same worker as a local run.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench import entrypoints
from bench.errors import BenchError
from bench.launch.cluster_plan import plan_tasks
from bench.launch.handback import no_record, take_record, timed_out
from bench.launch.local import record_path_of, run_paths_env, worker_command
from bench.launch.process import last_error_line
from bench.placement import flavour_env, gpus_per_process
from bench.protocol import ProgressFn
from bench.record.cluster import Launch
from bench.record.model import VariantRecord
from bench.results import LOGS_DIR, VARIANTS_FILE
from bench.scenario.environment import interpreter
from bench.scenario.schema import Variant

SLURM_MARGIN_S = 60.0  # beyond the variant's budget in the job's --time (Slurm counts minutes)
WATCH_MARGIN_S = 20.0  # beyond the budget before bench cancels: srun start-up, TF teardown
STRAGGLER_WAIT_S = 60  # srun --wait: how long other tasks may outlive the first one to end
QUEUE_LIMIT_S = 3600.0  # a job pending longer than this is cancelled and recorded as failed
POLL_S = 1.0
SLURM_COMMANDS = ("sbatch", "squeue", "scancel", "sinfo", "scontrol")
_PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "SUSPENDED"}
_JOB_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    extra_args: tuple[str, ...] = ()  # more `#SBATCH` options, e.g. "--gres=gpu:8"


def slurm_problem(options: SlurmOptions) -> str | None:
    """Why bench cannot submit jobs here (commands missing, controller down, unknown
    partition), as one line naming the option; None when it can."""
    for name in SLURM_COMMANDS:
        if shutil.which(name) is None:
            return (f"--launcher slurm: '{name}' is not on PATH (Slurm's client commands are "
                    "needed on this host, e.g. Debian's slurm-client)")
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "--launcher slurm: sinfo did not answer within 30 s (is slurmctld reachable?)"
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return f"--launcher slurm: sinfo failed: {tail}"
    partitions = sorted(set(out.stdout.split()))
    if options.partition is not None and options.partition not in partitions:
        return (f"--partition: Slurm has no partition '{options.partition}' "
                f"(have: {', '.join(partitions) or 'none'})")
    return None


def task_count(variant: Variant) -> int:
    return len(plan_tasks(variant)) if variant.is_cluster else 1


def gpus_per_task(variant: Variant) -> int:
    """GPUs to ask Slurm for, per task, when the scenario demands GPUs (`devices = "gpu"`).

    Slurm, not bench, chooses a job's GPUs and sets CUDA_VISIBLE_DEVICES in each task, and it
    asks the same of every task: a ParameterServer job asks one per task, and its chief and ps
    tasks hide theirs (bench worker). With `devices = "auto"` nothing is requested: pass
    --sbatch-arg=--gres=... where the nodes need it.
    """
    if variant.devices != "gpu":
        return 0
    if not variant.is_cluster:
        return gpus_per_process(variant)
    return max(gpus_per_process(variant, task) for task in plan_tasks(variant))


def batch_script(variant: Variant, worker_args: list[str], output: str, options: SlurmOptions,
                 env: dict[str, str] | None = None) -> str:
    """The sbatch script that runs every task of `variant` with `worker_args`."""
    tasks = task_count(variant)
    minutes = math.ceil((variant.measure.timeout_s + SLURM_MARGIN_S) / 60)
    lines = ["#!/bin/bash",
             f"# bench variant {variant.id} ({variant.scenario_name}): {tasks} task(s)",
             f"#SBATCH --job-name={job_name(variant)}",
             f"#SBATCH --ntasks={tasks}",
             f"#SBATCH --time={minutes}",
             f"#SBATCH --output={output}"]
    if options.partition:
        lines.append(f"#SBATCH --partition={options.partition}")
    if gpus := gpus_per_task(variant):
        lines.append(f"#SBATCH --gpus-per-task={gpus}")
    lines += [f"#SBATCH {arg}" for arg in options.extra_args]
    lines.append("")
    lines += [f"export {key}={shlex.quote(value)}" for key, value in (env or {}).items()]
    srun = ["srun", f"--ntasks={tasks}", "--kill-on-bad-exit=1", f"--wait={STRAGGLER_WAIT_S}"]
    lines.append(shlex.join(srun + worker_args))
    return "\n".join(lines) + "\n"


def job_name(variant: Variant) -> str:
    return _JOB_NAME.sub("-", f"bench-{variant.id}")[:100]


def cluster_worker_args(variants_or_scenario: Path, variant: Variant, *,
                        record: Path | None = None, results_dir: str | None = None) -> list[str]:
    """`bench worker` for every task of a cluster variant, resolving the cluster from Slurm."""
    args = entrypoints.command(entrypoints.CLI, "worker", str(variants_or_scenario),
                               "--variant", variant.id, "--resolver", "slurm",
                               python=interpreter(variant.environment))
    if record is not None:
        args += ["--record", str(record)]
    if results_dir is not None:
        args += ["--results-dir", results_dir]
    return args


class SlurmJob:
    """A submitted job, watched through squeue and cancelled by its id."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.last_state: str | None = None

    @classmethod
    def submit(cls, script: Path) -> SlurmJob:
        out = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
            raise BenchError(f"sbatch refused {script}: {tail}")
        return cls(out.stdout.strip().split(";")[0])

    def state(self) -> str | None:
        """PENDING, RUNNING, ... or None once squeue no longer lists the job."""
        out = subprocess.run(["squeue", "-h", "-j", self.job_id, "-o", "%T"],
                             capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        state = out.stdout.strip() if out.returncode == 0 else ""
        if state:
            self.last_state = state
        return state or None

    def cancel(self, wait_s: float = 60.0) -> None:
        """Cancel the job and wait until Slurm has ended its tasks (it lists the job as
        COMPLETING meanwhile), so the next variant never shares the nodes with this one's
        teardown."""
        subprocess.run(["scancel", self.job_id], capture_output=True, timeout=30,
                       stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + wait_s
        while self.state() is not None and time.monotonic() < deadline:
            time.sleep(POLL_S / 4)

    def final_state(self) -> str:
        """The job's end as scontrol still remembers it (JobState, ExitCode), else the last
        state squeue showed."""
        out = subprocess.run(["scontrol", "-o", "show", "job", self.job_id], capture_output=True,
                             text=True, timeout=30, stdin=subprocess.DEVNULL)
        fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
        if "JobState" in fields:
            return f"{fields['JobState']} (exit code {fields.get('ExitCode', '?')})"
        return self.last_state or "unknown"


class SlurmLauncher:
    """Submits each variant as a job, waits for the chief's record under the variant's budget
    (counted from when the job starts running, not while it queues), and cancels the job when
    the record is in, the budget is spent, or the run is interrupted."""

    def __init__(self, options: SlurmOptions) -> None:
        self.options = options

    def run(self, variant: Variant, run_dir: Path, progress: ProgressFn | None = None
            ) -> VariantRecord:
        logs = run_dir / LOGS_DIR
        record_path = record_path_of(run_dir, variant)
        output = logs / f"{variant.id}.slurm.log"
        if variant.is_cluster:
            args = cluster_worker_args(run_dir / VARIANTS_FILE, variant, record=record_path)
        else:
            args = worker_command(run_dir, variant, record_path)
        # not variant_env: Slurm, not this host's inventory, gives the job its GPUs
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
               **run_paths_env(run_dir, variant), **flavour_env(variant)}
        script = logs / f"{variant.id}.sbatch"
        script.write_text(batch_script(variant, args, str(output), self.options, env))
        job = SlurmJob.submit(script)
        started = time.monotonic()
        try:
            ending, running_s, queued_s = self._wait(job, record_path, variant.measure.timeout_s)
        finally:
            if job.state() is not None:  # also on Ctrl-C: never leave a job behind
                job.cancel()
        launch = Launch(launcher="slurm", job_id=job.job_id, partition=self.options.partition,
                        script=str(script), output=str(output), queued_s=queued_s,
                        job_s=time.monotonic() - started)
        if (record := take_record(record_path)) is not None:
            record.wall_s = running_s
        else:
            record = no_record(variant, output, self._reason(ending, job, variant, output),
                               {"timeout": "Timeout", "queued": "QueueTimeout"}.get(
                                   ending, "SlurmJobFailed"))
        return record.add(launch=launch)

    @staticmethod
    def _wait(job: SlurmJob, record_path: Path, budget_s: float) -> tuple[str, float, float]:
        """Poll until the record appears or the job ends, times out or queues too long:
        (how it ended, seconds running, seconds queued)."""
        running_s = queued_s = 0.0
        last = time.monotonic()
        while True:
            if record_path.exists():
                return "record", running_s, queued_s
            state = job.state()
            now = time.monotonic()
            elapsed, last = now - last, now
            if state is None:
                return ("record" if record_path.exists() else "ended"), running_s, queued_s
            if state in _PENDING:
                queued_s += elapsed
                if queued_s > QUEUE_LIMIT_S:
                    return "queued", running_s, queued_s
            else:
                running_s += elapsed
                if running_s > budget_s + WATCH_MARGIN_S:
                    return "timeout", running_s, queued_s
            time.sleep(POLL_S)

    @staticmethod
    def _reason(ending: str, job: SlurmJob, variant: Variant, output: Path) -> str:
        if ending == "timeout":
            return timed_out(variant.measure.timeout_s, f" in Slurm job {job.job_id}; job "
                                                       "cancelled")
        if ending == "queued":
            return f"Slurm job {job.job_id} was still pending after {QUEUE_LIMIT_S:g} s; cancelled"
        cause = last_error_line(output) or "no output"
        return (f"Slurm job {job.job_id} ended without a record ({job.final_state()}): {cause}")
