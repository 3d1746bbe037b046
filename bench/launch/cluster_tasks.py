"""The processes of one attempt at a local cluster: every task started with its own TF_CONFIG,
watched until each training task has written its record or one of them fails.

A failure is named by task: a task that exits, crashes or fails its variant. Two failures are
worth a fresh attempt on new ports (`Restart`): a server that lost the race for its port, and a
native crash of TensorFlow's collective runtime. `bench.launch.supervisor` decides what to do
with each attempt's outcome.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from bench import entrypoints, protocol
from bench.child_env import ChildEnv
from bench.launch.cluster_plan import Task, chief_of, cluster_spec, plan_tasks
from bench.launch.fault_injector import FaultInjector
from bench.launch.forkserver import ForkServer
from bench.launch.gate_relay import GateRelay
from bench.launch.handback import take_record, timed_out
from bench.launch.local import run_paths_env, worker_command, worker_env
from bench.launch.netns import free_port
from bench.launch.process import WorkerProcess, last_error_line
from bench.perf import overhead
from bench.placement import detected_inventory, plan_for_task, plan_variant
from bench.protocol import ProgressFn
from bench.record.cluster import ClusterTask
from bench.record.model import VariantRecord
from bench.scenario.schema import Variant

PORT_CONFLICT_MARKERS = ("Address already in use", "Could not start gRPC server")
POLL_S = 0.05


class Restart(Exception):
    """A failure a fresh cluster (new processes, new ports) is unlikely to meet again."""

    def final_reason(self, attempts: int) -> str:
        raise NotImplementedError


class PortConflict(Restart):
    """A server lost the race for its port: start the whole cluster again on new ports."""

    def final_reason(self, attempts: int) -> str:
        return f"{self}: port taken on {attempts} attempts"


class NativeCrash(Restart):
    """A task died of a native crash (SIGSEGV, SIGABRT, SIGBUS): start the cluster again.

    TensorFlow's collective runtime sometimes crashes a MultiWorkerMirrored worker soon after
    start-up on this busy host ("double free or corruption", SIGSEGV). Each restart is recorded
    in the variant's record; a crash that repeats on every attempt fails the variant as before.
    Deliberate kills (SIGKILL, SIGTERM) and Python errors are not retried.
    """

    def final_reason(self, attempts: int) -> str:
        return f"{self} (crashed on all {attempts} attempts)"


NATIVE_CRASHES = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS)


def _forward_progress(done: int, total: int) -> None:
    print(protocol.format_progress(done, total), flush=True)


def _distinct_ports(n: int) -> list[int]:
    ports: dict[int, None] = {}
    while len(ports) < n:
        ports[free_port()] = None
    return list(ports)


def _proc_stats(pid: int) -> dict[str, float]:
    """CPU seconds and peak RSS of a live task, read from /proc before it is torn down."""
    stats: dict[str, float] = {}
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        stats["cpu_s"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        pass
    if (peak := overhead.peak_rss_mb(pid)) is not None:
        stats["peak_rss_mb"] = peak
    return stats


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class Cluster:
    """The processes of one attempt at running the variant."""

    def __init__(self, variant: Variant, variants_path: Path, logs: Path,
                 relay: GateRelay, attempt: int = 1,
                 injector: FaultInjector | None = None,
                 forkserver: ForkServer | None = None) -> None:
        self.forkserver = forkserver  # tasks forked from it (their own groups) or new interpreters
        self.variant = variant
        self.relay = relay
        self.tasks = plan_tasks(variant)
        self.chief = chief_of(self.tasks)
        self.logs = logs
        self.addresses = [f"127.0.0.1:{p}" for p in _distinct_ports(len(self.tasks))]
        self.spec = cluster_spec(self.tasks, self.addresses)
        plans = plan_variant(variant, detected_inventory(), self.addresses)
        self.procs: dict[Task, WorkerProcess] = {}
        self.records: dict[Task, VariantRecord] = {}
        self.stats: dict[Task, dict[str, float]] = {}
        self.failure_error: dict[str, Any] | None = None  # the failing task's own error, if any
        self.attempt = attempt
        self.injector = injector
        self.run_dir = variants_path.parent
        self.plans = plans
        for task in self.tasks:
            self.record_path(task).unlink(missing_ok=True)  # an earlier attempt's
            self.procs[task] = self._start(task)

    def _start(self, task: Task) -> WorkerProcess:
        run_dir, variant = self.run_dir, self.variant
        cmd = (worker_command(run_dir, variant, self.record_path(task)) if task.trains
               else entrypoints.command(entrypoints.PS_SERVER))
        env = worker_env({**plan_for_task(self.plans, task).env,
                          **run_paths_env(run_dir, variant, task.name),
                          **self.relay.task_env(task), **self._fault_env(task),
                          **ChildEnv(held_after_record=task.trains).to_env()})
        # a forked task leads its own group and dies with the fork server; a new interpreter
        # stays in the supervisor's group and dies with it
        return WorkerProcess(cmd, env, self.log_path(task), self._progress_fn(task),
                             new_session=self.forkserver is not None, forkserver=self.forkserver,
                             on_gate=self.relay.on_gate(task) if task.trains else None,
                             dies_with_parent=True)

    def _fault_env(self, task: Task) -> dict[str, str]:
        if self.variant.fault is None:
            return {}
        return ChildEnv(fault_events=str(self.events_path(task, self.attempt)),
                        backup_dir=str(self.logs / f"{self.variant.id}.backup")).to_env()

    def _progress_fn(self, task: Task) -> ProgressFn | None:
        injector = self.injector
        if injector is None:
            return _forward_progress if task == self.chief else None

        def on_progress(done: int, total: int) -> None:
            injector.on_progress(task.name, done)
            if task == self.chief:
                _forward_progress(done, total)
        return on_progress

    def events_path(self, task: Task, attempt: int) -> Path:
        return self.logs / f"{self.variant.id}.{task.name}.a{attempt}.events.jsonl"

    def restart(self, name: str) -> None:
        """Start one task again, at its address (a lost parameter-server worker)."""
        task = next(t for t in self.tasks if t.name == name)
        self.procs[task].close()
        self.procs[task] = self._start(task)

    def log_path(self, task: Task) -> Path:
        return self.logs / f"{self.variant.id}.{task.name}.log"

    def record_path(self, task: Task) -> Path:
        return self.logs / f"{self.variant.id}.{task.name}.record.json"

    def close(self) -> None:
        for task, proc in self.procs.items():
            if proc.popen.poll() is None:
                self.stats[task] = _proc_stats(proc.popen.pid)
        WorkerProcess.close_all(list(self.procs.values()))

    def _raise_on_port_conflict(self, task: Task, text: str) -> None:
        if any(marker in text for marker in PORT_CONFLICT_MARKERS):
            raise PortConflict(f"{task.name} could not listen on "
                                f"{self.addresses[self.tasks.index(task)]}")

    def _exit_problem(self, task: Task, code: int) -> str:
        log = self.log_path(task)
        self._raise_on_port_conflict(task, log.read_text(errors="replace") if log.exists() else "")
        cause = last_error_line(log, errors_only=code < 0) or ("" if code < 0 else "no output")
        problem = f"{task.name} (pid {self.procs[task].popen.pid}) {_describe_exit(code)}" + (
            f": {cause}" if cause else "")
        if code < 0 and -code in NATIVE_CRASHES:
            raise NativeCrash(problem)
        return problem

    def watch(self, deadline: float) -> tuple[str, str | None]:
        """Poll until every training task has a record or something fails: (status, reason).
        Time spent waiting for the runner's interleaved rounds moves the deadline. With a
        fault injector, the fault is injected when due, and a failure after it is "faulted"."""
        injector = self.injector if self.injector and self.injector.injected_at is None else None
        while time.monotonic() < deadline + self.relay.waiting_s():
            self.relay.poll()
            injected = injector is not None and injector.poll(
                {t.name: p.popen.pid for t, p in self.procs.items()})
            try:
                outcome = self._check()
            except Restart as restart:
                if not injected:
                    raise
                outcome = "failed", str(restart)
            if outcome is not None:
                return ("faulted", outcome[1]) if injected and outcome[0] == "failed" else outcome
            self.relay.wait(POLL_S)
        waiting = ", ".join(t.name for t in self.tasks if t.trains and t not in self.records)
        where = protocol.last_release(self.relay.released)
        return "failed", timed_out(self.variant.measure.timeout_s, f" waiting for {waiting}{where}")

    def _check(self) -> tuple[str, str | None] | None:
        """The cluster's outcome once there is one, else None."""
        for task, proc in self.procs.items():  # exits first: they are the root causes
            if task in self.records:
                continue
            code = proc.popen.poll()
            if task.trains and (record := take_record(self.record_path(task))) is not None:
                # a task that wrote its record is done (written whole, by rename) and the record
                # is its own account, whatever its exit code: TensorFlow's teardown after a
                # peer's failure may end the process with 1 once the record says why. The
                # cluster ends once every task has one, without waiting for the shutdown
                # barrier; the records are merged into the variant's
                self.records[task] = record
            elif code is None:
                continue
            elif (skipped := self._chief_skipped()) is not None:
                return "skipped", skipped  # the chief knew why first: a peer's crash follows
            else:
                return "failed", self._exit_problem(task, code)
        for task, rec in self.records.items():
            if rec.status == "failed":
                self._raise_on_port_conflict(task, str(rec.reason))
                self.failure_error = {**(rec.error.to_json() if rec.error else {}),
                                      "task": task.name}
                return "failed", f"{task.name}: {rec.reason}"
        chief_record = self.records.get(self.chief)
        if chief_record and chief_record.status == "skipped":
            return "skipped", chief_record.reason
        if all(t in self.records for t in self.tasks if t.trains):
            return "ok", None
        return None

    def _chief_skipped(self) -> str | None:
        """The chief's skip reason when it has written a skipped record (a known limitation, e.g.
        XLA collectives on CPU, after which a peer may crash in native code), else None."""
        record = self.records.get(self.chief) or take_record(self.record_path(self.chief))
        if record is not None:
            self.records[self.chief] = record
        return str(record.reason) if record is not None and record.status == "skipped" else None

    def task_summaries(self) -> list[ClusterTask]:
        out = []
        for task, address in zip(self.tasks, self.addresses, strict=True):
            rec = self.records.get(task)
            summary = ClusterTask(
                task=task.name, type=task.type, index=task.index, address=address,
                trains=task.trains, pid=self.procs[task].popen.pid,
                start_method=self.procs[task].start_method,
                exit_code=self.procs[task].popen.returncode, log=str(self.log_path(task)),
                **self.stats.get(task, {}))
            if rec is not None and rec.ok:
                summary.status, summary.step_time = "ok", rec.step_time
                summary.throughput, summary.peak_rss_mb = rec.throughput, rec.peak_rss_mb
                summary.threads = rec.threads
            elif rec is not None:
                summary.status, summary.reason = rec.status, rec.reason
            out.append(summary)
        return out


