"""Interleaved timed windows: the runner's side of the gate (`bench.training.gate`).

A shared machine's speed drifts on a scale of seconds to minutes, so variants measured one after
another are confounded with time: whichever runs in a slow spell looks slow. Instead, the
variants of a batch all stay alive. They start, build and warm up side by side (one per core:
nothing is timed yet) and wait at their gates. Then the rounds: in each, every live variant runs its
next segment (a timed window; after the last window the traced window, then the unobserved
block) alone, while the others idle at their gates. The orders come in counterbalanced pairs: a
freshly shuffled order, then the same order reversed, so over each pair every variant's windows sit
at the same mean time and a drift that is steady across the pair lands on all alike. Last, they
finish (checks, their records) one per core. A slow spell now lands on every variant alike; this
is Google Benchmark's random interleaving and asv's interleaving across processes, applied to
whole training processes.

A variant's budget (`measure.timeout_s`) counts only its own running time, not its time at the
gate; past it, its process group is killed and the others go on. A cluster variant (MultiWorker,
ParameterServer) is one participant: its supervisor releases all its training tasks together.
"""

from __future__ import annotations

import os
import queue
import random
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv
from bench.launch import cluster
from bench.launch.forkserver import ForkServers
from bench.launch.local import (
    await_forkservers,
    forkserver_for,
    launched_record,
    record_path_of,
    variant_env,
    worker_command,
    worker_env,
)
from bench.launch.process import Outcome, WorkerProcess
from bench.protocol import FINISH, GO, ProgressFn, last_release
from bench.record.cluster import Interleave
from bench.record.model import MACHINE_CONTROLS, VariantRecord
from bench.results import LOGS_DIR
from bench.scenario.fields import PROCESS_BYTES
from bench.scenario.schema import Variant

POLL_S = 0.05
# What one live variant may hold, for choosing how many can be alive at once: host memory
# (bench.scenario.fields.PROCESS_BYTES says why) and, on a GPU host, device memory (each process
# has its own CUDA context and allocator).
HOST_BYTES_PER_LIVE = PROCESS_BYTES
GPU_BYTES_PER_LIVE = 2 << 30
MEMORY_SHARE = 0.6  # of what is free now: leave room for the rest of the machine
BUILD_PARALLELISM = 4  # variants that build and warm up at once (never more than the cores)
EXIT_GRACE_S = 30.0  # after its record is written, a worker has this long to leave
# Why a machine control was let go without its windows: it measures the machine for variants
# that are no longer there (measures_nothing).
NOTHING_TO_CALIBRATE = {
    "twin": "its baseline did not finish: without it there is no noise floor to state",
    "yardstick": "every variant it ran beside failed or was skipped: there is nothing to "
                 "measure the machine for"}


@dataclass
class LiveVariant:
    """One variant's worker process between its start and its record."""

    variant: Variant
    run_dir: Path
    proc: WorkerProcess
    fifo: Path
    announced: queue.Queue[tuple[str, int, float]]  # segment, index, when it was announced
    at: tuple[str, int] | None = None  # the segment it waits to run, while at the gate
    released: tuple[str, int] | None = None  # the segment it was last let go into
    active_s: float = 0.0  # running time so far, charged against measure.timeout_s
    timed_out: bool = False
    positions: list[int] = field(default_factory=list)  # its place in each round, from 0
    finish_released_at: float | None = None  # when it was let go to finish (time.monotonic)
    let_go: bool = False  # a machine control stopped at its gate (NOTHING_TO_CALIBRATE)
    _writer: int = -1

    def let_go_unmeasured(self) -> None:
        """End the worker where it waits: what it would measure is there for no variant."""
        self.let_go, self.at = True, None
        self.proc.kill()

    @property
    def budget_s(self) -> float:
        if self.variant.is_cluster:
            return cluster.budget_s(self.variant)
        return self.variant.measure.timeout_s

    def release(self) -> None:
        """Let the worker run the segment it announced."""
        self.released, self.at = self.at, None
        os.write(self._writer, GO)

    def run_to_gate(self, since: float | None = None) -> bool:
        """Wait while the worker runs, until it announces its next segment (True) or ends or
        overruns its budget (False); the running time (from `since`, when it was released
        together with others, else from now, until its announcement) is charged to its budget:
        a variant that reached its gate early, or ended (a skip), is not charged for the others
        it was built with."""
        started = time.monotonic() if since is None else since
        deadline = started + max(0.0, self.budget_s - self.active_s)
        ended: float | None = None
        try:
            while True:
                try:
                    segment, index, ended = self.announced.get(timeout=POLL_S)
                    self.at = (segment, index)
                    return True
                except queue.Empty:
                    pass
                if self.proc.popen.poll() is not None:
                    self.proc.join_output()
                    ended = self.proc.output_ended_at
                    return False
                if time.monotonic() > deadline:
                    self.timed_out = True
                    self.proc.kill()
                    return False
        finally:
            self.active_s += max(0.0, (ended or time.monotonic()) - started)

    def release_to_finish(self) -> None:
        """Let the worker run the rest of the variant (checks, its record), if it waits for it."""
        if self.at is not None and self.at[0] == FINISH:
            self.release()
            self.finish_released_at = time.monotonic()

    @property
    def finishing(self) -> bool:
        """Let go to finish and still running."""
        return self.finish_released_at is not None and self.proc.popen.poll() is None

    def finish(self, while_waiting: Callable[[], None] = lambda: None) -> VariantRecord:
        """Release the worker from its last gate (if it is at one) and take its record;
        `while_waiting` runs every POLL_S until the worker has ended."""
        if self.let_go:
            self.close()
            return VariantRecord.skipped(self.variant, NOTHING_TO_CALIBRATE[str(self.variant.control)])
        self.release_to_finish()
        remaining = max(0.0, self.budget_s - self.active_s)
        started = self.finish_released_at or time.monotonic()
        deadline = started + remaining + EXIT_GRACE_S
        while not self.timed_out and self.proc.popen.poll() is None:
            try:
                self.proc.popen.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:  # Popen and a forked child both raise it
                if time.monotonic() >= deadline:
                    self.timed_out = True
                while_waiting()
        self.active_s += time.monotonic() - started
        self.close()
        outcome = Outcome(None if self.timed_out else self.proc.popen.returncode, self.timed_out,
                          self.active_s)
        return launched_record(self.variant, self.proc,
                               record_path_of(self.run_dir, self.variant), outcome, self.budget_s,
                               where=last_release(self.released))

    def close(self) -> None:
        self.proc.close()
        if self._writer >= 0:
            os.close(self._writer)
            self._writer = -1
        self.fifo.unlink(missing_ok=True)


def start(variant: Variant, run_dir: Path, forkservers: ForkServers | None,
          progress: ProgressFn | None, gate_timeout_s: float) -> LiveVariant:
    """Start a variant's worker with a gate: it builds, warms up and stops at its first window.
    A cluster variant's supervisor relays the gate to its training tasks (bench.launch.gate_relay)."""
    fifo = run_dir / LOGS_DIR / f"{variant.id}.gate"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo, 0o600)
    writer = os.open(fifo, os.O_RDWR)  # held by the parent, so a release never blocks
    announced: queue.Queue[tuple[str, int, float]] = queue.Queue()
    gate = ChildEnv(gate=str(fifo), gate_timeout_s=gate_timeout_s).to_env()
    if variant.is_cluster:
        cmd, env = cluster.supervisor_command(variant, run_dir), gate
    else:
        cmd = worker_command(run_dir, variant, record_path_of(run_dir, variant))
        env = {**variant_env(run_dir, variant), **gate}
    proc = WorkerProcess(cmd, worker_env(env), run_dir / LOGS_DIR / f"{variant.id}.log", progress,
                         forkserver=forkserver_for(variant, forkservers),
                         on_gate=lambda segment, index: announced.put(
                             (segment, index, time.monotonic())))
    return LiveVariant(variant, run_dir, proc, fifo, announced, _writer=writer)


def untimed_width() -> int:
    """How many variants run untimed work at once: one per core (building is mostly
    single-threaded Python tracing and graph optimisation), at most BUILD_PARALLELISM."""
    return max(1, min(BUILD_PARALLELISM, os.cpu_count() or 1))


def _groups_per_core(variants: list[Any]) -> list[list[Any]]:
    """Variants that build and warm up (or run other untimed work) at the same time."""
    width = untimed_width()
    return [variants[k:k + width] for k in range(0, len(variants), width)]


def finishing_width(variants: list[Variant]) -> int:
    """How many variants may finish at once: one per core, since finishing (final loss, FLOPs,
    checks, the record) times nothing; one at a time when a variant measures what checkpoints
    cost, which it does after its windows and which must have the machine to itself, or trains
    to a `[target]`, whose seconds to target are wall clock too."""
    if any(v.measure.checkpoint is not None or v.target is not None for v in variants):
        return 1
    return untimed_width()


def gate_timeout(variants: list[Variant]) -> float:
    """How long one worker may wait at its gate: every other variant's budget, run in full."""
    return sum(cluster.budget_s(v) if v.is_cluster else v.measure.timeout_s
               for v in variants) + EXIT_GRACE_S


def play(variants: list[Variant], run_dir: Path, forkservers: ForkServers | None,
         progress_for: Callable[[Variant], ProgressFn | None],
         rng: random.Random | None = None) -> Iterator[VariantRecord]:
    """Run one batch of variants with interleaved windows; yield each record as it is taken (in
    the variants' order; clusters that cannot start here last). A cluster variant takes part as
    one participant. Every process is torn down, also on an error or Ctrl-C."""
    rng = rng or random.Random()
    timeout_s = gate_timeout(variants)
    live: list[LiveVariant] = []
    skipped = {v.id: record for v in variants if v.is_cluster
               and (record := cluster.isolation_skip(v)) is not None}
    runnable = [v for v in variants if v.id not in skipped]
    try:
        for group in _groups_per_core(runnable):  # builds run side by side: nothing is timed yet
            await_forkservers(group, forkservers)
            since = time.monotonic()
            started = [start(v, run_dir, forkservers, progress_for(v), timeout_s) for v in group]
            live += started
            for one in started:
                one.run_to_gate(since)
        rounds, first_of_pair = 0, None  # the order the next round reverses, if any
        while waiting := [v for v in live if v.at is not None and v.at[0] != FINISH]:
            alive = [v.variant.control for v in live if v.at is not None]
            for one in [v for v in waiting if measures_nothing(v.variant.control, alive)]:
                one.let_go_unmeasured()
                waiting.remove(one)
            if not waiting:
                break
            waiting, first_of_pair = round_order(waiting, first_of_pair, rng)
            for position, one in enumerate(waiting):
                one.positions.append(position)
                one.release()
                one.run_to_gate()
            rounds += 1
        width = finishing_width(runnable)
        for one in live:
            let_finish(live, width)
            record = one.finish(while_waiting=lambda: let_finish(live, width))
            let_finish(live, width)  # the next finishes while this record is read
            yield record.add(interleave=Interleave(batch=[v.id for v in runnable], rounds=rounds,
                                                   positions=one.positions))
        yield from skipped.values()
    finally:
        for one in live:
            one.close()


def measures_nothing(control: str | None, alive: list[str | None]) -> bool:
    """Whether a machine control (`control`) has nothing left to measure, beside participants
    still alive with these roles (None: a variant): the twin once its baseline has ended, the
    yardstick once every variant has."""
    if control == "twin":
        return "baseline" not in alive
    if control == "yardstick":
        return all(role in MACHINE_CONTROLS for role in alive)
    return False


def let_finish(live: list[LiveVariant], width: int) -> None:
    """Let the variants waiting to finish go, in their order, while fewer than `width` of those
    already let go still run: a core that a finished variant frees is taken at once, whichever
    variant it was, although records are taken in order."""
    running = sum(one.finishing for one in live)
    for one in live:
        if running >= width:
            return
        if one.at is not None and one.at[0] == FINISH:
            one.release_to_finish()
            running += 1


def round_order(waiting: list[Any], first_of_pair: list[Any] | None,
                rng: random.Random) -> tuple[list[Any], list[Any] | None]:
    """The order of the next round, and the order the round after it must reverse (None: it
    shuffles afresh). A round reverses the first of its pair when the same participants wait
    (ABBA: linear drift across the pair cancels for every variant); otherwise it is a fresh
    shuffle and the first of a new pair."""
    if first_of_pair is not None and set(map(id, first_of_pair)) == set(map(id, waiting)):
        return first_of_pair[::-1], None
    order = list(waiting)
    rng.shuffle(order)
    return order, order


def batches(variants: list[Variant], max_live: int) -> list[list[Variant]]:
    """Split variants into batches of at most `max_live`, as even as possible, in order (the
    runner puts the variants that must share a batch, baseline and control twin, first)."""
    if max_live < 1:
        raise ValueError("max_live must be at least 1")
    count = -(-len(variants) // max_live)
    out, start = [], 0
    for k in range(count):
        size = len(variants) // count + (k < len(variants) % count)
        out.append(variants[start:start + size])
        start += size
    return out


def max_live_for(count: int) -> int:
    """How many of `count` variants may be alive at once, from free host memory and, where
    `nvidia-smi` reports GPUs, the least free device memory (at least 2, so pairs interleave)."""
    limits = [count, _free_bytes_host() * MEMORY_SHARE // HOST_BYTES_PER_LIVE]
    if (gpu_free := _free_bytes_gpu()) is not None:
        limits.append(gpu_free * MEMORY_SHARE // GPU_BYTES_PER_LIVE)
    return int(max(2, min(limits)))


def _free_bytes_host() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _free_bytes_gpu() -> int | None:
    """The smallest free memory of the visible GPUs, or None without nvidia-smi or GPUs."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    free = [int(v) for v in out.stdout.split() if v.strip().isdigit()]
    return min(free) * (1 << 20) if out.returncode == 0 and free else None
