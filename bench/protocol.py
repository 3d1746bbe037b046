"""The tiny line protocol between a worker and the parent.

Records travel as files (robust to TensorFlow's own chatter on stdout/stderr); only what must be
live uses the pipe: progress, and the gate. At a gate the worker prints which segment it is
about to run and blocks until the parent writes `go` into the FIFO its environment names
(`ChildEnv.gate`); that is how the runner interleaves the timed windows of many live variants,
one at a time.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv

# Where progress goes, on both sides of the pipe: (steps done, total steps).
ProgressFn = Callable[[int, int], None]

PROGRESS_PREFIX = "@@bench-progress "
GATE_PREFIX = "@@bench-gate "
GO = b"go\n"

# The segments a worker waits at a gate before, in its order: its turns (one per round: settling
# steps, then an observed and an unobserved window), the traced turn, then the rest of the
# variant (checks, the record).
WINDOW, TRACE, FINISH = "window", "trace", "finish"
SEGMENTS = (WINDOW, TRACE, FINISH)


def last_release(released: tuple[str, int] | None) -> str:
    """Where a process (or a cluster's tasks) was last let go from its gate, for a timeout's
    reason: ', last let go into its turn 7 of the rounds'; '' before the first release."""
    if released is None:
        return ""
    segment, index = released
    what = {WINDOW: f"its turn {index + 1} of the rounds", TRACE: "its traced turn"}.get(
        segment, "its finish (after its windows: final loss, checks, its record)")
    return f", last let go into {what}"


def format_progress(done: int, total: int) -> str:
    return f"{PROGRESS_PREFIX}{done} {total}"


def parse_progress(line: str) -> tuple[int, int] | None:
    if not line.startswith(PROGRESS_PREFIX):
        return None
    try:
        done, total = line[len(PROGRESS_PREFIX):].split()
        return int(done), int(total)
    except ValueError:
        return None


def format_gate(segment: str, index: int = 0) -> str:
    return f"{GATE_PREFIX}{segment} {index}"


def parse_gate(line: str) -> tuple[str, int] | None:
    """(segment, index) from a gate line, None for any other line."""
    if not line.startswith(GATE_PREFIX):
        return None
    try:
        segment, index = line[len(GATE_PREFIX):].split()
        return (segment, int(index)) if segment in SEGMENTS else None
    except ValueError:
        return None


class EventLog:
    """This task's events file (nothing is written when the launcher named none).

    A [fault] variant's tasks (bench.training.recovery, bench.launch.ps_server) append what they
    do to the events file the supervisor names (`ChildEnv.fault_events`: JSON lines with
    wall-clock times); the supervisor reads the recovery timeline from them
    (bench.launch.recovery_timeline)."""

    def __init__(self, path: str | None = None) -> None:
        path = path if path is not None else ChildEnv.from_env().fault_events
        self._fh = open(path, "a", encoding="utf-8") if path else None

    def write(self, event: str, **fields: Any) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
            self._fh.flush()


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events a task wrote (a line cut short by a kill is left out)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut short by the kill
    return out


_EMIT_LOCK = threading.Lock()


def emit(line: str) -> None:
    """Write one protocol line to stdout whole, from any thread. `print` writes the text and its
    newline apart: a progress line from Keras' callback thread and a gate request from the
    training thread could then share a line ("@@bench-progress 116 467@@bench-gate window 2"),
    the parent would miss the request, and the variant would wait at its gate until its budget
    ran out (seen with Keras fit on JAX, whose callbacks run in their own thread)."""
    with _EMIT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
