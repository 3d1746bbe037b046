"""`python -m bench.launch.supervisor`: start, watch and tear down one local cluster variant.

Enters the cluster's private network namespace first thing (or stays on the host network when
the scenario asks). It starts every task with its own TF_CONFIG, forwards the chief's progress,
and ends the cluster as soon as anything goes wrong: a task that exits or fails is reported by
name, a task that hangs is caught by the budget (TensorFlow waits forever for a peer that never
joins). Every task dies with the supervisor (a new interpreter stays in its process group; a
forked task dies with its fork server, which dies with the supervisor), so the parent's kill of
the supervisor's group is a last resort that always works.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from bench import results
from bench.child_env import ChildEnv
from bench.errors import BenchError
from bench.launch import recovery_timeline
from bench.launch.cluster_plan import Task, chief_of, plan_tasks
from bench.launch.cluster_tasks import Cluster, NativeCrash, Restart
from bench.launch.fault_injector import FaultInjector, await_detection
from bench.launch.forkserver import ForkServer
from bench.launch.forkserver_main import fork_here
from bench.launch.gate_relay import GateRelay
from bench.launch.local import worker_env
from bench.launch.netns import enter_private_namespace
from bench.placement import flavour_env
from bench.protocol import read_events
from bench.record.cluster import Cluster as ClusterSection
from bench.record.cluster import Recovery
from bench.record.model import VariantRecord
from bench.scenario.schema import Variant
from bench.training import strategies


def task_forkserver(variant: Variant, logs: Path, run_dir: Path) -> ForkServer | None:
    """A fork server inside the cluster's network namespace that holds TensorFlow imported for
    every task (a task started as a new interpreter spends seconds importing it, all of them at
    once on the same cores). A supervisor forked from the run's fork server of its Keras flavour
    has it imported already, as its tasks need it, and forks the server from itself; one started
    as a new interpreter starts one that imports it (with the flavour `supervise` put in this
    process's environment). None for a [fault] variant (a restarted task is a new process, as it
    would be)."""
    if variant.fault is not None:
        return None
    log = logs / f"{variant.id}.forkserver.log"
    server = ForkServer(worker_env(), log, str(run_dir))
    if "tensorflow" in sys.modules:
        return server.adopt(*fork_here(log))
    return server.start()


def supervise(variant: Variant, variants_path: Path, logs: Path, network: str,
              attempts: int = 3) -> VariantRecord:
    """Run the variant's cluster, started again on new ports (up to `attempts` times) after a
    failure a fresh cluster is unlikely to meet again; its record."""
    # The variant's Keras flavour, whoever started this process: the fork server it makes for
    # the tasks imports TensorFlow with it (as a `bench worker` task takes it in launch.external)
    os.environ.update(flavour_env(variant))
    if variant.fault is not None:
        return supervise_fault(variant, variants_path, logs, network)
    if (known := strategies.known_skip(variant)) is not None:  # no cluster to start for it
        return VariantRecord.skipped(variant, known)
    deadline = time.monotonic() + variant.measure.timeout_s
    crashes: list[str] = []
    restarts: list[str] = []
    restart_s = 0.0
    # before the relay: a server forked from this process must be forked before any thread
    forkserver = task_forkserver(variant, logs, variants_path.parent)
    relay = GateRelay(ChildEnv.from_env().gate or None, logs, variant.id)
    try:
        for attempt in range(1, attempts + 1):
            relay.reset()
            started = time.monotonic()
            cluster = Cluster(variant, variants_path, logs, relay, forkserver=forkserver)
            try:
                status, reason = cluster.watch(deadline)
            except Restart as restart:
                cluster.close()
                restarts.append(str(restart))
                if isinstance(restart, NativeCrash):
                    crashes.append(str(restart))
                if attempt < attempts:
                    restart_s += time.monotonic() - started
                    continue
                # the last attempt's tasks, and every attempt's crash, stay in the record
                status, reason = "failed", restart.final_reason(attempts)
                cluster.failure_error = {"type": type(restart).__name__, "message": str(restart)}
                break
            cluster.close()
            break
    finally:
        relay.close()
        if forkserver is not None:
            forkserver.close()
    record = _variant_record(variant, cluster, status, reason, network, attempt)
    assert record.cluster is not None
    record.cluster.native_crashes, record.cluster.restarts = crashes, restarts
    record.cluster.restart_s = restart_s
    record.cluster.task_server = forkserver.start_method if forkserver is not None else None
    if crashes:
        record.notes = [*(record.notes or []),
                        f"cluster restarted after a native crash: {'; '.join(crashes)}"]
    return record


def _variant_record(variant: Variant, cluster: Cluster, status: str, reason: str | None,
                    network: str, attempts: int) -> VariantRecord:
    """The chief's record (or a failed one saying why), with the cluster's own section."""
    chief = cluster.records.get(cluster.chief)
    record = chief.model_copy() if chief is not None else VariantRecord.begin(variant)
    if status != "ok" or record.status != status:
        error = None
        if status == "failed":
            error = cluster.failure_error or {"type": "ClusterFailure", "message": reason}
        record = (record if status == "skipped" else VariantRecord.begin(variant)).finish(
            status, reason=reason, error=error)
    return record.add(cluster=ClusterSection(
        network=network, spec=cluster.spec, attempts=attempts, chief=cluster.chief.name,
        tasks=cluster.task_summaries(), native_crashes=[], restarts=[]))


def supervise_fault(variant: Variant, variants_path: Path, logs: Path,
                    network: str) -> VariantRecord:
    """A `[fault]` variant: run the cluster, kill the target task at its step, recover as a job
    controller would (bench.launch.recovery), and record the timeline. Never interleaved: the
    recovery is what is measured. A recovery that does not finish within the budget is a
    failed record with the timeline so far."""
    assert variant.fault is not None
    deadline = time.monotonic() + variant.measure.timeout_s
    kind, index = variant.fault.kill.task.split(":")
    at_step = variant.fault.kill.step_of(variant.total_steps)
    target = Task(kind, int(index), variant.kind.trains(kind))
    relay = GateRelay(None, logs, variant.id)
    chief = chief_of(plan_tasks(variant))
    injector = FaultInjector(variant.fault, at_step, target.name,
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
            if variant.kind.recovers_by == "task":  # the coordinator goes on
                restarted_at = time.time()
                clusters[-1].restart(injector.target)
            else:  # the whole cluster again, from the last backup
                chief = clusters[-1].chief
                await_detection(clusters[-1].events_path(chief, 1),
                                clusters[-1].procs[chief].popen, deadline)
                clusters[-1].close()
                relay.reset()
                restarted_at = time.time()
                clusters.append(Cluster(variant, variants_path, logs, relay, 2, injector))
            status, reason = clusters[-1].watch(deadline)
    except Restart as restart:  # no retries here: the restart is the measurement
        status, reason = "failed", str(restart)
    finally:
        for cluster in clusters:
            cluster.close()
        relay.close()
    events = {c.attempt: {t.name: read_events(c.events_path(t, c.attempt))
                          for t in c.tasks} for c in clusters}
    recovered = recovery_timeline.timeline(
        fault=variant.fault, at_step=at_step, injector=injector,
        warmup=variant.measure.warmup_steps, chief=clusters[-1].chief.name, events=events,
        restarted_at=restarted_at, detected_by_supervisor=detected_at,
        strategy=variant.strategy)
    if status == "ok" and (incomplete := recovery_timeline.complete(recovered, variant.strategy)):
        status, reason = "failed", incomplete
    record = _variant_record(variant, clusters[-1], status, reason, network, len(clusters))
    record.recovery = Recovery(**recovered)
    record.notes = [*(record.notes or []), *(record.recovery.notes or [])]
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
        try:
            enter_private_namespace()
        except OSError as exc:
            print(f"cannot enter a private network namespace: {exc}", file=sys.stderr)
            return 1
    try:
        variant = results.variant_by_id(results.read_json(args.variants), args.id, args.variants)
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    supervise(variant, args.variants, args.record.parent, args.network).write(args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
