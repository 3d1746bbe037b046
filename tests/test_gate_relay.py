"""A cluster's gate relay, on real FIFOs: its training tasks are one participant of the rounds,
let go together, and it remembers where it last let them go (what a timeout's reason names)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from bench import protocol
from bench.launch.cluster_plan import Task
from bench.launch.gate_relay import GateRelay

TASKS = [Task("worker", 0, True), Task("worker", 1, True)]


def _released(fd: int) -> bytes:
    try:
        return os.read(fd, len(protocol.GO))
    except BlockingIOError:
        return b""


def test_tasks_go_together_and_the_relay_remembers_where(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runner_gate = tmp_path / "runner.gate"
    os.mkfifo(runner_gate)
    relay = GateRelay(str(runner_gate), tmp_path, "v")
    for task in TASKS:
        relay.task_env(task)
    readers = [os.open(relay.fifo(t), os.O_RDONLY | os.O_NONBLOCK) for t in TASKS]
    runner = os.open(runner_gate, os.O_WRONLY | os.O_NONBLOCK)
    try:
        relay.on_gate(TASKS[0])(protocol.WINDOW, 3)
        relay.poll()
        assert capsys.readouterr().out == ""  # worker-1 is not at its gate yet
        relay.on_gate(TASKS[1])(protocol.WINDOW, 3)
        relay.poll()
        assert capsys.readouterr().out.strip() == protocol.format_gate(protocol.WINDOW, 3)
        assert relay.released is None and protocol.last_release(relay.released) == ""
        relay.poll()
        assert [_released(fd) for fd in readers] == [b"", b""]  # not before the runner's go
        os.write(runner, protocol.GO)
        relay.poll()
        assert [_released(fd) for fd in readers] == [protocol.GO, protocol.GO]
        assert protocol.last_release(relay.released) == \
            ", last let go into its turn 4 of the rounds"
        for task in TASKS:
            relay.on_gate(task)(protocol.FINISH, 0)
        relay.poll()
        os.write(runner, protocol.GO)
        relay.poll()
        assert "its finish" in protocol.last_release(relay.released)
        relay.reset()  # a new attempt starts from no release
        assert relay.released is None
    finally:
        for fd in [*readers, runner]:
            os.close(fd)
        relay.close()


def test_the_supervisor_wakes_on_an_announcement_and_on_the_go(tmp_path: Path) -> None:
    """`wait` returns when a task announces or the runner says go, not at its timeout: each turn
    of a cluster passes the relay without a polling delay."""
    runner_gate = tmp_path / "runner.gate"
    os.mkfifo(runner_gate)
    relay = GateRelay(str(runner_gate), tmp_path, "v")
    relay.task_env(TASKS[0])
    runner = os.open(runner_gate, os.O_WRONLY | os.O_NONBLOCK)
    never_s = 60.0  # what a wait that missed its wake-up would take
    try:
        relay.on_gate(TASKS[0])(protocol.WINDOW, 0)
        started = time.monotonic()
        relay.wait(never_s)
        assert time.monotonic() - started < never_s
        relay.poll()  # announced to the runner; now its go wakes the supervisor
        threading.Timer(0.2, os.write, (runner, protocol.GO)).start()
        started = time.monotonic()
        relay.wait(never_s)
        assert time.monotonic() - started < never_s
        relay.poll()
        assert relay.released == (protocol.WINDOW, 0)
    finally:
        os.close(runner)
        relay.close()
