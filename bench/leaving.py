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
from bench.launch.cluster_plan import read_tf_config

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


def in_cluster() -> bool:
    """Whether this process is a task of a TF_CONFIG cluster."""
    return bool(read_tf_config().get("task"))


def exit_now(code: int) -> None:
    """End the process with `code`: a cluster's task through TensorFlow's shutdown (its peers
    may still pull the last collective's buffers from it, which the shutdown barrier waits for),
    any other at once, without TensorFlow's slow teardown (the record is written).

    It leaves as sys.exit does: under a fork server that is an interpreter of its own that ends
    the interpreter; under one forked inside a supervisor the supervisor's frames lie below, and
    `SystemExit` stops where the server catches it."""
    if in_cluster():
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
