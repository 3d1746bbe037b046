"""`python -m bench.launch.supervisor`: start, watch and tear down one local cluster variant.

Runs inside the cluster's private network namespace (or on the host network when the scenario
asks). It starts every task with its own TF_CONFIG, forwards the chief's progress, and ends the
cluster as soon as anything goes wrong: a task that exits or fails is reported by name, a task
that hangs is caught by the budget (TensorFlow waits forever for a peer that never joins).
Tasks stay in the supervisor's process group and die with it, so the parent's kill of that
group is a last resort that always works.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench import entrypoints, protocol, results
from bench.launch import recovery
from bench.launch.cluster_plan import Task, chief_of, cluster_spec, plan_tasks
from bench.launch.gate_relay import GateRelay
from bench.launch.local import checkpoint_dir, trace_dir, worker_command, worker_env
from bench.launch.netns import bring_loopback_up, free_port
from bench.launch.process import WorkerProcess, last_error_line
from bench.perf import overhead
from bench.placement import detected_inventory, plan_for_task, plan_variant
from bench.protocol import ProgressFn
from bench.records import base_record, finish
from bench.scenario.schema import Variant

PORT_CONFLICT_MARKERS = ("Address already in use", "Could not start gRPC server")
POLL_S = 0.05


class _Restart(Exception):
    """A failure a fresh cluster (new processes, new ports) is unlikely to meet again."""

    def final_reason(self, attempts: int) -> str:
        raise NotImplementedError


class _PortConflict(_Restart):
    """A server lost the race for its port: start the whole cluster again on new ports."""

    def final_reason(self, attempts: int) -> str:
        return f"{self}: port taken on {attempts} attempts"


class _NativeCrash(_Restart):
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
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


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
                 injector: recovery.FaultInjector | None = None) -> None:
        self.variant = variant
        self.relay = relay
        self.tasks = plan_tasks(variant)
        self.chief = chief_of(self.tasks)
        self.logs = logs
        self.addresses = [f"127.0.0.1:{p}" for p in _distinct_ports(len(self.tasks))]
        self.spec = cluster_spec(self.tasks, self.addresses)
        plans = plan_variant(variant, detected_inventory(), self.addresses)
        self.procs: dict[Task, WorkerProcess] = {}
        self.records: dict[Task, dict[str, Any]] = {}
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
        env = worker_env({**plan_for_task(self.plans, task).env, "BENCH_RUN_DIR": str(run_dir),
                          "BENCH_TRACE_DIR": str(trace_dir(run_dir, variant, task.name)),
                          protocol.CHECKPOINT_DIR_ENV: str(checkpoint_dir(run_dir, variant)),
                          **self.relay.task_env(task), **self._fault_env(task)})
        return WorkerProcess(cmd, env, self.log_path(task), self._progress_fn(task),
                             new_session=False,
                             on_gate=self.relay.on_gate(task) if task.trains else None)

    def _fault_env(self, task: Task) -> dict[str, str]:
        if self.variant.fault is None:
            return {}
        return {protocol.EVENTS_ENV: str(self.events_path(task, self.attempt)),
                protocol.BACKUP_ENV: str(self.logs / f"{self.variant.id}.backup")}

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
        for proc in self.procs.values():
            proc.close()

    def _raise_on_port_conflict(self, task: Task, text: str) -> None:
        if any(marker in text for marker in PORT_CONFLICT_MARKERS):
            raise _PortConflict(f"{task.name} could not listen on "
                                f"{self.addresses[self.tasks.index(task)]}")

    def _exit_problem(self, task: Task, code: int) -> str:
        log = self.log_path(task)
        self._raise_on_port_conflict(task, log.read_text(errors="replace") if log.exists() else "")
        cause = last_error_line(log, errors_only=code < 0) or ("" if code < 0 else "no output")
        problem = f"{task.name} (pid {self.procs[task].popen.pid}) {_describe_exit(code)}" + (
            f": {cause}" if cause else "")
        if code < 0 and -code in NATIVE_CRASHES:
            raise _NativeCrash(problem)
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
            except _Restart as restart:
                if not injected:
                    raise
                outcome = "failed", str(restart)
            if outcome is not None:
                return ("faulted", outcome[1]) if injected and outcome[0] == "failed" else outcome
            time.sleep(POLL_S)
        waiting = [t.name for t in self.tasks if t.trains and t not in self.records]
        return "failed", (f"timed out after {self.variant.measure.timeout_s:g} s "
                          f"(measure.timeout_s) waiting for {', '.join(waiting)}")

    def _check(self) -> tuple[str, str | None] | None:
        """The cluster's outcome once there is one, else None."""
        for task, proc in self.procs.items():  # exits first: they are the root causes
            code = proc.popen.poll()
            if code is None or task in self.records:
                continue
            if task.trains and code == 0 and self.record_path(task).exists():
                self.records[task] = results.read_json(self.record_path(task))
                self.record_path(task).unlink()  # merged into the variant's record
            elif (skipped := self._chief_skipped()) is not None:
                return "skipped", skipped  # the chief knew why first: a peer's crash follows
            else:
                return "failed", self._exit_problem(task, code)
        for task, rec in self.records.items():
            if rec["status"] == "failed":
                self._raise_on_port_conflict(task, str(rec["reason"]))
                self.failure_error = {**(rec.get("error") or {}), "task": task.name}
                return "failed", f"{task.name}: {rec['reason']}"
        chief_record = self.records.get(self.chief)
        if chief_record and chief_record["status"] == "skipped":
            return "skipped", chief_record["reason"]
        if all(t in self.records for t in self.tasks if t.trains):
            return "ok", None
        return None

    def _chief_skipped(self) -> str | None:
        """The chief's skip reason when it has written a skipped record (a known limitation, e.g.
        XLA collectives on CPU, after which a peer may crash in native code), else None."""
        path = self.record_path(self.chief)
        record = results.read_json(path) if path.exists() else None
        if record and record.get("status") == "skipped":
            self.records[self.chief] = record
            return str(record["reason"])
        return None

    def task_summaries(self) -> list[dict[str, Any]]:
        out = []
        for task, address in zip(self.tasks, self.addresses, strict=True):
            rec = self.records.get(task, {})
            summary: dict[str, Any] = {
                "task": task.name, "type": task.type, "index": task.index, "address": address,
                "trains": task.trains, "pid": self.procs[task].popen.pid,
                "exit_code": self.procs[task].popen.returncode,
                "log": str(self.log_path(task)), **self.stats.get(task, {}),
            }
            if rec.get("status") == "ok":
                summary.update(status="ok", step_time=rec["step_time"],
                               throughput=rec["throughput"], peak_rss_mb=rec.get("peak_rss_mb"))
            elif rec:
                summary.update(status=rec["status"], reason=rec.get("reason"))
            out.append(summary)
        return out


def supervise(variant: Variant, variants_path: Path, logs: Path, network: str,
              attempts: int = 3) -> dict[str, Any]:
    if variant.fault is not None:
        return supervise_fault(variant, variants_path, logs, network)
    deadline = time.monotonic() + variant.measure.timeout_s
    crashes: list[str] = []
    restarts: list[str] = []
    relay = GateRelay(os.environ.get(protocol.GATE_ENV) or None, logs, variant.id)
    try:
        for attempt in range(1, attempts + 1):
            relay.reset()
            cluster = Cluster(variant, variants_path, logs, relay)
            try:
                status, reason = cluster.watch(deadline)
            except _Restart as restart:
                cluster.close()
                restarts.append(str(restart))
                if isinstance(restart, _NativeCrash):
                    crashes.append(str(restart))
                if attempt == attempts:
                    return finish(base_record(variant), "failed",
                                  reason=restart.final_reason(attempts))
                continue
            cluster.close()
            break
    finally:
        relay.close()
    record = _variant_record(variant, cluster, status, reason, network, attempt)
    record["cluster"].update(native_crashes=crashes, restarts=restarts)
    if crashes:
        record["notes"] = [*(record.get("notes") or []),
                           f"cluster restarted after a native crash: {'; '.join(crashes)}"]
    return record


def _variant_record(variant: Variant, cluster: Cluster, status: str, reason: str | None,
                    network: str, attempts: int) -> dict[str, Any]:
    """The chief's record (or a failed one saying why), with the cluster's own section."""
    record = dict(cluster.records.get(cluster.chief) or base_record(variant))
    if status != "ok" or record.get("status") != status:
        error = None
        if status == "failed":
            error = cluster.failure_error or {"type": "ClusterFailure", "message": reason}
        record = finish(record if status == "skipped" else base_record(variant), status,
                        reason=reason, error=error)
    record["cluster"] = {"network": network, "spec": cluster.spec, "attempts": attempts,
                         "chief": cluster.chief.name, "tasks": cluster.task_summaries(),
                         "native_crashes": [], "restarts": []}
    return record


def supervise_fault(variant: Variant, variants_path: Path, logs: Path,
                    network: str) -> dict[str, Any]:
    """A `[fault]` variant: run the cluster, kill the target task at its step, recover as a job
    controller would (bench.launch.recovery), and record the timeline. Never interleaved: the
    recovery is what is measured. A recovery that does not finish within the budget is a
    failed record with the timeline so far."""
    assert variant.fault is not None
    deadline = time.monotonic() + variant.measure.timeout_s
    kind, index = variant.fault.kill.task.split(":")
    at_step = variant.fault.kill.step_of(variant.total_steps)
    target = Task(kind, int(index), variant.strategy == "multi_worker_mirrored")
    relay = GateRelay(None, logs, variant.id)
    chief = chief_of(plan_tasks(variant))
    injector = recovery.FaultInjector(variant.fault, at_step, target.name,
                                      target.name if target.trains else chief.name)
    clusters: list[Cluster] = []
    restarted_at = detected_at = None
    try:
        clusters.append(Cluster(variant, variants_path, logs, relay, 1, injector))
        status, reason = clusters[-1].watch(deadline)
        if status == "ok" and injector.injected_at is None:
            status, reason = "failed", (f"the fault was never injected: {injector.target} "
                                        f"finished before reporting step {at_step}")
        elif status == "ok":
            status, reason = "failed", (f"{injector.target} survived {variant.fault.signal} "
                                        "and the run ended before it was lost")
        elif status == "faulted":
            detected_at = time.time()
            if variant.strategy == "parameter_server":  # the coordinator goes on
                restarted_at = time.time()
                clusters[-1].restart(injector.target)
            else:  # the whole cluster again, from the last backup
                chief = clusters[-1].chief
                recovery.await_detection(clusters[-1].events_path(chief, 1),
                                         clusters[-1].procs[chief].popen, deadline)
                clusters[-1].close()
                relay.reset()
                restarted_at = time.time()
                clusters.append(Cluster(variant, variants_path, logs, relay, 2, injector))
            status, reason = clusters[-1].watch(deadline)
    except _Restart as restart:  # no retries here: the restart is the measurement
        status, reason = "failed", str(restart)
    finally:
        for cluster in clusters:
            cluster.close()
        relay.close()
    events = {c.attempt: {t.name: recovery.read_events(c.events_path(t, c.attempt))
                          for t in c.tasks} for c in clusters}
    recovered = recovery.timeline(
        fault=variant.fault, at_step=at_step, injector=injector,
        warmup=variant.measure.warmup_steps, chief=clusters[-1].chief.name, events=events,
        restarted_at=restarted_at, detected_by_supervisor=detected_at,
        strategy=variant.strategy)
    if status == "ok" and (incomplete := recovery.complete(recovered, variant.strategy)):
        status, reason = "failed", incomplete
    record = _variant_record(variant, clusters[-1], status, reason, network, len(clusters))
    record["recovery"] = recovered
    record["notes"] = [*(record.get("notes") or []), *recovered["notes"]]
    for backup in logs.glob(f"{variant.id}.backup*"):  # the chief's and the workers' temporary
        shutil.rmtree(backup, ignore_errors=True)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.launch.supervisor", description=__doc__)
    parser.add_argument("--variants", required=True, type=Path)
    parser.add_argument("--id", required=True)
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--network", choices=["isolated", "host"], required=True)
    args = parser.parse_args(argv)
    if args.network == "isolated":
        bring_loopback_up()
    match = [v for v in results.read_json(args.variants) if v["id"] == args.id]
    variant = Variant.model_validate(match[0])
    record = supervise(variant, args.variants, args.record.parent, args.network)
    results.write_json(args.record, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
