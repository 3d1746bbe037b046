"""What bench tells a child process through `BENCH_*` environment variables, said once.

A launcher builds a `ChildEnv` of what the process must know and lays `to_env()` over the
process's environment; the process reads `ChildEnv.from_env()`. Every `BENCH_*` variable bench
reads or sets is a field here, two of them set by the user (their cache folders, which children
inherit as they inherit the rest of the environment): their names are written nowhere else, and
the reference page of environment variables is written from these fields (bench.cli.docs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any


def _var(name: str, set_by: str, doc: str, parse: Callable[[str], Any] = str,
         text: Callable[[Any], str] = str) -> Any:
    return field(default=None, metadata={"env": name, "set_by": set_by, "doc": doc,
                                         "parse": parse, "text": text})


def _flag(text: str) -> bool:
    return text == "1"


@dataclass(frozen=True)
class ChildEnv:
    """The `BENCH_*` variables of one process; None: not set."""

    cache_dir: str | None = _var(
        "BENCH_CACHE_DIR", "you", "bench's cache folder (default `~/.cache/bench`): the measured "
        "peak FLOP/s (`peak.json`) and, under `envs/`, the virtualenvs of `[environment]` tables.")
    env_cache: str | None = _var(
        "BENCH_ENV_CACHE", "you", "the cache of `[environment]` virtualenvs, before "
        "`$BENCH_CACHE_DIR/envs` (`--env-cache` wins over both).")
    run_dir: str | None = _var(
        "BENCH_RUN_DIR", "bench, for every process of a run", "the run directory: how a run's "
        "processes are found (the tests look for leftovers by it).")
    trace_dir: str | None = _var(
        "BENCH_TRACE_DIR", "bench, per variant and per cluster task", "where its profile and "
        "TensorBoard event files go.")
    data_cache: str | None = _var(
        "BENCH_DATA_CACHE", "bench, per run", "the run's cache folder: the first variant saves "
        "synthetic arrays there and the others load the same bytes.")
    checkpoint_dir: str | None = _var(
        "BENCH_CHECKPOINT_DIR", "bench, per variant", "the variant's checkpoint folder "
        "(`measure.checkpoint`).")
    gate: str | None = _var(
        "BENCH_GATE", "bench, interleaved runs", "the FIFO the parent writes `go` into, one line "
        "per release of a waiting worker.")
    gate_timeout_s: float | None = _var(
        "BENCH_GATE_TIMEOUT", "bench, interleaved runs", "how long a worker waits at its gate "
        "before it decides the parent is gone.", float, repr)
    spawn_time: float | None = _var(
        "BENCH_SPAWN_TIME", "bench, per process", "the parent's clock when it started the process "
        "(`timing.phases.start`).", float, repr)
    host_gpus: list[dict[str, Any]] | None = _var(
        "BENCH_HOST_GPUS", "bench, per process", "the GPUs nvidia-smi listed for the launcher, as "
        "JSON, so a worker does not ask again.", json.loads, lambda gpus: json.dumps(list(gpus)))
    logical_gpu_memory_mb: int | None = _var(
        "BENCH_LOGICAL_GPU_MEMORY_MB", "bench (`bench plan` shows it)", "the memory limit of each "
        "logical GPU where one GPU is split.", int)
    gpu_shared: bool | None = _var(
        "BENCH_GPU_SHARED", "bench (`bench plan` shows it)", "`1`: other processes of the variant "
        "use the same GPUs.", _flag, lambda shared: "1" if shared else "0")
    cluster_computes_on: str | None = _var(
        "BENCH_CLUSTER_COMPUTES_ON", "bench, cluster tasks", "what a cluster's computing tasks run "
        "on (`gpu` or `cpu`), so the coordinator's record states the variant's device kind.")
    held_after_record: bool | None = _var(
        "BENCH_HELD_AFTER_RECORD", "bench, local cluster tasks", "`1`: once its record is written "
        "the task waits to be ended by its supervisor, which ends the cluster when every task "
        "has one, so no task leaves while a peer still runs a collective with it.", _flag,
        lambda held: "1" if held else "0")
    fault_events: str | None = _var(
        "BENCH_FAULT_EVENTS", "bench, `[fault]` variants", "the events file each task appends what "
        "it does to (JSON lines with wall-clock times).")
    backup_dir: str | None = _var(
        "BENCH_BACKUP_DIR", "bench, `[fault]` variants", "the MultiWorkerMirrored backup folder "
        "that every attempt shares.")

    def to_env(self) -> dict[str, str]:
        """The variables of the fields that are set."""
        return {f.metadata["env"]: f.metadata["text"](value) for f in fields(self)
                if (value := getattr(self, f.name)) is not None}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ChildEnv:
        """What this process was told (`environ`: os.environ)."""
        environ = os.environ if environ is None else environ
        return cls(**{f.name: f.metadata["parse"](environ[f.metadata["env"]])
                      for f in fields(cls) if f.metadata["env"] in environ})

    def but(self, **changes: Any) -> ChildEnv:
        return replace(self, **changes)

    @staticmethod
    def name(field_name: str) -> str:
        """The variable of a field, e.g. `ChildEnv.name("env_cache")` is BENCH_ENV_CACHE."""
        return VARIABLES[field_name].metadata["env"]


VARIABLES = {f.name: f for f in fields(ChildEnv)}


def documented() -> dict[str, tuple[str, str]]:
    """Every variable: (who sets it, what it holds), for the reference page."""
    return {f.metadata["env"]: (f.metadata["set_by"], f.metadata["doc"]) for f in fields(ChildEnv)}


# The Keras backend of a variant's processes: Keras reads KERAS_BACKEND once, at import, and JAX
# reads XLA_FLAGS once, when it first starts its CPU client, so both are in the environment the
# process starts with (such a process never forks from a fork server, which imported Keras on
# TensorFlow). N host devices on a CPU are XLA's counterpart of TensorFlow's logical devices.
KERAS_BACKEND_ENV = "KERAS_BACKEND"
XLA_FLAGS_ENV = "XLA_FLAGS"
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


# XLA's CPU collectives wait this long for every participant of an all-reduce, then abort the
# process (SIGABRT, with a fatal log line naming the rendezvous); bench lowers it to a share of
# the variant's budget, so a stuck rendezvous fails its variant with XLA's own reason.
COLLECTIVE_TIMEOUT_FLAG = "--xla_cpu_collective_call_terminate_timeout_seconds"
# XLA's concurrency-optimized scheduler, off: with it, a plain Keras fit with DataParallel over 2
# host devices on 2 busy cores hung at its first all-reduce in 6 of 7 runs (one device's program
# blocked in the rendezvous on a thread of the Eigen pool the other device's matmul needed);
# without it, in 1 of 5 (docs/measuring/measurements.md#jax). A mitigation, not a fix: the
# collectives' timeout stays the guard.
SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
XLA_COLLECTIVE_TIMEOUT_S = 40  # XLA's own default


def collective_timeout_s(budget_s: float) -> int:
    """How long a JAX variant's all-reduce may wait for its peers: XLA's 40 s, or a quarter of
    the variant's budget where that is shorter (at least 5 s, above any first step measured)."""
    return max(5, min(XLA_COLLECTIVE_TIMEOUT_S, int(budget_s / 4)))


def backend_env(backend: str, host_devices: int, inherited: Mapping[str, str] | None = None,
                budget_s: float | None = None) -> dict[str, str]:
    """What a process of a variant on `backend` is told beyond bench's own variables: nothing
    for TensorFlow; for JAX the backend, `host_devices` CPU devices and the collectives'
    timeout within `budget_s`, added to the XLA_FLAGS it would inherit (`inherited`:
    os.environ)."""
    if backend == "tensorflow":
        return {}
    inherited = os.environ if inherited is None else inherited
    ours = (HOST_DEVICES_FLAG, COLLECTIVE_TIMEOUT_FLAG)
    flags = [f for f in inherited.get(XLA_FLAGS_ENV, "").split() if not f.startswith(ours)]
    flags.append(f"{HOST_DEVICES_FLAG}={host_devices}")
    if host_devices > 1 and not any(f.startswith(SCHEDULER_FLAG) for f in flags):
        flags.append(f"{SCHEDULER_FLAG}=false")
    if budget_s is not None:
        flags.append(f"{COLLECTIVE_TIMEOUT_FLAG}={collective_timeout_s(budget_s)}")
    return {KERAS_BACKEND_ENV: backend, XLA_FLAGS_ENV: " ".join(flags)}
