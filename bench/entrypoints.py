"""The modules bench starts as `python -m MODULE` in a child process, named once.

Every launch builds its command from these constants, so a module cannot be renamed without the
launches following; tests/test_layout.py checks that each one exists and has a `main`.
"""

from __future__ import annotations

import sys

WORKER = "bench.worker"  # one variant (or one cluster task) in one process
TRACE_ANALYSIS = "bench.trace.analysis"  # offline xprof analysis of a trace logdir
FORK_SERVER = "bench.launch.forkserver_main"  # imports TensorFlow once, then forks workers
CLUSTER_SUPERVISOR = "bench.launch.supervisor"  # starts, watches and tears down a local cluster
PS_SERVER = "bench.launch.ps_server"  # a parameter-server task: a bare tf.distribute.Server
DEVICE_PROBE = "bench.training.probe"  # prints the devices TensorFlow sees, as JSON
TENSORBOARD = "tensorboard.main"  # TensorBoard's own server (bench tensorboard; not bench's code)
CLI = "bench.cli"  # the `bench` command itself (a Slurm job's tasks run `bench worker`)

ALL = (WORKER, TRACE_ANALYSIS, FORK_SERVER, CLUSTER_SUPERVISOR, PS_SERVER, DEVICE_PROBE, CLI)


def command(module: str, *args: str, python: str | None = None) -> list[str]:
    """The command line that runs `module` with `python`: a variant's [environment]
    interpreter (bench.scenario.environment.interpreter), else this one."""
    return [python or sys.executable, "-m", module, *args]
