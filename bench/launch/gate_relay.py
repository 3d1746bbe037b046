"""A cluster variant as one participant of the runner's interleaved rounds.

The runner releases one participant at a time through a FIFO gate (bench.launch.rounds). A
cluster has several training processes (every MultiWorkerMirrored worker; the ParameterServer
coordinator), and they must run each timed window together: a collective step needs all its
workers. The supervisor therefore gives each training task a gate of its own and relays: once
every training task has announced the same segment, it announces that segment to the runner;
when the runner says go, it releases every task at once. While the cluster waits for the runner,
its budget is paused, as a single variant's is, and its servers stay up (TensorFlow's heartbeats
run on their own threads while the Python side blocks at the gate).

The supervisor's loop sleeps in `wait`, which returns as soon as a task announces or the runner
says go: a turn passes the relay without a polling interval's delay each way, time in which
nothing would run on the machine.
"""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

from bench import protocol
from bench.child_env import ChildEnv
from bench.launch.cluster_plan import Task


class GateRelay:
    """Between the runner's gate (`parent_fifo`, None when not interleaved) and the tasks'."""

    def __init__(self, parent_fifo: str | None, logs: Path, variant_id: str) -> None:
        self._parent = os.open(parent_fifo, os.O_RDWR) if parent_fifo else None
        self._logs = logs
        self._variant_id = variant_id
        self._lock = threading.Lock()
        self._at: dict[Task, tuple[str, int]] = {}
        self._tasks: dict[Task, int] = {}  # gated task -> the write end of its FIFO
        self._announced: tuple[str, int] | None = None
        self._waiting_since: float | None = None
        self._stale_go = False  # the runner's go for an announcement a restart made void
        self.released: tuple[str, int] | None = None  # the segment the tasks were last let go into
        self.paused_s = 0.0  # time spent waiting for the runner: not charged to the budget
        self._wake_r, self._wake_w = os.pipe()  # an announcement wakes `wait`
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    @property
    def interleaved(self) -> bool:
        return self._parent is not None

    def fifo(self, task: Task) -> Path:
        return self._logs / f"{self._variant_id}.{task.name}.gate"

    def task_env(self, task: Task) -> dict[str, str]:
        """The gate a task waits at: its own FIFO for a training task of an interleaved run,
        none otherwise (an empty gate also hides the runner's gate of the supervisor)."""
        if not self.interleaved or not task.trains:
            return ChildEnv(gate="").to_env()
        path = self.fifo(task)
        path.unlink(missing_ok=True)
        os.mkfifo(path, 0o600)
        with self._lock:
            self._tasks[task] = os.open(path, os.O_RDWR)
        return ChildEnv(gate=str(path)).to_env()

    def on_gate(self, task: Task) -> protocol.ProgressFn:
        """The callback for a task's gate announcements (called from its reader thread)."""
        def announce(segment: str, index: int) -> None:
            with self._lock:
                self._at[task] = (segment, index)
                if self._wake_w >= 0:  # a task's last lines may come after `close`
                    try:
                        os.write(self._wake_w, b"!")
                    except BlockingIOError:  # the pipe is full of wake-ups already
                        pass
        return announce

    def wait(self, timeout_s: float) -> None:
        """Sleep until a task announces, the runner says go (while it may) or `timeout_s`."""
        watched = [self._wake_r]
        if self._parent is not None and (self._announced is not None or self._stale_go):
            watched.append(self._parent)
        readable, _, _ = select.select(watched, [], [], timeout_s)
        if self._wake_r in readable:
            try:
                os.read(self._wake_r, 4096)
            except BlockingIOError:
                pass

    def poll(self) -> None:
        """One step of the relay: announce to the runner when every task waits at the same
        segment; release them all when the runner says go."""
        if self._parent is None:
            return
        if self._stale_go and self._read_go():
            self._stale_go = False
        with self._lock:
            if self._announced is None:
                segments = set(self._at.values())
                if self._tasks and len(self._at) == len(self._tasks) and len(segments) == 1:
                    self._announced = segments.pop()
                    self._waiting_since = time.monotonic()
                    print(protocol.format_gate(*self._announced), flush=True)
                return
        if not self._read_go():
            return
        with self._lock:
            self._at.clear()
            self.released, self._announced = self._announced, None
            if self._waiting_since is not None:
                self.paused_s += time.monotonic() - self._waiting_since
                self._waiting_since = None
            for fd in self._tasks.values():
                os.write(fd, protocol.GO)

    def _read_go(self) -> bool:
        assert self._parent is not None
        readable, _, _ = select.select([self._parent], [], [], 0)
        return bool(readable) and os.read(self._parent, len(protocol.GO)) == protocol.GO

    def waiting_s(self) -> float:
        """Paused time so far, the current wait included."""
        with self._lock:
            current = time.monotonic() - self._waiting_since if self._waiting_since else 0.0
        return self.paused_s + current

    def reset(self) -> None:
        """A new attempt at the cluster (new tasks, new FIFOs)."""
        with self._lock:
            for task, fd in self._tasks.items():
                os.close(fd)
                self.fifo(task).unlink(missing_ok=True)
            self._tasks.clear()
            self._at.clear()
            self._stale_go = self._stale_go or self._announced is not None
            self._announced = self.released = None
            if self._waiting_since is not None:
                self.paused_s += time.monotonic() - self._waiting_since
                self._waiting_since = None

    def close(self) -> None:
        self.reset()
        if self._parent is not None:
            os.close(self._parent)
            self._parent = None
        with self._lock:
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
            self._wake_r = self._wake_w = -1
