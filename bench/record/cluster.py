"""The record's sections that launchers and the runner add: how the process was launched, the
local or external cluster, the recovery of a `[fault]` variant, the interleaved batch, and the
error of a failed variant."""

from __future__ import annotations

from typing import Any

from bench.record.measured import StepTime, Throughput
from bench.record.profiled import TraceAnalysis
from bench.record.section import Number, Section, field


class RecordError(Section):
    """Why a variant failed: the error's type, its one-line message and the traceback's end."""

    type: str | None = field("the exception's class, or Timeout, WorkerCrash, ClusterFailure, ...")
    message: str | None = field("the line that says what happened")
    traceback: str | None = field("the traceback's end")
    log: str | None = field("the log that holds the rest")
    returncode: int | None = field("a crashed process's exit code")
    task: str | None = field("the cluster task that failed")


class ClusterTask(Section):
    """One task of a local cluster, as the supervisor saw it."""

    task: str | None = field("its name, e.g. `worker-1`")
    type: str | None = field("chief, worker or ps")
    index: int | None = field("its index")
    address: str | None = field("host:port it listened on")
    trains: bool | None = field("it ran the bench worker (measured)")
    pid: int | None = field("its pid")
    exit_code: int | None = field("its exit code (null: still running when the cluster ended)")
    log: str | None = field("its log")
    start_method: str | None = field("`forkserver` (forked from the cluster's fork server) or "
                                     "`spawn` (a new interpreter)")
    cpu_s: Number | None = field("its CPU seconds")
    peak_rss_mb: Number | None = field("its peak resident memory")
    threads: int | None = field("its OS threads when it wrote its record")
    status: str | None = field("its own record's status")
    reason: str | None = field("its own record's reason")
    step_time: StepTime | None = field("its step statistics")
    throughput: Throughput | None = field("its throughput")
    trace_analysis: TraceAnalysis | None = field("its trace's analysis")


class Cluster(Section):
    """A cluster variant's processes: bench's local cluster, or an external one (`bench worker`)."""

    network: str | None = field("`isolated`, `host`, or `external` (a cluster manager's)")
    spec: dict[str, list[str]] | None = field("the cluster spec: addresses by job")
    attempts: int | None = field("clusters started (a restart is a new one)")
    chief: str | None = field("the task that wrote the record (`this task` for `bench worker`)")
    resolver: str | None = field("`bench worker`: how the cluster was found (tf_config, slurm)")
    tasks: list[ClusterTask] | None = field("every task of the local cluster")
    task_server: str | None = field(
        "how the fork server of its tasks started: `fork` (forked from a supervisor that had "
        "TensorFlow imported), `spawn` (a new interpreter that imports it); null: none")
    native_crashes: list[str] | None = field("native crashes that restarted the cluster")
    restarts: list[str] | None = field("every restart and why")
    restart_s: Number | None = field("seconds the attempts before the last took, each from its "
                                     "start to its cluster's close")


class RecoveryStep(Section):
    attempt: int | None = field("the cluster attempt")
    step: int | None = field("the step")
    t: Number | None = field("its end (Unix time)")
    dt: Number | None = field("its time")
    loss: Number | None = field("its training loss")


class InjectedFault(Section):
    """The fault as it was injected."""

    task: str | None = field("the task killed, e.g. `worker:1`")
    signal: str | None = field("the signal sent")
    at_step: int | None = field("the step it was due at")
    sigkill_after_s: Number | None = field("SIGKILL this long after a SIGTERM it survived")
    injected_at_step: int | None = field("the step the task had reported when it was sent")
    backup_every: int | None = field("steps between backups")
    pid: int | None = field("the task's pid")


class Continuity(Section):
    """Does training go on from the backup, not from scratch? (ParameterServer restores
    nothing: its training loss after the fault against the run's first and last blocks.)"""

    continues: bool | None = field("the loss after the restore is nearer the backup's than the "
                                   "start's")
    restored_exactly: bool | None = field("the restore gave back the backup's probe loss")
    reason: str | None = field("why there was nothing to restore")
    probe_loss_step0: Number | None = field("the fixed probe batch's loss before any step")
    probe_loss_at_backup: Number | None = field("its loss at the backup restored")
    probe_loss_after_restore: Number | None = field("its loss right after the restore")
    train_loss_step1: Number | None = field("the training loss of step 1")
    train_loss_at_backup: Number | None = field("the training loss at the backup's step")
    train_loss_first_after_restore: Number | None = field(
        "the training loss of the first step after the restore")
    train_loss_first_block: Number | None = field("ParameterServer: the first block's loss")
    train_loss_before_fault: Number | None = field(
        "ParameterServer: the last block's loss before the fault")
    train_loss_first_after_fault: Number | None = field(
        "ParameterServer: the first block's loss after it")


class Recovery(Section):
    """A `[fault]` variant's recovery, from the tasks' events and the supervisor's own times."""

    fault: InjectedFault | None = field("the fault as it was injected")
    detected_by: str | None = field("who saw the loss first: chief or supervisor")
    chief_error: dict[str, Any] | None = field("the chief's error")
    timeline: dict[str, Number | None] | None = field("each phase's time (Unix time)")
    timeline_s: dict[str, Number | None] | None = field("each phase, seconds after the fault")
    time_to_recover_s: Number | None = field("the fault to the first step after the restore")
    time_to_speed_s: Number | None = field("the fault to steps back at the pre-fault speed")
    pre_fault_median_s: Number | None = field("median step before the fault")
    post_fault_median_s: Number | None = field("median step after it")
    last_step_before_fault: int | None = field("the last step done before it")
    last_backup_before_fault: int | None = field("the last backup before it")
    restored_step: int | None = field("the step training resumed from")
    steps_redone: int | None = field("steps trained twice")
    continuity: Continuity | None = field("does training go on from the backup")
    series: list[RecoveryStep] | None = field("every step across the fault")
    notes: list[str] | None = field("what else happened")


class Launch(Section):
    """How the variant's process started."""

    start_method: str | None = field("`forkserver` or `spawn`")
    fork_problem: str | None = field("why it was not forked")
    launcher: str | None = field("`slurm` for a Slurm job")
    job_id: str | None = field("the Slurm job")
    partition: str | None = field("its partition")
    script: str | None = field("its batch script")
    output: str | None = field("its output file")
    queued_s: Number | None = field("time pending")
    job_s: Number | None = field("time from submission to its end")


class Interleave(Section):
    """The batch of live variants whose windows took turns with this one's."""

    batch: list[str] | None = field("the variants of the batch")
    rounds: int | None = field("rounds played")
    positions: list[int] | None = field("this variant's place in each round")
