"""How a worker process leaves once its record is written.

A single-process variant leaves at once, without TensorFlow's teardown (seconds), which cannot
change the written record. A cluster task does not: a peer may still run a collective with it
(reading a metric, checkpointing) or pull the last one's buffers from it, which fails once it
has left. Its supervisor holds it (ChildEnv.held_after_record) and ends the whole cluster when
every task has written its record; a task nobody holds (a Slurm job's) leaves through
TensorFlow's shutdown barrier.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from bench.child_env import ChildEnv

# How long a held cluster task waits to be ended after its record (its supervisor ends the
# cluster within a poll of the last record; this bounds the wait should nothing end it).
HELD_LIMIT_S = 600.0


def end_on_sigterm() -> None:
    """SIGTERM ends this process at once from here on, whoever had taken the signal
    (TensorFlow's coordination service takes it as a preemption notice and carries on). Called
    as the record is written: nothing is left to save, and the supervisor ending a held cluster
    need not wait out a grace period."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def hold_until_ended() -> None:
    """Where the supervisor holds this task, wait, the record written, to be ended with the
    whole cluster."""
    if ChildEnv.from_env().held_after_record:
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(HELD_LIMIT_S)


def exit_now(code: int, cluster_task: bool) -> None:
    """End the process with `code`: at once, or through TensorFlow's shutdown for a cluster
    task."""
    if cluster_task:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
